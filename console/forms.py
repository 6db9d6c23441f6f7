"""The console's forms carry the fields and their labels; they check nothing themselves. The
values go to the API's input serializer and then its service, and the ApplicationError either
raises is placed back on the form: each of its `fields` next to the field of that name, an
error the API reports without fields next to the field its code concerns, else above."""

import contextlib
import copy
import uuid

from django import forms
from django.conf import settings
from django.conf.locale import LANG_INFO
from django.core.exceptions import NON_FIELD_ERRORS
from django.core.validators import ProhibitNullCharactersValidator

from core.errors import ApplicationError, ErrorCode
from history.models import CallStatus
from virtual_numbers.hours import CLOSED_DATES_MAX, DAYS, WINDOWS_MAX
from virtual_numbers.models import FORWARD_RING_SECONDS, FORWARD_TARGETS_MAX, ForwardCallerId
from voiceapps.languages import LANGUAGES
from webhooks.models import EVENT_TYPES

# The interface document fixes this message in Chinese; people here read the code's meaning.
SENTENCES = {ErrorCode.CAPTCHA_WRONG_ANSWER: ErrorCode.CAPTCHA_WRONG_ANSWER.meaning}


class DescribedField(forms.BoundField):
    """An input described by its errors and its help text (aria-describedby), as a screen
    reader should announce them."""

    def build_widget_attrs(self, attrs, widget=None):
        attrs = super().build_widget_attrs(attrs, widget)
        described_by = []
        if self.errors:
            described_by.append(f"{self.auto_id}_errors")
        if self.help_text:
            described_by.append(f"{self.auto_id}_helptext")
        if described_by:
            attrs["aria-describedby"] = " ".join(described_by)
        return attrs


def text(label: str, *, help_text: str = "", widget=None, **attrs) -> forms.CharField:
    """A text input that takes any string as typed, NUL included: the API's serializer judges
    it, with its own sentence and status (400)."""
    widget = widget or forms.TextInput
    field = forms.CharField(
        label=label,
        help_text=help_text,
        required=False,
        strip=False,
        widget=widget(attrs=attrs),
    )
    field.validators = [
        check
        for check in field.validators
        if not isinstance(check, ProhibitNullCharactersValidator)
    ]
    return field


def choice(label: str, choices=(), *, help_text: str = "") -> forms.CharField:
    """A select whose value is sent on as it came (any string): the API's serializer judges it."""
    field = text(label, help_text=help_text)
    field.widget = forms.Select(choices=choices)
    return field


def number_label(number) -> str:
    """One of the user's numbers in a select: "Shop (+442079460042)"."""
    return f"{number.alias} ({number.number})"


def secret(label: str, *, help_text: str = "", **attrs) -> forms.CharField:
    return text(label, help_text=help_text, widget=forms.PasswordInput, **attrs)


class ConsoleForm(forms.Form):
    bound_field_class = DescribedField
    # An API field named otherwise here, and the field an error without `fields` concerns.
    api_names: dict[str, str] = {}
    code_fields: dict[ErrorCode, str] = {}

    def values(self, *names: str) -> dict:
        """The typed values of `names`, for the API's input serializer."""
        return {name: self.cleaned_data.get(name) or "" for name in names}

    def place(self, error: ApplicationError) -> None:
        """Show `error` where it belongs (module docstring)."""
        for name, messages in (error.fields or {}).items():
            # An item of a list is named by its place in it ("events.0"): shown by the list.
            field = self.api_names.get(name, name.split(".")[0])
            for message in messages:
                self.add_error(field if field in self.fields else None, message)
        if not error.fields:
            field = self.code_fields.get(error.code)
            self.add_error(field, SENTENCES.get(error.code, error.message))


PASSWORD_HELP = "At least 8 characters, not a common password, not like your e-mail."


class LoginForm(ConsoleForm):
    email = text("E-mail address", type="email", autocomplete="username")
    password = secret("Password", autocomplete="current-password")


OTP_HELP = "The 6-digit code your authenticator app shows, or one of your recovery codes."


def otp(label: str = "Code", *, help_text: str = OTP_HELP) -> forms.CharField:
    return text(
        label,
        help_text=help_text,
        autocomplete="one-time-code",
        spellcheck="false",
        autocapitalize="none",
    )


