"""A number's settings: the callers it blocks, where it forwards its calls, its voicemail
greeting (the text, and the one recorded by phone, played and removed here), its opening
hours and do-not-disturb, its music on hold (uploaded, played and removed here), and whether
its forwarded calls are recorded. Each form goes through the API's input serializer
(BlockedCallerInput, ForwardingInput, GreetingInput, HoursInput, RecordingInput) or the
service NumberViewSet calls, so the console holds no rule of its own."""

import uuid

from django.conf import settings
from django.contrib import messages
from django.shortcuts import redirect, render
from django.utils import timezone

from console.forms import (
    CALLER_ID_CHOICES,
    RING_STRATEGY_CHOICES,
    BlockedCallerForm,
    CallRecordingForm,
    ForwardingForm,
    GreetingForm,
    HoursForm,
    RingEntryForm,
    window_line,
)
from console.views.common import form_page, number_page, posted
from core.audio import WAV_MEDIA_TYPES
from core.errors import ApplicationError, NotFound
from core.fields import validated
from virtual_numbers import selectors as numbers
from virtual_numbers import services as numbers_services
from virtual_numbers.responses import greeting_download, hold_music_download
from virtual_numbers.serializers import (
    BlockedCallerInput,
    ForwardingInput,
    GreetingInput,
    HoursInput,
    RecordingInput,
    RingingInput,
)


def _sentence(error: ApplicationError) -> str:
    """The error as people read it: its first field's message, else its message."""
    for field_messages in (error.fields or {}).values():
        return field_messages[0]
    return error.message


def _blocklist_context(number) -> dict:
    return {"number": number, "blocked": numbers.blocklist_of(number=number)}


@number_page(["GET", "POST"])
def blocklist(request, number):
    """The callers the number blocks, and a form to block one more. A caller blocked already
    is a notice, as the API answers it with 200."""
    form = BlockedCallerForm(posted(request))

    def block():
        caller = validated(BlockedCallerInput, form.values("caller_num"))["caller_num"]
        entry, created = numbers_services.blocked_caller_add(number=number, caller_num=caller)
        if created:
            messages.success(request, f"{entry.caller_num} is blocked on {number.number}.")
        else:
            messages.info(request, f"{entry.caller_num} was blocked already.")
        return redirect("console:blocklist", number.pk)

    return form_page(request, "console/blocklist.html", form, block, **_blocklist_context(number))


@number_page(["GET", "POST"])
def blocked_remove(request, number):
    """Unblock the caller a row's button names. A caller the number does not block (the
    API's 404) is a notice on the blocklist: the number is yours. A GET goes to the list."""
    if request.method == "GET":
        return redirect("console:blocklist", number.pk)
    try:
        values = {"caller_num": request.POST.get("caller_num", "")}
        caller = validated(BlockedCallerInput, values)["caller_num"]
    except ApplicationError as error:
        context = _blocklist_context(number) | {
            "form": BlockedCallerForm(),
            "removal_refusal": f"Nothing was unblocked: {_sentence(error)}",
        }
        return render(request, "console/blocklist.html", context, status=error.status)
    _removal_said(
        request,
        lambda: numbers_services.blocked_caller_remove(number=number, caller_num=caller),
        done=f"{caller} is unblocked on {number.number}.",
        missing=f"{caller} was not blocked on {number.number}.",
    )
    return redirect("console:blocklist", number.pk)


def _removal_said(request, remove, *, done: str, missing: str) -> None:
    """Run `remove`, and tell the next page how it went: `done`, or `missing` when there was
    nothing to remove (NotFound)."""
    try:
        remove()
    except NotFound:
        messages.info(request, missing)
    else:
        messages.success(request, done)


def _forwarding_initial(current: numbers_services.Forwarding) -> dict:
    return {
        "targets": "\n".join(current.targets),
        "ringSeconds": str(current.ring_seconds),
        "screening": current.screening,
        "callerId": current.caller_id,
    }


