"""Where voicemail recordings are stored: the `recordings` storage of STORAGES (files under
var/recordings by default, any django-storages backend in production). Records name their
file; deleting a file waits for the commit that forgets it, so a rolled-back deletion never
leaves a record pointing at nothing."""

import logging
from collections.abc import Callable
from functools import partial

from django.core.files import File
from django.core.files.storage import Storage, storages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpResponseBase

from core.downloads import file_download
from core.errors import NotFound

logger = logging.getLogger(__name__)


def recordings_storage() -> Storage:
    return storages["recordings"]


def _delete(names: list[str]) -> None:
    storage = recordings_storage()
    for name in names:
        try:
            storage.delete(name)
        except OSError as exc:  # a file already gone is no error; anything else is logged
            logger.warning("could not delete recording %s: %s", name, type(exc).__name__)


def recordings_delete_on_commit(names) -> None:
    """Delete the files `names` once the caller's transaction commits (at once outside one)."""
    names = [name for name in names if name]
    if names:
        transaction.on_commit(partial(_delete, names), robust=True)


PURGE_BATCH = 500


def recordings_purge(rows: QuerySet, *, settle: Callable[[QuerySet], object]) -> int:
    """Purge the recordings `rows` (a queryset of rows with `name` and `created_at`), oldest
    first, PURGE_BATCH at a time, each batch in its own transaction: its rows locked,
    `settle` applied to them (deleted, or emptied of their file: either way they must leave
    `rows`), and their files deleted once it commits. Return how many rows were purged."""
    purged = 0
    while True:
        with transaction.atomic():
            batch = list(
                rows.select_for_update()
                .order_by("created_at")
                .values_list("pk", "name")[:PURGE_BATCH]
            )
            if not batch:
                return purged
            settle(rows.model.objects.filter(pk__in=[pk for pk, _ in batch]))
            recordings_delete_on_commit([name for _, name in batch])
        purged += len(batch)


def recording_open(name: str) -> File:
    """The recording `name` open for reading; NotFound when there is none (an empty name) or
    its file is gone."""
    if not name:
        raise NotFound()
    try:
        return recordings_storage().open(name, "rb")
    except FileNotFoundError:
        raise NotFound() from None


def recording_download(request, name: str, *, filename: str) -> HttpResponseBase:
    """The recording `name` as a WAV download, whole or the byte range asked for (a voicemail,
    a greeting, a call's recording: the API's and the console's alike); NotFound as
    recording_open."""
    return file_download(request, recording_open(name), content_type="audio/wav", filename=filename)


def recording_opener(name: str):
    """What an export archive (core.userdata) opens the recording `name` with: the file open
    for reading, or None when it is gone (purged a moment ago)."""

    def open_it():
        try:
            return recordings_storage().open(name, "rb")
        except FileNotFoundError:
            return None

    return open_it