class AccountDeleteForm(ConsoleForm):
    password = secret("Your password", autocomplete="current-password")
    otp = otp("Code from your authenticator app")
    code_fields = {
        ErrorCode.PASSWORD_MISMATCH: "password",
        ErrorCode.OTP_REQUIRED: "otp",
        ErrorCode.OTP_INVALID: "otp",
    }

    def __init__(self, data=None, *, second_factor: bool = False, **kwargs):
        super().__init__(data, **kwargs)
        if not second_factor:
            del self.fields["otp"]


class LoginCodeForm(ConsoleForm):
    otp = otp()
    code_fields = {ErrorCode.OTP_INVALID: "otp", ErrorCode.OTP_REQUIRED: "otp"}


class PasswordConfirmForm(ConsoleForm):
    password = secret("Password", autocomplete="current-password")
    code_fields = {ErrorCode.PASSWORD_MISMATCH: "password"}


class TwoFactorConfirmForm(ConsoleForm):
    code = otp(help_text="The 6-digit code your authenticator app shows for this account.")
    code_fields = {ErrorCode.OTP_INVALID: "code"}


class TwoFactorDisableForm(ConsoleForm):
    password = secret("Password", autocomplete="current-password")
    code = otp()
    code_fields = {ErrorCode.OTP_INVALID: "code", ErrorCode.PASSWORD_MISMATCH: "password"}


class RegisterForm(ConsoleForm):
    email = text("E-mail address", type="email", autocomplete="email")
    password = secret("Password", help_text=PASSWORD_HELP, autocomplete="new-password")
    code_fields = {ErrorCode.EMAIL_TAKEN: "email"}


class PasswordChangeForm(ConsoleForm):
    currentPassword = secret(  # noqa: N815 - the API's name, so its errors land here
        "Current password", autocomplete="current-password"
    )
    newPassword = secret(  # noqa: N815
        "New password", help_text=PASSWORD_HELP, autocomplete="new-password"
    )
    code_fields = {ErrorCode.PASSWORD_MISMATCH: "currentPassword"}


class PasswordResetForm(ConsoleForm):
    email = text("E-mail address", type="email", autocomplete="email")


class PasswordResetConfirmForm(ConsoleForm):
    newPassword = secret(  # noqa: N815
        "New password", help_text=PASSWORD_HELP, autocomplete="new-password"
    )


class VerifyEmailForm(ConsoleForm):
    """The confirm button of a mailed verification link: the token is in the page's path."""


class InvitationAcceptForm(ConsoleForm):
    """The accept button of a mailed invitation to share a number: the token is in the
    page's path."""


class MemberInviteForm(ConsoleForm):
    email = text("Their e-mail address", type="email", autocomplete="off")
    role = choice(
        "Role",
        [
            ("member", "Member: sees the calls and voicemail"),
            ("manager", "Manager: also its members"),
        ],
    )
    code_fields = {
        ErrorCode.MEMBER_EXISTS: "email",
        ErrorCode.MEMBER_IS_OWNER: "email",
        ErrorCode.MEMBERS_FULL: "email",
    }


class EmailChangeForm(ConsoleForm):
    email = text("New e-mail address", type="email", autocomplete="email")
    password = secret("Your current password", autocomplete="current-password")
    code_fields = {ErrorCode.EMAIL_TAKEN: "email", ErrorCode.PASSWORD_MISMATCH: "password"}


PIN_HELP = "4 to 8 digits. You type it on the phone to hear your voicemail."


class NumberCreateForm(ConsoleForm):
    alias = text("Alias", help_text="A name for the number, up to 64 characters.")
    pin = secret("PIN", help_text=PIN_HELP, inputmode="numeric", autocomplete="new-password")
    answer = forms.IntegerField(
        label="Answer",
        error_messages={
            "required": "Type the sum, in digits.",
            "invalid": "Type the sum, in digits.",
        },
        widget=forms.TextInput(attrs={"inputmode": "numeric", "autocomplete": "off"}),
    )
    api_names = {"captchaToken": "answer"}
    code_fields = {
        ErrorCode.CAPTCHA_WRONG_ANSWER: "answer",
        ErrorCode.CAPTCHA_INVALID: "answer",
    }


class AliasForm(ConsoleForm):
    alias = text("Alias", help_text="A name for the number, up to 64 characters.")


class PinChangeForm(ConsoleForm):
    currentPin = secret(  # noqa: N815 - the API's name, so its errors land here
        "Current PIN", inputmode="numeric", autocomplete="current-password"
    )
    newPin = secret(  # noqa: N815
        "New PIN", help_text=PIN_HELP, inputmode="numeric", autocomplete="new-password"
    )
    code_fields = {ErrorCode.PIN_MISMATCH: "currentPin", ErrorCode.PIN_LOCKED: "currentPin"}


