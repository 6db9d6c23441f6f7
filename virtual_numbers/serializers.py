import re
from datetime import date

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from accounts.serializers import EmailAddressField
from core.fields import (
    AliasField,
    CallerNumberField,
    DialableNumberField,
    GreetingField,
    MillisecondsField,
    PinField,
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
    VerbatimCharField,
)
from core.webrtc import BROWSER
from virtual_numbers.hours import (
    CLOSED_DATES_MAX,
    DAYS,
    TIME_ZONE_MAX_LENGTH,
    WINDOWS_MAX,
    Window,
    minutes,
    overlaps,
    time_problem,
    time_zones,
)
from virtual_numbers.models import (
    FORWARD_RING_SECONDS,
    FORWARD_RING_SECONDS_DEFAULT,
    FORWARD_TARGETS_MAX,
    RING_ENTRIES_MAX,
    RING_ENTRY_KINDS,
    ForwardCallerId,
    MemberRole,
    MemberStatus,
    RingStrategy,
)


class NumberOutput(serializers.Serializer):
    id = serializers.UUIDField()
    number = serializers.CharField(help_text="E.164, assigned by the service.")
    alias = serializers.CharField()
    created_at = MillisecondsField()
    greeting = serializers.CharField(
        help_text="What voicemail says to callers; empty: the service's default greeting."
    )


class NumberListOutput(serializers.Serializer):
    numbers = NumberOutput(many=True)


class NumberCreateInput(serializers.Serializer):
    alias = AliasField()
    pin = PinField(help_text="4 to 8 digits.")
    captchaToken = StrictCharField(max_length=64, help_text="uuid from /api/captcha/verify")  # noqa: N815


class AliasInput(serializers.Serializer):
    alias = AliasField()


class GreetingInput(serializers.Serializer):
    greeting = GreetingField(help_text="0 to 500 characters; empty restores the default.")


class GreetingOutput(serializers.Serializer):
    active = serializers.ChoiceField(
        choices=["recorded", "text", "default"],
        help_text="What callers hear: `recorded` (the greeting recorded by phone), `text` "
        "(`greeting`, spoken) or `default` (the service's default greeting, spoken).",
    )
    greeting = serializers.CharField(
        help_text="The text greeting (empty: the default), spoken when nothing is recorded."
    )
    recording_url = serializers.CharField(
        allow_null=True,
        help_text="The recorded greeting (GET it for audio/wav), a path of this API; null: none.",
    )
    recording_seconds = serializers.FloatField(
        allow_null=True, help_text="The recorded greeting's length; null: none."
    )


class HoldMusicOutput(serializers.Serializer):
    url = serializers.CharField(
        source="hold_music_url",
        help_text="The number's music on hold (GET it for audio/wav), a path of this API.",
    )
    seconds = serializers.FloatField(
        source="hold_music_seconds", help_text="Its length, as stored (8 kHz, 16-bit, mono)."
    )


class RecordingInput(serializers.Serializer):
    enabled = StrictBooleanField(help_text="Record the number's forwarded calls (off by default).")
    announce = GreetingField(
        required=False,
        default="",
        help_text="What both parties hear before a recorded bridge, 0 to 500 characters; "
        'empty (or left out): "This call may be recorded."',
    )


class RecordingOutput(serializers.Serializer):
    enabled = serializers.BooleanField()
    announce = serializers.CharField(help_text="The owner's text; empty: the default.")
    announcement = serializers.CharField(help_text="What both parties hear, spoken.")


class PinChangeInput(serializers.Serializer):
    # A current PIN in the wrong format is a wrong PIN: 403, and counted towards the lock.
    currentPin = PinField(checked=False)  # noqa: N815
    newPin = PinField()  # noqa: N815


class BlockedCallerInput(serializers.Serializer):
    caller_num = CallerNumberField(max_length=64)


class BlockedCallerOutput(serializers.Serializer):
    caller_num = serializers.CharField()
    created_at = MillisecondsField()


class BlocklistOutput(serializers.Serializer):
    blocked = BlockedCallerOutput(many=True)


@extend_schema_field({"type": "string", "pattern": r"^(\+[1-9]\d{6,14}|browser)$"})
class ForwardTargetField(DialableNumberField):
    """A forwarding target: a number Relay may dial, or "browser" (the owner's console tabs
    whose phone is on, issue 43)."""

    def to_internal_value(self, data):
        if data == BROWSER:
            return BROWSER
        return super().to_internal_value(data)