@number_page(["GET", "POST"])
def forwarding(request, number):
    """Where the number forwards its calls: ForwardingInput and number_forwarding_set, as
    NumberViewSet.forwarding_set does (every target checked before anything is stored)."""
    current = numbers_services.Forwarding.of(number)
    form = ForwardingForm(posted(request), initial=_forwarding_initial(current))

    def save():
        data = validated(ForwardingInput, form.forwarding_values())
        stored = numbers_services.number_forwarding_set(
            number=number, forwarding=numbers_services.Forwarding.from_input(data)
        )
        messages.success(request, f"Calls to {number.number} now ring {', '.join(stored.targets)}.")
        return redirect("console:forwarding", number.pk)

    return form_page(
        request,
        "console/forwarding.html",
        form,
        save,
        number=number,
        current=current,
        caller_id_shown=dict(CALLER_ID_CHOICES).get(current.caller_id, current.caller_id),
        forwarded_here=settings.TELEPHONY_PROVIDER == "sip",
    )


@number_page(["GET", "POST"])
def forwarding_clear(request, number):
    """Stop forwarding (number_forwarding_clear); the forwarding page, which shows what is
    set, is this button's confirmation. A GET goes to that page."""
    if request.method == "POST":
        numbers_services.number_forwarding_clear(number=number)
        messages.success(request, f"Calls to {number.number} go to voicemail again.")
    return redirect("console:forwarding", number.pk)


@number_page(["GET", "POST"], access=numbers.number_manage_access)
def greeting(request, number):
    """What voicemail says to the number's callers (GreetingInput, number_greeting_set)."""
    form = GreetingForm(posted(request), initial={"greeting": number.greeting})

    def save():
        text = validated(GreetingInput, form.values("greeting"))["greeting"]
        numbers_services.number_greeting_set(number=number, greeting=text)
        if text:
            messages.success(request, f"Callers to {number.number} hear your greeting.")
        else:
            messages.success(request, f"Callers to {number.number} hear the default greeting.")
        return redirect("console:numbers")

    return form_page(
        request,
        "console/greeting.html",
        form,
        save,
        number=number,
        active=numbers.Greeting.of(number),
    )


@number_page(["GET"], access=numbers.number_manage_access)
def greeting_recording(request, number):
    """The recorded greeting as WAV to its owner, through the session: the API's checks
    (number_access; none recorded, or its file gone: 404), never cached, never a public URL."""
    return _greeting_file(request, number, closed=False)


@number_page(["GET"], access=numbers.number_manage_access)
def closed_greeting_recording(request, number):
    """The recorded closed greeting, as greeting_recording serves the other."""
    return _greeting_file(request, number, closed=True)


def _greeting_file(request, number, *, closed: bool):
    response = greeting_download(request, number, closed=closed)
    response["Cache-Control"] = "private, no-store"
    return response


@number_page(["GET", "POST"], access=numbers.number_manage_access)
def greeting_recording_remove(request, number):
    """Remove the recorded greeting (number_greeting_recording_remove): callers hear the
    spoken one again. The greeting page, which plays what it removes, is this button's
    confirmation; a GET goes to it, and so does a greeting removed already (a notice)."""
    return _greeting_recording_remove(request, number, closed=False)


@number_page(["GET", "POST"], access=numbers.number_manage_access)
def closed_greeting_recording_remove(request, number):
    """Remove the recorded closed greeting, confirmed by the hours page as the greeting page
    confirms greeting_recording_remove."""
    return _greeting_recording_remove(request, number, closed=True)


def _greeting_recording_remove(request, number, *, closed: bool):
    what = "closed greeting" if closed else "greeting"
    if request.method == "POST":
        _removal_said(
            request,
            lambda: numbers_services.number_greeting_recording_remove(number=number, closed=closed),
            done=f"Callers to {number.number} hear the spoken {what} again.",
            missing=f"{number.number} has no recorded {what}.",
        )
    return redirect("console:hours" if closed else "console:greeting", number.pk)


def _hours_initial(current: numbers.HoursSettings) -> dict:
    return {
        "timeZone": current.time_zone or settings.TIME_ZONE,
        "weekly": "\n".join(window_line(window) for window in current.weekly),
        "closedDates": "\n".join(current.closed_dates),
        "closedGreeting": current.closed_greeting,
        "doNotDisturb": current.do_not_disturb,
    }


@number_page(["GET", "POST"], access=numbers.number_manage_access)
def hours(request, number):
    """When the number takes calls: HoursInput and number_hours_set, as
    NumberViewSet.hours_set does; the page says whether it is open now (open_at)."""
    current = numbers.HoursSettings.of(numbers.hours_of(number=number), at=timezone.now())
    form = HoursForm(posted(request), initial=_hours_initial(current))

    def save():
        data = validated(HoursInput, form.hours_values())
        numbers_services.number_hours_set(number=number, data=data)
        if data["doNotDisturb"]:
            messages.success(request, f"Do not disturb is on: {number.number} takes no calls.")
        else:
            messages.success(request, f"The opening hours of {number.number} are saved.")
        return redirect("console:hours", number.pk)

    return form_page(request, "console/hours.html", form, save, number=number, current=current)