# Blocklist, forwarding and greeting
def shown(value: str, limit: int = 40) -> str:
    """A typed value named in an error: one line, cut short."""
    value = value.replace("\x00", "\ufffd")
    return value if len(value) <= limit else value[: limit - 1] + "\u2026"


class BlockedCallerForm(ConsoleForm):
    caller_num = text(
        "Caller's number",
        help_text="In international form, like +447700900123. Their calls are refused.",
        inputmode="tel",
        autocomplete="off",
    )
    code_fields = {ErrorCode.BLOCKLIST_FULL: "caller_num"}


CALLER_ID_CHOICES = [
    (ForwardCallerId.CALLER, "The caller's number"),
    (ForwardCallerId.NUMBER, "This virtual number"),
]


class ForwardingForm(ConsoleForm):
    targets = text(
        "Your phones",
        help_text=f"One number per line, up to {FORWARD_TARGETS_MAX}, like +441134960456, or "
        "the word browser for this console with its Phone switched on. They all ring at "
        "once; the first to answer takes the call.",
        widget=forms.Textarea,
        rows=FORWARD_TARGETS_MAX,
        autocomplete="off",
    )
    ringSeconds = text(  # noqa: N815 - the API's name, so its errors land here
        "Ring time, in seconds",
        help_text=f"{FORWARD_RING_SECONDS[0]} to {FORWARD_RING_SECONDS[1]}: how long your "
        "phones ring before voicemail answers.",
        inputmode="numeric",
    )
    screening = forms.BooleanField(
        label="Screen calls: whoever picks up hears who is calling and presses 1 to take it",
        required=False,
    )
    callerId = choice(  # noqa: N815
        "What your phones show as the caller",
        CALLER_ID_CHOICES,
        help_text="Some phone networks refuse a caller's number that is not yours: choose "
        "this virtual number then.",
    )
    code_fields = {ErrorCode.DESTINATION_NOT_ALLOWED: "targets"}

    def target_lines(self) -> list[str]:
        """The typed targets, one a line, blank lines left out; one more than the API takes
        at most, so that too many is its refusal without judging a flood of lines."""
        typed = self.cleaned_data.get("targets") or ""
        lines = [line.strip() for line in typed.splitlines()]
        return [line for line in lines if line][: FORWARD_TARGETS_MAX + 1]

    def forwarding_values(self) -> dict:
        """The form as ForwardingInput takes it: ringSeconds a number when typed as one."""
        ring = (self.cleaned_data.get("ringSeconds") or "").strip()
        with contextlib.suppress(ValueError):  # else the serializer says it is no number
            ring = int(ring)
        return {
            "targets": self.target_lines(),
            "ringSeconds": ring,
            "screening": bool(self.cleaned_data.get("screening")),
            "callerId": self.cleaned_data.get("callerId") or "",
        }

    def place(self, error: ApplicationError) -> None:
        """A target's error (`targets.N`, shown by the targets) names the line typed."""
        lines = self.target_lines() if hasattr(self, "cleaned_data") else []
        fields = {}
        for name, messages in (error.fields or {}).items():
            head, _, index = name.partition(".")
            if head == "targets" and index.isdecimal() and int(index) < len(lines):
                messages = [f"{shown(lines[int(index)])}: {message}" for message in messages]
            fields[name] = messages
        if fields:
            error = copy.copy(error)
            error.fields = fields
        super().place(error)


class GreetingForm(ConsoleForm):
    greeting = text(
        "Greeting",
        help_text="What callers hear before the beep, read out by the phone system: up to "
        "500 characters. Leave it empty to use the default greeting.",
        widget=forms.Textarea,
        rows=5,
    )


class CallRecordingForm(ConsoleForm):
    """A number's recording of its forwarded calls (RecordingInput, issue 58)."""

    enabled = forms.BooleanField(label="Record this number's forwarded calls", required=False)
    announce = text(
        "Announcement",
        help_text="What both parties hear before the call is joined, read out by the phone "
        "system: up to 500 characters. Leave it empty for the default, "
        '"This call may be recorded."',
        widget=forms.Textarea,
        rows=3,
    )

    def recording_values(self) -> dict:
        """The form as RecordingInput takes it."""
        return {
            "enabled": bool(self.cleaned_data.get("enabled")),
            "announce": self.cleaned_data.get("announce") or "",
        }