class ForwardingInput(serializers.Serializer):
    targets = serializers.ListField(
        child=ForwardTargetField(),
        min_length=1,
        max_length=FORWARD_TARGETS_MAX,
        error_messages={
            "min_length": "Give at least one number to ring.",
            "max_length": f"Give at most {FORWARD_TARGETS_MAX} numbers to ring.",
        },
        help_text=f'1 to {FORWARD_TARGETS_MAX} E.164 numbers, or "browser" (your console '
        "tabs whose phone is on), rung at once; the first to answer takes the call.",
    )
    ringSeconds = StrictIntegerField(  # noqa: N815
        min_value=FORWARD_RING_SECONDS[0],
        max_value=FORWARD_RING_SECONDS[1],
        default=FORWARD_RING_SECONDS_DEFAULT,
        help_text="How long the targets ring before voicemail answers.",
    )
    screening = StrictBooleanField(
        default=False,
        help_text="Whoever picks up hears who is calling and takes the call by pressing 1.",
    )
    callerId = serializers.ChoiceField(  # noqa: N815
        choices=ForwardCallerId.choices,
        default=ForwardCallerId.CALLER,
        help_text="What the target sees as the caller: `caller` (the caller's number, the "
        "virtual number in a Diversion header) or `number` (the virtual number).",
    )

    def validate_targets(self, targets: list[str]) -> list[str]:
        if len(set(targets)) != len(targets):
            raise serializers.ValidationError("Each target may be named once.")
        return targets


class ForwardingOutput(serializers.Serializer):
    targets = serializers.ListField(
        child=serializers.CharField(),
        help_text='E.164 numbers, and "browser" for the console tabs; empty: forwarding is off.',
    )
    ringSeconds = serializers.IntegerField(source="ring_seconds")  # noqa: N815
    screening = serializers.BooleanField()
    callerId = serializers.ChoiceField(  # noqa: N815
        source="caller_id", choices=ForwardCallerId.choices
    )


# --- ring list (issue 57) ----------------------------------------------------------------------
SIP_URI_MAX_LENGTH = 255  # calls.Leg.sip_uri
# sip: or sips:, an optional user part, a host (a name, an IPv4 address or an [IPv6] one), an
# optional port and parameters; no headers (?...), no spaces or controls.
SIP_URI = re.compile(
    r"sips?:(?:[A-Za-z0-9\-_.!~*'()&=+$,;?/%]+@)?"
    r"(?P<host>[A-Za-z0-9](?:[A-Za-z0-9\-.]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])"
    r"(?::(?P<port>[0-9]{1,5}))?(?:;[A-Za-z0-9\-_.!~*'()%=]+)*",
    re.IGNORECASE,
)