@number_page(["GET", "POST"], access=numbers.number_manage_access)
def hours_clear(request, number):
    """Remove the hours (number_hours_clear): always open again. The hours page, which shows
    what is set, is this button's confirmation; a GET goes to it."""
    if request.method == "POST":
        numbers_services.number_hours_clear(number=number)
        messages.success(request, f"{number.number} takes calls at all times again.")
    return redirect("console:hours", number.pk)


# --- the ring list (issue 57) -----------------------------------------------------------------
def _people(number) -> dict[str, str]:
    """Who a member entry may name: user id -> address, the owner first."""
    people = {str(number.owner_id): number.owner.email}
    for member in numbers.members_of(number=number):
        if member.user_id is not None:
            people[str(member.user_id)] = member.email
    return people


def _entry_shown(entry: dict, people: dict[str, str]) -> str:
    if "member" in entry:
        return f"{people.get(entry['member'], 'someone no longer a member')} (tabs and ring phone)"
    return entry.get("phone") or entry.get("sip", "")


def _typed_entry(form: RingEntryForm, people: dict[str, str]) -> dict:
    """The entry `form` names, as RingingInput takes it: a member by their address, a SIP
    address by its scheme, anything else a phone (the serializer judges each)."""
    typed = form.cleaned_data.get("target") or ""
    entry: dict = {"phone": typed}
    if typed.lower().startswith(("sip:", "sips:")):
        entry = {"sip": typed}
    elif "@" in typed:
        by_address = {email.lower(): pk for pk, email in people.items()}
        # an address of no one here: a user id no one has, refused as "not a member"
        entry = {"member": by_address.get(typed.strip().lower(), str(uuid.UUID(int=0)))}
    seconds = form.cleaned_data.get("ringSeconds") or ""
    if seconds:
        entry["ringSeconds"] = int(seconds) if seconds.strip().isdigit() else seconds
    return entry


def _ring_list_save(request, number, current, **changes):
    """Check and store the list with `changes` (RingingInput, number_ringing_set)."""
    values = {
        "strategy": current.strategy,
        "ringSeconds": current.ring_seconds,
        "screening": current.screening,
        "callerId": current.caller_id,
        "entries": current.entries,
        **changes,
    }
    data = validated(RingingInput, values)
    return numbers_services.number_ringing_set(
        number=number, user=request.user, ring_list=numbers_services.RingList.from_input(data)
    )


@number_page(["GET", "POST"], access=numbers.number_manage_access)
def ringing(request, number):
    """A number's ring list: its entries in order, each with Move up, Move down and Remove,
    a form to add one, and how the list rings; every change goes through RingingInput and
    number_ringing_set, as PUT /api/numbers/:id/ringing does."""
    current = numbers_services.RingList.of(number)
    people = _people(number)
    form = RingEntryForm(posted(request) if request.POST.get("action") == "add" else None)
    if request.method == "POST" and request.POST.get("action") != "add":
        return _ringing_change(request, number, current)

    def add():
        _ring_list_save(
            request, number, current, entries=[*current.entries, _typed_entry(form, people)]
        )
        messages.success(request, f"The ring list of {number.number} has a new last entry.")
        return redirect("console:ringing", number.pk)

    rows = [
        {
            "index": index,
            "position": index + 1,
            "shown": _entry_shown(entry, people),
            "seconds": entry.get("ringSeconds", current.ring_seconds),
        }
        for index, entry in enumerate(current.entries)
    ]
    return form_page(
        request,
        "console/ringing.html",
        form,
        add,
        number=number,
        current=current,
        rows=rows,
        strategies=RING_STRATEGY_CHOICES,
    )