RING_STRATEGY_CHOICES = [
    ("all", "All at once: the first to answer takes the call"),
    ("in_order", "In order: each for its own ring time, then the next"),
]


class RingEntryForm(ConsoleForm):
    """One entry to add to a number's ring list, as people type it: a phone, a SIP address,
    or the e-mail address of the owner or a member (the view makes it RingingInput's entry)."""

    target = text(
        "Phone, SIP address or member",
        help_text="A phone number like +441134960456, a SIP address like "
        "sip:desk@pbx.example.com, or the e-mail address of this number's owner or of one of "
        "its members (their console tabs with Phone on, and their ring phone).",
        autocomplete="off",
        spellcheck="false",
    )
    ringSeconds = text(  # noqa: N815 - the API's name, so its errors land here
        "Ring time, in seconds (optional)",
        help_text=f"{FORWARD_RING_SECONDS[0]} to {FORWARD_RING_SECONDS[1]}; empty: the list's.",
        inputmode="numeric",
    )
    code_fields = {ErrorCode.DESTINATION_NOT_ALLOWED: "target"}

    def place(self, error: ApplicationError) -> None:
        # The list's errors name the entry (`entries.N.phone`): this form's entry is the one
        # added, its time `ringSeconds`, anything else of it `target`.
        if error.fields:
            fields: dict = {}
            for name, messages in error.fields.items():
                field = "ringSeconds" if name.endswith(".ringSeconds") else "target"
                fields.setdefault(field if name.startswith("entries") else name, []).extend(
                    messages
                )
            error = copy.copy(error)
            error.fields = fields
        super().place(error)


class HoursForm(ConsoleForm):
    """A number's opening hours as people type them: one window a line ("mon-fri
    09:00-17:30"), one closed date a line. The lines become HoursInput's lists as typed; the
    serializer judges them, and its errors come back named by line."""

    doNotDisturb = forms.BooleanField(  # noqa: N815
        label="Do not disturb: every call goes to voicemail until you turn this off",
        required=False,
    )
    timeZone = text(  # noqa: N815 - the API's name, so its errors land here
        "Time zone",
        help_text="The IANA time zone the hours and dates are in, like Europe/London or "
        "America/New_York.",
        autocomplete="off",
        spellcheck="false",
    )
    weekly = text(
        "Opening hours",
        help_text="One line for each time the number takes calls: the days, then the hours, "
        "like mon-fri 09:00-17:30 or sat 10:00-13:00. Days are mon, tue, wed, thu, fri, sat, "
        "sun; a window ends after it starts, 24:00 at the latest (a night is two lines). "
        "Empty: open every day, all day, but the closed dates.",
        widget=forms.Textarea,
        rows=4,
        autocomplete="off",
        spellcheck="false",
    )
    closedDates = text(  # noqa: N815
        "Closed dates",
        help_text="One date a line, like 2026-12-25: closed all day.",
        widget=forms.Textarea,
        rows=3,
        autocomplete="off",
    )
    closedGreeting = text(  # noqa: N815
        "Closed greeting",
        help_text="What callers hear while the number is closed, read out by the phone "
        "system: up to 500 characters. Empty: your usual greeting.",
        widget=forms.Textarea,
        rows=3,
    )

    def lines(self, name: str, most: int) -> list[str]:
        """The field's lines, blank ones left out; one more than the API takes at most, so
        that too many is its refusal without reading a flood of lines."""
        typed = self.cleaned_data.get(name) or ""
        found = [line.strip() for line in typed.splitlines()]
        return [line for line in found if line][: most + 1]

    def hours_values(self) -> dict:
        """The form as HoursInput takes it."""
        return {
            "timeZone": (self.cleaned_data.get("timeZone") or "").strip(),
            "weekly": [window_of(line) for line in self.lines("weekly", WINDOWS_MAX)],
            "closedDates": self.lines("closedDates", CLOSED_DATES_MAX),
            "doNotDisturb": bool(self.cleaned_data.get("doNotDisturb")),
            "closedGreeting": self.cleaned_data.get("closedGreeting") or "",
        }

    def place(self, error: ApplicationError) -> None:
        """An error of a window or a date (`weekly.N...`, `closedDates.N`) names its line."""
        typed = {}
        if hasattr(self, "cleaned_data"):
            typed = {
                "weekly": self.lines("weekly", WINDOWS_MAX),
                "closedDates": self.lines("closedDates", CLOSED_DATES_MAX),
            }
        fields = {}
        for name, messages in (error.fields or {}).items():
            head, _, rest = name.partition(".")
            index = rest.split(".")[0]
            if head in typed and index.isdecimal() and int(index) < len(typed[head]):
                line = typed[head][int(index)]
                messages = [f"Line {int(index) + 1} ({shown(line)}): {m}" for m in messages]
            fields[name] = messages
        if fields:
            error = copy.copy(error)
            error.fields = fields
        super().place(error)