@extend_schema_field({"type": "string", "pattern": r"^sips?:", "maxLength": SIP_URI_MAX_LENGTH})
class SipUriField(StrictCharField):
    """A SIP address Relay rings directly (not through the trunk): `sip:` or `sips:`, a host
    and an optional user, port and parameters (RFC 3261 §19.1)."""

    default_error_messages = {
        "sip": "Must be a SIP URI: sip: or sips:, then user@host, like sip:desk@pbx.example.com."
    }

    def __init__(self, **kwargs):
        super().__init__(trim_whitespace=False, **kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        match = SIP_URI.fullmatch(value) if len(value) <= SIP_URI_MAX_LENGTH else None
        if match is None or (match["port"] and not 0 < int(match["port"]) < 65536):
            self.fail("sip")
        scheme, _, rest = value.partition(":")
        return f"{scheme.lower()}:{rest}"


class RingEntryInput(serializers.Serializer):
    phone = DialableNumberField(
        required=False, help_text="A phone, E.164, dialled through the trunk."
    )
    sip = SipUriField(required=False, help_text="A SIP URI, dialled directly.")
    member = serializers.UUIDField(
        required=False,
        help_text="The user id of the number's owner or of one of its members: their console "
        "tabs with Phone on, and the phone of their profile (`ringPhone`) if they set one.",
    )
    ringSeconds = StrictIntegerField(  # noqa: N815
        required=False,
        min_value=FORWARD_RING_SECONDS[0],
        max_value=FORWARD_RING_SECONDS[1],
        help_text="How long this entry rings; left out: the list's `ringSeconds`.",
    )

    def to_internal_value(self, data):
        if isinstance(data, dict) and (unknown := set(data) - {*RING_ENTRY_KINDS, "ringSeconds"}):
            raise serializers.ValidationError(
                {name: ["Unknown field."] for name in sorted(unknown)[:5]}
            )
        return super().to_internal_value(data)

    def validate(self, attrs: dict) -> dict:
        kinds = [kind for kind in RING_ENTRY_KINDS if kind in attrs]
        if len(kinds) != 1:
            raise serializers.ValidationError(
                "Give exactly one of phone, sip or member in each entry."
            )
        entry = {kinds[0]: str(attrs[kinds[0]])}
        if "ringSeconds" in attrs:
            entry["ringSeconds"] = attrs["ringSeconds"]
        return entry


class RingingInput(serializers.Serializer):
    strategy = serializers.ChoiceField(
        choices=RingStrategy.choices,
        default=RingStrategy.ALL,
        help_text="`all`: every entry at once, the first to answer takes the call; "
        "`in_order`: each entry for its own ringSeconds, then the next.",
    )
    ringSeconds = StrictIntegerField(  # noqa: N815
        min_value=FORWARD_RING_SECONDS[0],
        max_value=FORWARD_RING_SECONDS[1],
        default=FORWARD_RING_SECONDS_DEFAULT,
        help_text="How long an entry rings unless it says otherwise (`all`: the longest "
        "entry's seconds is how long the list rings before voicemail answers).",
    )
    screening = StrictBooleanField(
        default=False,
        help_text="Whoever picks up a phone or SIP entry hears who is calling and takes the "
        "call by pressing 1 (tabs show who calls).",
    )
    callerId = serializers.ChoiceField(  # noqa: N815
        choices=ForwardCallerId.choices,
        default=ForwardCallerId.CALLER,
        help_text="What a phone or SIP entry sees as the caller, as for forwarding.",
    )
    entries = serializers.ListField(
        child=RingEntryInput(),
        min_length=1,
        max_length=RING_ENTRIES_MAX,
        error_messages={
            "min_length": "Give at least one entry to ring.",
            "max_length": f"Give at most {RING_ENTRIES_MAX} entries.",
        },
        help_text=f"1 to {RING_ENTRIES_MAX} entries, in the order they ring: each exactly one "
        'of {"phone"}, {"sip"} or {"member"}, with an optional "ringSeconds".',
    )

    def validate_entries(self, entries: list[dict]) -> list[dict]:
        seen: set[tuple[str, str]] = set()
        problems = {}
        for index, entry in enumerate(entries):
            kind = next(k for k in RING_ENTRY_KINDS if k in entry)
            key = (kind, entry[kind].lower() if kind == "sip" else entry[kind])
            if key in seen:
                problems[str(index)] = ["This entry is named earlier in the list."]
            seen.add(key)
        if problems:
            raise serializers.ValidationError(problems)
        return entries


class RingEntryOutput(serializers.Serializer):
    phone = serializers.CharField(required=False)
    sip = serializers.CharField(required=False)
    member = serializers.CharField(required=False)
    ringSeconds = serializers.IntegerField(required=False)  # noqa: N815

    def to_representation(self, instance):
        return dict(instance)  # as stored: one kind, and ringSeconds if given


class RingingOutput(serializers.Serializer):
    strategy = serializers.ChoiceField(choices=RingStrategy.choices)
    ringSeconds = serializers.IntegerField(source="ring_seconds")  # noqa: N815
    screening = serializers.BooleanField()
    callerId = serializers.ChoiceField(  # noqa: N815
        source="caller_id", choices=ForwardCallerId.choices
    )
    entries = RingEntryOutput(many=True, help_text="Empty: the number's calls go to voicemail.")


# --- opening hours (issue 57) ---------------------------------------------------------------
@extend_schema_field({"type": "string", "pattern": r"^([01][0-9]|2[0-3]):[0-5][0-9]$"})
class StartTimeField(VerbatimCharField):
    """The start of a window: "HH:MM", 00:00 to 23:59; a blank or long string gets
    time_problem's one sentence."""

    end = False

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        problem = time_problem(value, end=self.end)
        if problem:
            raise serializers.ValidationError(problem)
        return value


@extend_schema_field({"type": "string", "pattern": r"^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$"})
class EndTimeField(StartTimeField):
    """The end of a window: "HH:MM", up to 24:00 (the end of the day)."""

    end = True


class DayField(serializers.ChoiceField):
    default_error_messages = {"invalid_choice": f"Must be one of {', '.join(DAYS)}."}

    def __init__(self, **kwargs):
        super().__init__(choices=DAYS, **kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid_choice", input="")
        return super().to_internal_value(data)


class WindowInput(serializers.Serializer):
    days = serializers.ListField(
        child=DayField(),
        min_length=1,
        max_length=len(DAYS),
        error_messages={
            "min_length": "Name at least one day.",
            "max_length": "Name each day at most once.",
        },
        help_text="Days of the week: mon, tue, wed, thu, fri, sat, sun.",
    )
    start = StartTimeField(help_text='Opens at, local time: "HH:MM", 00:00 to 23:59.')
    end = EndTimeField(
        help_text='Closes at, local time: "HH:MM" after `start`, up to 24:00 (midnight at the '
        "day's end). A night is two windows, one each side of midnight."
    )

    def validate_days(self, days: list[str]) -> list[str]:
        if len(set(days)) != len(days):
            raise serializers.ValidationError("Name each day at most once.")
        return days

    def validate(self, attrs: dict) -> dict:
        if minutes(attrs["end"]) <= minutes(attrs["start"]):
            raise serializers.ValidationError({"end": ["Must be after start."]})
        return attrs


@extend_schema_field({"type": "string", "maxLength": TIME_ZONE_MAX_LENGTH})
class TimeZoneField(VerbatimCharField):
    """An IANA time zone, like Europe/London, as zoneinfo knows it."""

    default_error_messages = {
        "zone": "Must be an IANA time zone, like Europe/London or America/New_York."
    }

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if len(value) > TIME_ZONE_MAX_LENGTH or value not in time_zones():
            self.fail("zone")
        return value


@extend_schema_field({"type": "string", "format": "date"})
class ClosedDateField(VerbatimCharField):
    """A calendar date, "YYYY-MM-DD"."""

    default_error_messages = {"date": 'Must be a date "YYYY-MM-DD", like 2026-12-25.'}

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        # fromisoformat alone takes "20261225" and other ISO forms too: one form only.
        if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
            self.fail("date")
        try:
            date.fromisoformat(value)
        except ValueError:
            self.fail("date")
        return value


class HoursInput(serializers.Serializer):
    timeZone = TimeZoneField(  # noqa: N815
        help_text="The IANA time zone the times and dates are in, like Europe/London."
    )
    weekly = serializers.ListField(
        child=WindowInput(),
        default=list,
        max_length=WINDOWS_MAX,
        error_messages={"max_length": f"Give at most {WINDOWS_MAX} windows."},
        help_text=f"Up to {WINDOWS_MAX} windows when the number takes calls; none: every day, "
        "all day (but the closed dates). Windows on the same day may not overlap.",
    )
    closedDates = serializers.ListField(  # noqa: N815
        child=ClosedDateField(),
        default=list,
        max_length=CLOSED_DATES_MAX,
        error_messages={"max_length": f"Give at most {CLOSED_DATES_MAX} dates."},
        help_text=f"Up to {CLOSED_DATES_MAX} dates, local, when the number is closed all day.",
    )
    doNotDisturb = StrictBooleanField(  # noqa: N815
        default=False,
        help_text="true: closed, whatever the hours, until it is turned off.",
    )
    closedGreeting = GreetingField(  # noqa: N815
        default="",
        help_text="What callers hear while the number is closed, spoken, up to 500 characters; "
        "empty: the number's usual greeting.",
    )

    def validate_weekly(self, weekly: list[dict]) -> list[dict]:
        windows = [Window(days=tuple(w["days"]), start=w["start"], end=w["end"]) for w in weekly]
        problems = overlaps(windows)
        if problems:
            raise serializers.ValidationError(
                {str(index): [why] for index, why in problems.items()}
            )
        return weekly

    def validate_closedDates(self, dates: list[str]) -> list[str]:  # noqa: N802
        if len(set(dates)) != len(dates):
            raise serializers.ValidationError("Name each date at most once.")
        return sorted(dates)


class WindowOutput(serializers.Serializer):
    days = serializers.ListField(child=serializers.CharField())
    start = serializers.CharField()
    end = serializers.CharField()


class HoursOutput(serializers.Serializer):
    timeZone = serializers.CharField(  # noqa: N815
        source="time_zone", allow_null=True, help_text="null: no hours are set (always open)."
    )
    weekly = WindowOutput(many=True)
    closedDates = serializers.ListField(  # noqa: N815
        source="closed_dates", child=serializers.CharField()
    )
    doNotDisturb = serializers.BooleanField(source="do_not_disturb")  # noqa: N815
    closedGreeting = serializers.CharField(source="closed_greeting")  # noqa: N815
    closedGreetingRecordingUrl = serializers.CharField(  # noqa: N815
        source="closed_greeting_recording_url",
        allow_null=True,
        help_text="Where the closed greeting recorded by phone (the mailbox's 4) downloads as "
        "WAV; it is played in place of `closedGreeting`. null: none is recorded.",
    )
    closedGreetingRecordingSeconds = serializers.FloatField(  # noqa: N815
        source="closed_greeting_recording_seconds", allow_null=True
    )
    openNow = serializers.BooleanField(  # noqa: N815
        source="open_now", help_text="Whether the number takes calls at this moment."
    )


ROLE_HELP = (
    "`member`: sees the number's history and hears and deletes its voicemail; `manager`: "
    "also invites, changes and removes its members."
)


class MemberInviteInput(serializers.Serializer):
    email = EmailAddressField(help_text="Where the invitation is mailed; compared lower-cased.")
    role = serializers.ChoiceField(choices=MemberRole.choices, help_text=ROLE_HELP)


class MemberRoleInput(serializers.Serializer):
    role = serializers.ChoiceField(choices=MemberRole.choices, help_text=ROLE_HELP)


class MemberOutput(serializers.Serializer):
    id = serializers.UUIDField(help_text="The member's id (`:memberId`), an invitation's too.")
    email = serializers.CharField(help_text="The address invited, lower-cased.")
    role = serializers.ChoiceField(choices=MemberRole.choices)
    status = serializers.ChoiceField(
        choices=MemberStatus.choices,
        help_text="`invited` until the invitation is accepted, then `active`.",
    )
    invitedAt = MillisecondsField(source="created_at")  # noqa: N815
    expiresAt = MillisecondsField(  # noqa: N815
        source="expires_at",
        allow_null=True,
        help_text="When the invitation's link dies; null once accepted.",
    )
    joinedAt = MillisecondsField(  # noqa: N815
        source="joined_at", allow_null=True, help_text="When it was accepted; null until then."
    )


class MemberListOutput(serializers.Serializer):
    members = MemberOutput(many=True)


class SharedNumberOutput(serializers.Serializer):
    """A number shared with the caller, from their membership: what a member sees of it."""

    id = serializers.UUIDField(source="number.id", help_text="The number's id.")
    number = serializers.CharField(source="number.number", help_text="E.164.")
    alias = serializers.CharField(source="number.alias", help_text="The owner's name for it.")
    role = serializers.ChoiceField(choices=MemberRole.choices)
    memberId = serializers.UUIDField(  # noqa: N815
        source="id", help_text="Your membership (DELETE /api/numbers/:id/members/:memberId leaves)."
    )
    joinedAt = MillisecondsField(source="joined_at")  # noqa: N815
    webhook = serializers.BooleanField(
        source="notify_webhook", help_text="Your webhook gets the number's calls."
    )
    matrix = serializers.BooleanField(
        source="notify_matrix", help_text="Your Matrix room gets notices of the number's calls."
    )
    missedCallEmail = serializers.BooleanField(  # noqa: N815
        source="missed_call_email", help_text="A mail for each call the number missed."
    )
    voicemailEmail = serializers.BooleanField(  # noqa: N815
        source="voicemail_email", help_text="A mail for each voicemail left on the number."
    )


class MembershipNotificationsInput(serializers.Serializer):
    """What a member hears of a shared number's calls besides their sockets; any of the
    switches, or none (a read)."""

    webhook = StrictBooleanField(
        required=False,
        help_text="your webhook (PUT /api/user/webhook) gets the number's incoming_call, "
        "call_record and call_record.transcribed, as its events choose",
    )
    matrix = StrictBooleanField(
        required=False, help_text="your Matrix room gets a notice of each of its calls"
    )
    missedCallEmail = StrictBooleanField(  # noqa: N815
        required=False,
        help_text="a mail for a missed call (at most one per caller in 10 minutes)",
    )
    voicemailEmail = StrictBooleanField(  # noqa: N815
        required=False, help_text="a mail for each voicemail left on it"
    )


class SharedNumberListOutput(serializers.Serializer):
    numbers = SharedNumberOutput(many=True)
