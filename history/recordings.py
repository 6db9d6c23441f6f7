"""Recordings of bridged calls (issue 58): a calls.Recording of kind `call`, both parties in
one stereo WAV (the caller left, the other party right: telephony.sip.recorder), for a
number that records its forwarded calls (PUT /api/numbers/:id/recording) or a script's
`dial` with `record: true`.

- Its row is written as the bridge starts, `incomplete` until the bridge ends: an agent that
  dies mid-bridge leaves the row incomplete, its file valid up to the last second written.
- Once the bridge ends, its seconds are stored and its transcript queued (history.tasks: a
  transcript per channel, each labelled by its speaker); `recording.completed` is pushed to
  the owner and the number's members (sockets, webhooks, Matrix) when the recording is
  complete with its transcript: at once when there is none to make (the engine off, the
  recording too long), else once the worker has stored it.
- Downloaded at `GET /api/recordings/:id` (owner and members), deleted by
  `DELETE /api/recordings/:id`, with its call (its number, the account), and by retention
  (CALL_RECORDING_RETENTION_DAYS, purge_expired), and included in the account export.
"""

from __future__ import annotations

import os
import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from accounts.models import User
from calls.models import Call, Recording, RecordingKind
from core import events
from core.errors import NotFound
from core.recordings import (
    recording_opener,
    recordings_delete_on_commit,
    recordings_purge,
    recordings_storage,
)
from history.models import TranscriptStatus
from history.tasks import schedule_transcription, transcript_status_for
from virtual_numbers.selectors import number_members_heard, numbers_shared_with

COMPLETED = "recording.completed"
SPEAKERS = ("caller", "callee")  # the channels' labels in a transcript: left, right


def recording_url(recording_id) -> str:
    return f"/api/recordings/{recording_id}"


def call_recording_open(*, call_id) -> tuple[Recording, str]:
    """A recording of the call `call_id` begins: its row (incomplete until it ends), and the
    path its WAV is written to as it goes: the recordings storage's own file when the storage
    is a file system, else a spool file uploaded once it ends (call_recording_done)."""
    name = f"{uuid.uuid4().hex}.wav"
    recording = Recording.objects.create(
        call_id=call_id, kind=RecordingKind.CALL, name=name, incomplete=True
    )
    return recording, _writing_path(name)


