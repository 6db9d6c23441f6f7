"""History: the call records of the user's numbers, newest first with the API's filters and
cursor, each voicemail played through the owner's session, marked heard and deleted; and
each recording of a bridged call (issue 58) played through the session of its owner or a
member of its number, and deleted by its owner (as /api/recordings/:id allows)."""

from dataclasses import dataclass, field
from urllib.parse import urlencode

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console.forms import HistoryFilterForm
from console.signin import signed_in
from console.views.common import next_page, refused
from core.errors import ApplicationError, NotFound
from core.fields import validated
from history import recordings, selectors, services
from history.records import Record
from history.responses import call_recording_download, recording_download
from history.serializers import HistoryQuery
from virtual_numbers.selectors import numbers_of, shared_numbers_of

# The query string the page reads: the API's filters and cursor (its own page size).
QUERY = ("status", "number_id", "before")


# A transcript's speakers (history.recordings.SPEAKERS: the left channel, the right), as
# the page names them.
SPEAKERS = {"caller": "Caller", "callee": "Callee"}


@dataclass
class CallRecordingShown:
    """A bridged call's recording as a record shows it."""

    id: object
    seconds: float | None
    incomplete: bool
    transcript_status: str | None
    transcript_confidence: float | None
    lines: list[tuple[str, str]]  # (speaker, words), in the transcript's order
    deletable: bool  # the call is the user's own: they may delete it


def transcript_lines(transcript: str) -> list[tuple[str, str]]:
    """A bridged call's transcript ("caller: ..." then "callee: ...", a line each) as
    (speaker, words) pairs; a line of no known speaker is kept whole, said by no one."""
    lines = []
    for line in transcript.splitlines():
        speaker, colon, words = line.partition(": ")
        if colon and speaker in SPEAKERS:
            lines.append((SPEAKERS[speaker], words))
        elif line.strip():
            lines.append(("", line))
    return lines


@dataclass
class Entry:
    """A record and the recordings of its bridges, as history_record.html shows them."""

    record: Record
    call_recordings: list[CallRecordingShown] = field(default_factory=list)


def _entries(user, records: list[Record]) -> list[Entry]:
    """`records` with the bridged calls' recordings the user may hear (one query)."""
    found = recordings.call_recordings_by_call(user=user, call_ids=[r.id for r in records])
    return [
        Entry(
            record=record,
            call_recordings=[
                CallRecordingShown(
                    id=row.pk,
                    seconds=row.seconds,
                    incomplete=row.incomplete,
                    transcript_status=row.transcript_status,
                    transcript_confidence=row.transcript_confidence,
                    lines=transcript_lines(row.transcript),
                    deletable=record.owner_id == user.pk,
                )
                for row in found.get(record.id, [])
            ],
        )
        for record in records
    ]


@signed_in
@require_GET
def history_list(request):
    """GET /api/history's query serializer and selector: a bad filter or cursor is the
    form's 400, a number neither the user's nor shared with them the 404 page (NotFound
    passes through). A shared number's calls are shown when it is chosen (issue 57)."""
    query = {name: request.GET[name] for name in QUERY if request.GET.get(name, "") != ""}
    shared = [membership.number for membership in shared_numbers_of(user=request.user)]
    form = HistoryFilterForm(query, numbers=numbers_of(user=request.user), shared=shared)
    form.is_valid()  # its fields take any string: HistoryQuery judges them
    try:
        values = dict(validated(HistoryQuery, query))
        if values["status"] == "all":
            values["status"] = None
        page = selectors.history_page(user=request.user, **values)
    except NotFound:
        raise
    except ApplicationError as error:
        return refused(request, "console/history.html", form, error, page=None)
    older = None
    if page.next_cursor:
        filters = {name: query[name] for name in ("status", "number_id") if name in query}
        older = f"{reverse('console:history')}?{urlencode(filters | {'before': page.next_cursor})}"
    return render(
        request,
        "console/history.html",
        {
            "form": form,
            "page": page,
            "entries": _entries(request.user, page.records),
            "older": older,
            "here": request.get_full_path(),
        },
    )


@signed_in
@require_GET
def history_record(request, record_id):
    """One record, as the history list shows it: where a voicemail's mail links. Anyone
    else's record, or an unknown id, is the 404 page (call_record_access)."""
    record = selectors.call_record_access(user=request.user, record_id=record_id)
    return render(
        request,
        "console/history_entry.html",
        {"entry": _entries(request.user, [record])[0], "here": request.get_full_path()},
    )


def _voicemail(request, record_id):
    """The user's record with a message; NotFound (the 404 page) for anyone else's, an
    unknown or malformed id, or a record without one."""
    record = selectors.call_record_access(user=request.user, record_id=record_id)
    if not record.recording:
        raise NotFound()
    return record


def _back(request) -> str:
    """The history page the form came from, else the first."""
    return next_page(request, reverse("console:history"))


@signed_in
@require_GET
def recording(request, record_id):
    """The message as WAV to its owner, through the session: the API's checks
    (call_record_access, no message or file: 404), never cached, never a public URL."""
    record = selectors.call_record_access(user=request.user, record_id=record_id)
    response = recording_download(request, record)
    response["Cache-Control"] = "private, no-store"
    return response


@signed_in
@require_POST
def recording_heard(request, record_id):
    record = _voicemail(request, record_id)
    services.call_record_mark_heard(record=record)
    messages.success(request, f"The message from {record.caller_num} is marked heard.")
    return redirect(_back(request))


@signed_in
@require_http_methods(["GET", "POST"])
def recording_delete(request, record_id):
    """A confirmation page, then call_record_recording_delete: the record stays."""
    record = _voicemail(request, record_id)
    if request.method == "POST":
        services.call_record_recording_delete(record=record)
        messages.success(request, f"The message from {record.caller_num} is deleted.")
        return redirect(_back(request))
    return render(
        request, "console/history_delete.html", {"record": record, "back": _back(request)}
    )


@signed_in
@require_GET
def call_recording(request, recording_id):
    """A bridged call's recording as WAV to the call's owner and the number's members,
    through the session: the API's checks (call_recording_access: anyone else's, or its file
    gone, 404), never cached, never a public URL."""
    found = recordings.call_recording_access(user=request.user, recording_id=recording_id)
    response = call_recording_download(request, found)
    response["Cache-Control"] = "private, no-store"
    return response


@signed_in
@require_http_methods(["GET", "POST"])
def call_recording_delete(request, recording_id):
    """A confirmation page, then call_recording_delete: the call's owner's alone, as
    DELETE /api/recordings/:id is (a member of the number, or anyone else: the 404 page).
    The call's record stays."""
    found = recordings.call_recording_access(
        user=request.user, recording_id=recording_id, owner=True
    )
    call = found.call
    if request.method == "POST":
        recordings.call_recording_delete(recording=found)
        messages.success(request, f"The recording of the call from {call.caller_id} is deleted.")
        return redirect(_back(request))
    return render(
        request,
        "console/call_recording_delete.html",
        {"recording": found, "call": call, "back": _back(request)},
    )
