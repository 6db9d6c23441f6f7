"""How an answer of the API is kept and compared, one place for the builder (which records the
release's answers) and the test (which asks today's code the same reads)."""

import hashlib
import io
import json
import zipfile


def answer_of(headers: dict, body: bytes) -> dict:
    """An answer as the test compares it: JSON as it is; a file by its type, name, range and
    bytes (sha256); the export by its account.json (less the instant it was made) and the
    sha256 of every other file in it."""
    content_type = headers.get("Content-Type", "")
    if content_type.startswith("application/json"):
        return {"json": json.loads(body)}
    if content_type == "application/zip":
        with zipfile.ZipFile(io.BytesIO(body)) as archive:
            account = json.loads(archive.read("account.json"))
            account.pop("exportedAt")
            files = {
                name: hashlib.sha256(archive.read(name)).hexdigest()
                for name in sorted(archive.namelist())
                if name != "account.json"
            }
        return {"export": {"account": account, "files": files}}
    kept = {
        name: headers[name]
        for name in ("Content-Type", "Content-Disposition", "Content-Range")
        if name in headers
    }
    return {"file": {**kept, "size": len(body), "sha256": hashlib.sha256(body).hexdigest()}}