def _writing_path(name: str) -> str:
    storage = recordings_storage()
    try:
        path = storage.path(name)
    except NotImplementedError:  # a remote storage: spooled here, uploaded at the end
        path = os.path.join(settings.VAR_DIR, "recording-spool", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def _upload_if_spooled(name: str) -> None:
    storage = recordings_storage()
    try:
        storage.path(name)
        return
    except NotImplementedError:
        pass
    spooled = os.path.join(settings.VAR_DIR, "recording-spool", name)
    with open(spooled, "rb") as file:
        storage.save(name, file)
    os.unlink(spooled)


def call_recording_done(*, recording: Recording, seconds: float, incomplete: bool) -> None:
    """The bridge is over and its recording closed: its seconds and whether it was cut
    stored, its transcript queued, or `recording.completed` pushed now when there is none
    to make."""
    _upload_if_spooled(recording.name)
    status = transcript_status_for(recording=recording.name, seconds=seconds)
    if not seconds:
        status = TranscriptStatus.OFF  # nothing was heard: nothing to transcribe
    with transaction.atomic():
        updated = Recording.objects.filter(pk=recording.pk, kind=RecordingKind.CALL).update(
            seconds=seconds, incomplete=incomplete, transcript_status=status
        )
        if not updated:
            return  # deleted with its call meanwhile
        recording.seconds, recording.incomplete = seconds, incomplete
        recording.transcript_status = status
        if status == TranscriptStatus.PENDING:
            schedule_transcription(recording.pk)
        else:
            call_recording_announce(recording=recording)


def call_recording_announce(*, recording: Recording) -> None:
    """`recording.completed`, in the caller's transaction: to the call's owner and, for a
    call to a number, the number's active members (their sockets; their webhook and Matrix
    room when they turned those on). history.tasks calls it (TRANSCRIPT_ANNOUNCED) once the
    transcript is stored."""
    call = Call.objects.select_related("number").get(pk=recording.call_id)
    event = recording_frame(recording, call=call)
    events.send_to_user_on_commit(user_id=call.owner_id, event=event)
    if call.number_id is not None:
        members = number_members_heard(number_id=call.number_id)
        events.send_to_members_on_commit(members=members, event=event)


def recording_frame(recording: Recording, *, call: Call) -> dict:
    """The `recording.completed` frame (and webhook body, and Matrix notice's source)."""
    number = call.number
    return {
        "type": COMPLETED,
        "id": str(recording.pk),
        "call": str(call.pk),
        "direction": call.direction,
        "number_id": str(number.pk) if number else None,
        "number": number.number if number else None,
        "caller_num": call.caller_id or None,
        "recording_url": recording_url(recording.pk),
        "seconds": recording.seconds,
        "incomplete": recording.incomplete,
        "transcript": recording.transcript,
        "transcript_confidence": recording.transcript_confidence,
        "transcript_status": recording.transcript_status,
        "created_at": int(recording.created_at.timestamp() * 1000),
    }


# --- reads ---------------------------------------------------------------------------------
def _reachable(user: User) -> Q:
    """A bridged call's recording the user may hear: of their own call, or of a call to a
    number they are an active member of."""
    return Q(call__owner=user) | Q(call__number_id__in=numbers_shared_with(user))


def call_recording_access(*, user: User, recording_id, owner: bool = False) -> Recording:
    """The bridged call's recording `recording_id` the user may hear (with `owner`, of the
    user's own call: what may delete it); NotFound for an id that is malformed, unknown,
    another kind's, or of anyone else's call (never saying which)."""
    try:
        pk = uuid.UUID(str(recording_id))
    except ValueError:
        raise NotFound() from None
    found = (
        Recording.objects.filter(
            Q(call__owner=user) if owner else _reachable(user), pk=pk, kind=RecordingKind.CALL
        )
        .exclude(name="")
        .first()
    )
    if found is None:
        raise NotFound()
    return found


def call_recordings_by_call(*, user: User, call_ids) -> dict[uuid.UUID, list[Recording]]:
    """The bridged calls' recordings of the calls `call_ids` that the user may hear (as
    call_recording_access judges), by call, each call's in the order they began: what the
    console's history shows beside each record."""
    rows = (
        Recording.objects.filter(_reachable(user), call_id__in=call_ids, kind=RecordingKind.CALL)
        .exclude(name="")
        .order_by("created_at")
    )
    found: dict[uuid.UUID, list[Recording]] = {}
    for row in rows:
        found.setdefault(row.call_id, []).append(row)
    return found


def call_recordings_of(user: User) -> QuerySet:
    """The recordings of bridged calls of the user's own calls (their export, their erasure)."""
    return Recording.objects.filter(kind=RecordingKind.CALL, call__owner=user).exclude(name="")


def call_recordings_export(*, user: User) -> dict:
    """The user's bridged calls' recordings for their export (core.userdata): each as its
    `recording.completed` frame says it, the WAV at `call-recordings/<id>.wav`."""
    rows = call_recordings_of(user).select_related("call__number").order_by("-created_at")
    return {"call_recordings": [recording_frame(r, call=r.call) for r in rows]}


def call_recording_files(*, user: User) -> list:
    """(name in the archive, opener) of each of the user's bridged calls' recordings."""
    rows = call_recordings_of(user).order_by("-created_at").values_list("pk", "name")
    return [(f"call-recordings/{pk}.wav", recording_opener(name)) for pk, name in rows]


# --- deletion ------------------------------------------------------------------------------
def call_recording_delete(*, recording: Recording) -> None:
    """Delete a bridged call's recording, its row and, once that commits, its file."""
    with transaction.atomic():
        Recording.objects.filter(pk=recording.pk).delete()
        recordings_delete_on_commit([recording.name])


def call_recordings_purge(*, now: datetime | None = None) -> int:
    """Delete the recordings of bridged calls older than CALL_RECORDING_RETENTION_DAYS, rows
    and files; return how many."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.CALL_RECORDING_RETENTION_DAYS)
    expired = Recording.objects.filter(kind=RecordingKind.CALL, created_at__lt=cutoff)
    return recordings_purge(expired, settle=lambda rows: rows.delete())


def call_recordings_erase(*, user: User) -> None:
    """Account deletion: the files of the user's bridged calls' recordings, once the deletion
    commits (their rows go with their calls)."""
    recordings_delete_on_commit(list(call_recordings_of(user).values_list("name", flat=True)))