def window_of(line: str) -> dict:
    """A typed window line as HoursInput's window: the days (a range like mon-fri spelled
    out), then `start-end` as the last word; what does not fit is passed on as typed, for the
    serializer to refuse by name."""
    words = line.replace(",", " ").split()
    start = end = ""
    if words and ":" in words[-1]:
        start, _, end = words.pop().partition("-")
    days: list[str] = []
    for word in words:
        first, dash, last = word.lower().partition("-")
        if dash and first in DAYS and last in DAYS and DAYS.index(first) <= DAYS.index(last):
            days.extend(DAYS[DAYS.index(first) : DAYS.index(last) + 1])
        else:
            days.append(word.lower())
    return {"days": days, "start": start, "end": end}


def window_line(window: dict) -> str:
    """A stored window as the form shows it: "mon tue 09:00-17:30"."""
    return f"{' '.join(window['days'])} {window['start']}-{window['end']}"


# History
STATUS_CHOICES = [("all", "All calls"), *CallStatus.choices]


class HistoryFilterForm(ConsoleForm):
    status = choice("Status", STATUS_CHOICES)
    number_id = choice("Number")

    def __init__(self, data=None, *, numbers=(), shared=(), **kwargs):
        """`numbers`, the user's own; `shared`, the numbers shared with them (issue 57), in
        a group of their own: without a number the page shows the user's own numbers'
        calls only, as GET /api/history does."""
        super().__init__(data, **kwargs)
        own = [(str(number.pk), number_label(number)) for number in numbers]
        choices = [("", "All your numbers" if shared else "All numbers")]
        if shared:
            choices += [("Your numbers", own)] if own else []
            choices += [("Shared with you", [(str(n.pk), number_label(n)) for n in shared])]
        else:
            choices += own
        self.fields["number_id"].widget.choices = choices


# Calls


def language_label(code: str) -> str:
    """An espeak-ng voice as people read it: "German (de)", "English (en-gb-scotland)"; a
    code Django has no name for is shown as it is ("cmn")."""
    info = LANG_INFO.get(code.lower()) or LANG_INFO.get(code.split("-")[0].lower())
    return f"{info['name']} ({code})" if info and "name" in info else code


class CallForm(ConsoleForm):
    """Place a call: CallSubmitInput's fields. `callId` is made when the form is first shown
    (uuid4) and kept through a refusal, so a form posted twice places one call."""

    callId = forms.CharField(  # noqa: N815 - the API's name
        required=False, strip=False, widget=forms.HiddenInput
    )
    to = text(
        "To",
        help_text="The number to call, in international format, e.g. +442079460123.",
        type="tel",
        autocomplete="tel",
    )
    message = text(
        "Message",
        help_text="What the call says, up to 1000 characters.",
        widget=forms.Textarea,
        rows=3,
    )
    language = choice(
        "Language",
        sorted(((code, language_label(code)) for code in LANGUAGES), key=lambda c: c[1]),
        help_text="The voice the message is spoken in.",
    )
    from_number = choice("From", help_text="The number the call comes from.")
    machineDetection = choice(  # noqa: N815 - the API's name
        "Answering machines",
        [
            ("", "Say the message at once, whoever answers"),
            ("detect", "Say it at once, and tell me who answered"),
            ("leave_message", "On an answering machine, say it after the beep"),
        ],
        help_text="Relay listens to the answer for up to 4 seconds: a person, an answering "
        "machine, or a fax (which is hung up on when the message is left after the beep).",
    )
    # A bad callId is the form's own doing, not the person's: shown above the form.
    api_names = {"from": "from_number", "callId": NON_FIELD_ERRORS}
    code_fields = {ErrorCode.DESTINATION_NOT_ALLOWED: "to"}

    def __init__(self, data=None, *, numbers=(), **kwargs):
        kwargs.setdefault(
            "initial",
            {"callId": str(uuid.uuid4()), "language": settings.TTS_DEFAULT_LANGUAGE},
        )
        super().__init__(data, **kwargs)
        default = f"Your oldest number ({numbers[0].number})" if numbers else "The service's number"
        self.fields["from_number"].widget.choices = [("", default)] + [
            (number.number, number_label(number)) for number in numbers
        ]

    def submitted(self) -> dict:
        """The values for call_submit, as a POST /api/calls body: `from` left out
        when the default is chosen."""
        data = self.values("callId", "to", "message", "language")
        if self.cleaned_data.get("from_number"):
            data["from"] = self.cleaned_data["from_number"]
        if self.cleaned_data.get("machineDetection"):
            data["machineDetection"] = self.cleaned_data["machineDetection"]
        return data


