"""Where voicemail recordings are stored: the `recordings` storage of STORAGES (files under
var/recordings by default, any django-storages backend in production). Records name their
file; deleting a file waits for the commit that forgets it, so a rolled-back deletion never
leaves a record pointing at nothing."""

import logging
from functools import partial

from django.core.files import File
from django.core.files.storage import Storage, storages
from django.db import transaction
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
