"""Where voicemail recordings are stored: the `recordings` storage of STORAGES (files under
var/recordings by default, any django-storages backend in production). Records name their
file; deleting a file waits for the commit that forgets it, so a rolled-back deletion never
leaves a record pointing at nothing."""

import logging
from functools import partial

from django.core.files.storage import Storage, storages
from django.db import transaction

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


def recording_opener(name: str):
    """What an export archive (core.userdata) opens the recording `name` with: the file open
    for reading, or None when it is gone (purged a moment ago)."""

    def open_it():
        try:
            return recordings_storage().open(name, "rb")
        except FileNotFoundError:
            return None

    return open_it
