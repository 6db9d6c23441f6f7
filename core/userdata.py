"""What each app holds of a user: its part of the user's export (`GET /api/user/export`) and
how it is erased when the user deletes their account (`DELETE /api/user/me`).

accounts runs both, yet the data lives in apps above it (numbers, history, calls, webhooks,
Matrix), which accounts may not import. So each app registers its own part in its
AppConfig.ready(), as outbox writers are registered (core.events), and keeps what a part
does next to its models: nothing here, and nothing in accounts, knows their tables.

A part may give:
- `export(*, user)`: its sections of account.json, `{key: value}`; a value that is an
  iterator is written as a JSON array one item at a time, so a long history is never held
  in memory whole;
- `files(*, user)`: the files it adds to the archive, as (name in the zip, opener) pairs,
  the opener returning a binary file (closed after copying), or None when the file is gone;
- `end(*, user)`: what must stop before anything is erased (calls in progress);
- `erase(*, user)`: delete what is the app's, in the deletion's transaction.

Deletion runs every part's `end`, then every part's `erase`, in registration order (the
order of INSTALLED_APPS); both run inside the one transaction of the deletion.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

logger = logging.getLogger(__name__)

Opener = Callable[[], IO[bytes] | None]
ExportFile = tuple[str, Opener]

# Up to this many bytes an archive stays in memory; past it, it spills to a temporary file.
SPOOL_BYTES = 4 * 1024 * 1024
ACCOUNT_JSON = "account.json"


@dataclass(frozen=True)
class UserDataPart:
    name: str
    export: Callable[..., dict[str, Any]] | None = None
    files: Callable[..., Iterable[ExportFile]] | None = None
    end: Callable[..., None] | None = None
    erase: Callable[..., None] | None = None


_parts: dict[str, UserDataPart] = {}


def register(part: UserDataPart) -> None:
    """Make `part` one of the user's data (called from its app's AppConfig.ready(); calling
    it again with the same name replaces the part, keeping its place)."""
    _parts[part.name] = part


def parts() -> list[UserDataPart]:
    """Every registered part, in registration order."""
    return list(_parts.values())


def user_data_end_and_erase(*, user) -> None:
    """Every part's `end`, then every part's `erase`, for `user`: inside the caller's
    transaction (accounts.services.user_delete)."""
    registered = parts()
    for part in registered:
        if part.end is not None:
            part.end(user=user)
    for part in registered:
        if part.erase is not None:
            part.erase(user=user)


# --- the archive -----------------------------------------------------------------------------
def _write_json(out: IO[str], value: Any) -> None:
    """`value` as JSON into `out`; iterators (generators, querysets' iterators) become arrays
    written item by item, at any depth of the top-level object."""
    if isinstance(value, dict):
        out.write("{")
        for index, (key, item) in enumerate(value.items()):
            out.write(("," if index else "") + json.dumps(str(key)) + ":")
            _write_json(out, item)
        out.write("}")
    elif isinstance(value, Iterator):
        out.write("[")
        for index, item in enumerate(value):
            out.write("," if index else "")
            out.write(json.dumps(item, ensure_ascii=False, separators=(",", ":")))
        out.write("]")
    else:
        out.write(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


class _Utf8Writer:
    """Text written into a binary zip member as UTF-8 (a lone surrogate, which the API
    refuses but an old row might hold, is escaped rather than failing the export)."""

    def __init__(self, member: IO[bytes]) -> None:
        self.member = member

    def write(self, text: str) -> None:
        self.member.write(text.encode("utf-8", "backslashreplace"))


def user_data_archive(*, user, header: dict[str, Any]) -> IO[bytes]:
    """The zip of `user`'s data: `account.json` (`header`, then every part's sections) and
    every part's files, in a temporary file rewound to its start (in memory up to
    SPOOL_BYTES, on disk past it). The caller closes it (FileResponse does)."""
    archive = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115 - returned open
    try:
        with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zipped:
            with zipped.open(ACCOUNT_JSON, "w", force_zip64=True) as member:
                sections = dict(header)
                for part in parts():
                    if part.export is not None:
                        sections.update(part.export(user=user))
                _write_json(_Utf8Writer(member), sections)
            for part in parts():
                for name, opener in part.files(user=user) if part.files else ():
                    _copy_into(zipped, name, opener)
    except BaseException:
        archive.close()
        raise
    archive.seek(0)
    return archive


def _copy_into(zipped: zipfile.ZipFile, name: str, opener: Opener) -> None:
    source = None
    try:
        source = opener()
    except OSError as exc:
        logger.warning("export: could not open %s: %s", name, type(exc).__name__)
    if source is None:
        return
    # Audio hardly compresses: stored, so the export costs copying, not deflating.
    info = zipfile.ZipInfo(name)
    info.compress_type = zipfile.ZIP_STORED
    with source, zipped.open(info, "w", force_zip64=True) as member:
        shutil.copyfileobj(source, member, length=64 * 1024)
