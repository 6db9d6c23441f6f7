"""A stored file as an HTTP download that answers a byte range (RFC 9110 §14).

A browser's `<audio>` asks for ranges to seek, and Safari plays nothing whose server does not
answer them with 206. Only a single range is answered: a request for several, or a Range
that does not parse, gets the whole file (a server may ignore Range), as does one with
If-Range, since a download carries no validator to compare it with. A range that starts past
the end is 416 `range_not_satisfiable`, with `Content-Range: bytes */<size>`.
"""

import re

from django.core.files import File
from django.http import FileResponse, HttpResponseBase

from core.errors import ApplicationError, ErrorCode

# bytes=<first>-[<last>] or bytes=-<suffix length>; ASCII digits only.
_RANGE = re.compile(r"bytes=([0-9]*)-([0-9]*)", flags=re.ASCII)
# Longer positions are past the end of any file Relay keeps (and int() refuses 4,300 digits).
_MAX_DIGITS = 18


class RangeNotSatisfiable(ApplicationError):
    code = ErrorCode.RANGE_NOT_SATISFIABLE
    message = "The range starts past the end of the file."


class _Window:
    """Bytes [start, start + length) of an open file, read like a file (FileResponse streams
    it and closes the file)."""

    def __init__(self, file: File, start: int, length: int) -> None:
        file.seek(start)
        self.file, self.left = file, length

    def read(self, size: int = -1) -> bytes:
        size = self.left if size < 0 else min(size, self.left)
        data = self.file.read(size) if size else b""
        self.left -= len(data)
        return data

    def close(self) -> None:
        self.file.close()


def _position(digits: str) -> int:
    return int(digits) if len(digits) <= _MAX_DIGITS else 10**_MAX_DIGITS


def requested_range(header: str | None, size: int) -> tuple[int, int] | None:
    """(first, last) byte of the one range `header` asks for, clamped to the file; None for
    the whole file. RangeNotSatisfiable when it asks only for bytes past the end."""
    match = _RANGE.fullmatch(header or "")
    if match is None:
        return None
    first, last = match.groups()
    if first:
        start = _position(first)
        end = _position(last) if last else size - 1
        if last and end < start:
            return None  # not a valid range: ignored
    elif last:  # the last N bytes ("bytes=-0" starts at the end: unsatisfiable below)
        start, end = max(size - _position(last), 0), size - 1
    else:
        return None  # "bytes=-"
    if start >= size:
        raise RangeNotSatisfiable(headers={"Content-Range": f"bytes */{size}"})
    return start, min(end, size - 1)


def file_download(request, file: File, *, content_type: str, filename: str) -> HttpResponseBase:
    """The open `file` as an attachment named `filename`: whole (200), or the one range the
    request asks for (206), or the 416 error; `Accept-Ranges: bytes` says ranges are
    answered. The response closes the file."""
    size = file.size
    try:
        wanted = (
            None
            if "If-Range" in request.headers
            else requested_range(request.headers.get("Range"), size)
        )
    except RangeNotSatisfiable as error:
        file.close()
        return error.as_response()
    if wanted is None:
        response = FileResponse(file, content_type=content_type, filename=filename)
    else:
        start, end = wanted
        response = FileResponse(
            _Window(file, start, end - start + 1),
            status=206,
            content_type=content_type,
            filename=filename,
        )
        response["Content-Length"] = str(end - start + 1)
        response["Content-Range"] = f"bytes {start}-{end}/{size}"
    response["Accept-Ranges"] = "bytes"
    return response