# Account
class MatrixIdForm(ConsoleForm):
    matrixId = text(  # noqa: N815 - the API's name, so its errors land here
        "Matrix id",
        help_text="Like @name:matrix.org. Leave it empty to have no Matrix id.",
        autocomplete="off",
        spellcheck="false",
        autocapitalize="none",
    )
    code_fields = {ErrorCode.RATE_LIMITED: "matrixId", ErrorCode.MATRIX_UNAVAILABLE: "matrixId"}

    def values(self, *names: str) -> dict:
        """An empty field clears the id, as null does in the API."""
        return {"matrixId": self.cleaned_data.get("matrixId") or None}


class NotificationsForm(ConsoleForm):
    matrixInbound = forms.BooleanField(  # noqa: N815
        label="Tell me about calls to my numbers", required=False
    )
    matrixOutbound = forms.BooleanField(  # noqa: N815
        label="Tell me when my calls end", required=False
    )

    def values(self, *names: str) -> dict:
        return {name: bool(self.cleaned_data.get(name)) for name in names}


class SharedNoticesForm(ConsoleForm):
    """What a member hears of a shared number's calls besides their open console tabs
    (MembershipNotificationsInput, issue 57)."""

    webhook = forms.BooleanField(
        label="Send its calls to my webhook (as my webhook's events choose)", required=False
    )
    matrix = forms.BooleanField(label="Tell me about its calls in my Matrix room", required=False)
    missedCallEmail = forms.BooleanField(  # noqa: N815
        label="Mail me its missed calls (at most one per caller in 10 minutes)", required=False
    )
    voicemailEmail = forms.BooleanField(  # noqa: N815
        label="Mail me each voicemail left on it", required=False
    )

    def values(self) -> dict:
        return {name: bool(self.cleaned_data.get(name)) for name in self.fields}


class MailNoticesForm(ConsoleForm):
    voicemailEmail = forms.BooleanField(  # noqa: N815
        label="Mail me each voicemail left on my numbers", required=False
    )
    attachAudio = forms.BooleanField(  # noqa: N815
        label="Attach the message's audio (WAV) to the mail", required=False
    )
    missedCallEmail = forms.BooleanField(  # noqa: N815
        label="Mail me missed calls (at most one per caller and number in 10 minutes)",
        required=False,
    )

    def values(self, *names: str) -> dict:
        return {name: bool(self.cleaned_data.get(name)) for name in names}


class AnyChoices(forms.MultipleChoiceField):
    """Checkboxes whose ticked values go to the API's serializer as sent: it judges them."""

    def valid_value(self, value) -> bool:
        return True


EVENT_WORDS = {
    "call_status": "each state of your calls",
    "call_record": "a call recorded in your history",
    "call_record.transcribed": "a voicemail's transcript, when it comes after its call's record "
    "(sent with call_record too)",
    "incoming_call": "a call to one of your numbers",
    "recording.completed": "a bridged call's recording, saved with its transcript",
}


class WebhookForm(ConsoleForm):
    url = text(
        "URL",
        help_text="Where Relay POSTs your events, signed: http or https, a public address.",
        type="url",
        inputmode="url",
        autocomplete="url",
    )
    events = AnyChoices(
        label="Events",
        required=False,
        choices=[(kind, f"{kind}: {EVENT_WORDS[kind]}") for kind in EVENT_TYPES],
        help_text="None ticked: all of them.",
        widget=forms.CheckboxSelectMultiple,
    )

    def values(self, *names: str) -> dict:
        return {"url": self.cleaned_data.get("url") or "", "events": self.cleaned_data["events"]}