def _ringing_change(request, number, current):
    """A row's Move up, Move down or Remove, the strategy's form, or Ring nobody."""
    action = request.POST.get("action", "")
    entries = list(current.entries)
    try:
        index = int(request.POST.get("index", ""))
    except ValueError:
        index = -1
    try:
        if action == "clear":
            numbers_services.number_ringing_clear(number=number)
            messages.success(request, f"Calls to {number.number} ring nobody now.")
        elif action == "settings":
            _ring_list_save(
                request,
                number,
                current,
                strategy=request.POST.get("strategy", ""),
                ringSeconds=_integer(request.POST.get("ringSeconds", "")),
                screening=request.POST.get("screening") == "on",
            )
            messages.success(request, "How the list rings is saved.")
        elif action in ("up", "down", "remove") and 0 <= index < len(entries):
            if action == "remove":
                del entries[index]
            else:
                other = index - 1 if action == "up" else index + 1
                if 0 <= other < len(entries):
                    entries[index], entries[other] = entries[other], entries[index]
            if entries:
                _ring_list_save(request, number, current, entries=entries)
            else:
                numbers_services.number_ringing_clear(number=number)
            messages.success(request, "The ring list is saved.")
        else:
            messages.error(request, "Nothing was changed: that entry is not in the list.")
    except ApplicationError as error:
        messages.error(request, f"Nothing was changed: {_sentence(error)}")
    return redirect("console:ringing", number.pk)


def _integer(value: str):
    return int(value) if value.strip().isdigit() else value


@number_page(["GET", "POST"], access=numbers.number_manage_access)
def hold_music(request, number):
    """The number's music on hold: what plays now, and a WAV file to upload in its place,
    checked and kept by number_hold_music_set as PUT /api/numbers/:id/hold-music does (the
    same limits; a refusal is said above the form)."""
    refusal = None
    if request.method == "POST":
        upload = request.FILES.get("file")
        limit = settings.HOLD_MUSIC_MAX_BYTES
        if upload is None:
            refusal = "Choose a WAV file to upload."
        elif upload.size > limit:
            refusal = f"The file is larger than {limit} bytes."
        elif upload.content_type not in WAV_MEDIA_TYPES and not upload.name.lower().endswith(
            ".wav"
        ):
            refusal = "Choose a WAV file (.wav)."
        else:
            try:
                numbers_services.number_hold_music_set(number=number, wav=upload.read())
            except ApplicationError as error:
                refusal = _sentence(error)
            else:
                messages.success(request, f"Calls to {number.number} on hold hear your music.")
                return redirect("console:hold_music", number.pk)
    response = render(
        request,
        "console/hold_music.html",
        {"number": number, "refusal": refusal, "max_seconds": settings.HOLD_MUSIC_MAX_SECONDS},
    )
    if refusal is not None:
        response.status_code = 400
    return response


@number_page(["GET"], access=numbers.number_manage_access)
def hold_music_file(request, number):
    """The uploaded music on hold as WAV, through the session (404 when there is none), never
    cached, as the recorded greetings are served."""
    response = hold_music_download(request, number)
    response["Cache-Control"] = "private, no-store"
    return response


@number_page(["GET", "POST"], access=numbers.number_manage_access)
def hold_music_remove(request, number):
    """Remove the uploaded music (number_hold_music_remove): held calls hear Relay's own
    again. The music page, which plays what it removes, is this button's confirmation."""
    if request.method == "POST":
        _removal_said(
            request,
            lambda: numbers_services.number_hold_music_remove(number=number),
            done=f"Calls to {number.number} on hold hear Relay's own music again.",
            missing=f"{number.number} has no music of its own.",
        )
    return redirect("console:hold_music", number.pk)


@number_page(["GET", "POST"])
def call_recording(request, number):
    """Whether the number's forwarded calls are recorded, and the announcement both parties
    hear first: RecordingInput and number_recording_set, as NumberViewSet.recording_set does;
    the owner's alone (number_access: a member, a manager or anyone else gets the 404 page)."""
    form = CallRecordingForm(
        posted(request),
        initial={"enabled": number.recording_enabled, "announce": number.recording_announce},
    )

    def save():
        data = validated(RecordingInput, form.recording_values())
        numbers_services.number_recording_set(
            number=number, enabled=data["enabled"], announce=data["announce"]
        )
        if data["enabled"]:
            messages.success(request, f"Forwarded calls to {number.number} are recorded.")
        else:
            messages.success(request, f"Forwarded calls to {number.number} are not recorded.")
        return redirect("console:call_recording", number.pk)

    return form_page(
        request,
        "console/call_recording.html",
        form,
        save,
        number=number,
        announcement=number.recording_announce or settings.RECORDING_ANNOUNCEMENT,
        retention_days=settings.CALL_RECORDING_RETENTION_DAYS,
    )
