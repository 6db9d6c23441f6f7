"""Nothing is lost on upgrade (issue 54): a database filled through the API of the release
before the call ledger, migrated to today's schema, answers every read the release answered,
the same.

The fixture (tests/calls/upgrade/, made by its build_fixture.py, which says how to make it
again) holds that release's rows, table by table, the newest migration of each of Relay's apps
at that release, the WAV files the rows name, and the release's answers to the reads: history
pages (cursor pages and totals, each filter), the calls and their timelines, every recording
downloaded (sha256, and a byte range), voicemail transcripts, the export, and another user's
requests for them (404).

The test, transactional so that migrations may run (SQLite's schema editor refuses to inside a
transaction; on PostgreSQL too nothing is rolled back for it):
1. migrates the test database back to the release's migrations with Django's
   MigrationExecutor (an app born since, such as `calls` once it has migrations, back to none);
2. inserts the release's rows there by SQL, through the columns of the models as they stood at
   those migrations (the historical models, which give each value its database form), in the
   order of their foreign keys, sequences reset on PostgreSQL; and puts the WAVs in the
   recordings storage of the test settings;
3. migrates forward to the newest migrations, and closes the connection, as a deploy restarts
   its processes after `migrate`;
4. asks today's code every read (Django's test client, each user by the API key the release
   issued them) and compares it with the release's answer: the same status and the same
   fields with the same values, where a call object or its timeline's frames may have gained
   `call` and `seq` (the ledger's new names; the release's own keys are compared); files and
   the export's files by sha256.

The suite's test databases are made by pytest-django with migrations (nothing passes
--nomigrations), one per xdist worker, and this module runs on one worker. Whatever happens,
the database is left at the newest migrations (a forward migration that fails on the
release's rows is retried on emptied tables, then the failure is reported), and the
transactional test's flush empties it after, as after any test: the tests after this one, in
the same worker, see the database they always see.

A ledger migration that cannot run backwards (RunPython without its reverse_code) stops step
1: give it one (`migrations.RunPython.noop` is enough here, where the ledger is empty).
"""

from __future__ import annotations

import graphlib
import gzip
import hashlib
import json
from base64 import b64decode
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from functools import cache
from pathlib import Path
from uuid import UUID

import pytest
from django.apps import apps
from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.core.management.color import no_style
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from tests.calls.upgrade.answers import answer_of as kept_as

UPGRADE = Path(__file__).parent / "upgrade"
# The six models of a call before the ledger (issue 54's list): the fixture holds rows of each.
CALL_TABLES = (
    "realtime_callrequest",
    "realtime_callevent",
    "realtime_callrecording",
    "telephony_inboundcall",
    "telephony_forwardleg",
    "history_callrecord",
)
# What the ledger may add to a call object and to its frames (issue 54: `call`, Relay's id for
# the call, and `seq`, the order of its events), and what later releases added beside them
# (issue 56: `machineDetection`, asked for, and `answeredBy`, found, null on every call the
# release placed; a script's recording's transcript, null or empty on the release's, whose
# recordings were never transcribed); every other key must stay as it was.
LEDGER_KEYS = frozenset(
    {
        "call",
        "seq",
        "machineDetection",
        "answeredBy",
        "transcript",
        "transcriptConfidence",
        "transcriptStatus",
    }
)
# What later releases added to the rest of the export (issue 57: the user's `memberships` of
# numbers shared with them, each number's opening `hours` and recorded closed greeting: none
# on the release's, and its `ringing` list, its forwarding as a ring list; issue 58: each
# number's uploaded music on hold, none on the release's).
# A call record may say which entry of the ring list took it, and whose (issue 57): null on
# every call of the release's. The recordings of bridged calls (issue 58): none then.
# And who a person who took it handed it on to (issue 58): null on every call of the release's.
RECORD_KEYS = frozenset(
    {"ring_entry", "answered_member_id", "answered_member_email", "transferred_to"}
)
EXPORT_KEYS = (
    frozenset(
        {
            "memberships",
            "hours",
            "closed_greeting_file",
            "ringing",
            "ringPhone",
            "hold_music_file",
            "hold_music_seconds",
            "call_recordings",
        }
    )
    | RECORD_KEYS
)


@cache
def fixture() -> dict:
    return json.loads(gzip.decompress((UPGRADE / "fixture.json.gz").read_bytes()))


@cache
def answers() -> dict:
    return json.loads(gzip.decompress((UPGRADE / "answers.json.gz").read_bytes()))


# --- comparing answers ----------------------------------------------------------------------
def differences(old, new, *, may_add=frozenset(), where: str = "") -> list[str]:
    """How `new` differs from `old`: a key gone, a key added (except those in `may_add`, at
    any depth), a list of another length, a value of another type or value."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = [f"{where}.{key}: gone" for key in old if key not in new]
        found += [f"{where}.{key}: added" for key in sorted(new.keys() - old.keys() - may_add)]
        for key in (key for key in old if key in new):
            found += differences(old[key], new[key], may_add=may_add, where=f"{where}.{key}")
        return found
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return [f"{where}: {len(old)} items, now {len(new)}"]
        found = []
        for index, (was, now) in enumerate(zip(old, new, strict=True)):
            found += differences(was, now, may_add=may_add, where=f"{where}[{index}]")
        return found
    # type() too: True == 1 and 1 == 1.0, but a client sees true, 1 and 1.0 as different.
    if type(old) is not type(new) or old != new:
        return [f"{where}: {old!r}, now {new!r}"]
    return []


def answer_differences(read: dict, answer: dict) -> list[str]:
    """How today's `answer` to `read` differs from the release's: call objects (every answer
    of /api/calls, the export's `calls`) may have gained the ledger's keys."""
    if answer["status"] != read["status"]:
        return [f"status {read['status']}, now {answer['status']}"]
    kinds = [kind for kind in ("json", "file", "export") if kind in read]
    if [kind for kind in ("json", "file", "export") if kind in answer] != kinds:
        return [f"answered {sorted(answer)}, the release {sorted(read)}"]
    if "export" in read:
        old, new = read["export"], answer["export"]
        account, new_account = dict(old["account"]), dict(new["account"])
        found = differences(
            account.pop("calls", None),
            new_account.pop("calls", None),
            may_add=LEDGER_KEYS,
            where=".account.calls",
        )
        found += differences(account, new_account, may_add=EXPORT_KEYS, where=".account")
        return found + differences(old["files"], new["files"], where=".files")
    kind = kinds[0]
    may_add = LEDGER_KEYS if kind == "json" and read["path"].startswith("/api/calls") else set()
    if kind == "json" and read["path"].startswith("/api/history"):
        may_add = RECORD_KEYS
    return differences(read[kind], answer[kind], may_add=frozenset(may_add))


def answer_of(response) -> dict:
    """A response as the fixture holds an answer: its status, and the rest as
    tests.calls.upgrade.answers keeps it (the builder's own)."""
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return {"status": response.status_code} | kept_as(response.headers, body)


# --- the release's schema and rows ------------------------------------------------------------
def relay_app(label: str) -> bool:
    """Whether `label` is one of Relay's own apps (its code in this checkout)."""
    try:
        path = Path(apps.get_app_config(label).path).resolve()
    except LookupError:  # an app of the migration graph no longer installed
        return False
    # One of the checkout's top folders: a package installed in a .venv inside the checkout
    # (make install puts it there) is not Relay's.
    return path.parent == Path(settings.BASE_DIR).resolve()


def release_targets(loader) -> list[tuple[str, str | None]]:
    """Where MigrationExecutor takes the database back to: each of Relay's apps to its newest
    migration at the release (fixture's `migrations`), an app with none then to none."""
    recorded = fixture()["migrations"]
    apps_now = sorted({app for app, _ in loader.graph.leaf_nodes()})
    gone = set(recorded) - set(apps_now)
    assert not gone, f"apps of the release that have no migrations now: {gone}"
    targets = []
    for app in apps_now:
        if app in recorded:
            node = (app, recorded[app])
            # A squash that dropped it, or a renamed file: the release's databases are there.
            assert node in loader.graph.nodes, f"{node}, the release's, is not a migration now"
            targets.append(node)
        elif relay_app(app):
            targets.append((app, None))
    return targets


def decoded(kind: str, value):
    """A fixture's value (build_fixture.encoded) as the Python value its column holds."""
    if value is None or kind in ("int", "float", "bool", "text", "json"):
        return value
    readers = {
        "datetime": datetime.fromisoformat,
        "date": date.fromisoformat,
        "time": time.fromisoformat,
        "uuid": UUID,
        "decimal": Decimal,
        "duration": lambda micros: timedelta(microseconds=micros),
        "bytes": b64decode,
    }
    return readers[kind](value)


def in_key_order(models: dict) -> list[str]:
    """The tables of `models` (by table), each after those its foreign keys point to."""
    order = graphlib.TopologicalSorter()
    for table, model in models.items():
        order.add(table)
        for field in model._meta.local_concrete_fields:
            if field.is_relation:
                target = field.related_model._meta.db_table
                if target in models and target != table:
                    order.add(table, target)
    return list(order.static_order())


def release_rows_insert(historical) -> None:
    """Every row of the fixture, by SQL, into the tables as the release's migrations left
    them: each value made ready for the database by its column's field at the release."""
    tables = fixture()["tables"]
    by_table = {m._meta.db_table: m for m in historical.get_models(include_auto_created=True)}
    missing = set(tables) - set(by_table)
    assert not missing, (
        f"tables of the fixture that the release's migrations do not make: {missing}"
    )
    models = {table: by_table[table] for table in tables}
    quote = connection.ops.quote_name
    with transaction.atomic(), connection.cursor() as cursor:
        order = in_key_order(models)
        for table in reversed(order):  # whatever a migration may have put there
            cursor.execute(f"DELETE FROM {quote(table)}")  # noqa: S608 - a table's name, quoted
        for table in order:
            spec = tables[table]
            fields = {field.column: field for field in models[table]._meta.local_concrete_fields}
            assert set(spec["columns"]) == set(fields), f"{table}: columns unlike the release's"
            if not spec["rows"]:
                continue
            columns = list(spec["columns"])
            names = ", ".join(quote(column) for column in columns)
            marks = ", ".join(["%s"] * len(columns))
            cursor.executemany(
                f"INSERT INTO {quote(table)} ({names}) VALUES ({marks})",  # noqa: S608
                [
                    [
                        fields[column].get_db_prep_save(
                            decoded(spec["columns"][column], row[column]), connection
                        )
                        for column in columns
                    ]
                    for row in spec["rows"]
                ],
            )
        # PostgreSQL: the next id of a table with integer ids follows the rows put in.
        for statement in connection.ops.sequence_reset_sql(no_style(), list(models.values())):
            cursor.execute(statement)


def release_recordings_place() -> list[str]:
    """The fixture's WAVs put in the recordings storage under the names the rows give them;
    the names put there."""
    storage = storages["recordings"]
    placed = []
    for name, digest in fixture()["recordings"].items():
        audio = (UPGRADE / "recordings" / name).read_bytes()
        assert hashlib.sha256(audio).hexdigest() == digest, f"{name} is not the release's"
        if storage.exists(name):
            storage.delete(name)
        assert storage.save(name, ContentFile(audio)) == name
        placed.append(name)
    return placed


def migrate_to_newest() -> None:
    """Every app to its newest migration. Should a migration fail on the release's rows, the
    tables are emptied and the migrations run again before the failure is raised: the tests
    after this one must find the schema they expect."""
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    except Exception:
        from django.core.management import call_command

        call_command("flush", interactive=False, inhibit_post_migrate=True, verbosity=0)
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        raise


def the_upgrade() -> list[str]:
    """Steps 1 to 3 of the module's docstring; the recordings placed."""
    executor = MigrationExecutor(connection)
    targets = release_targets(executor.loader)
    placed = []
    try:
        executor.migrate(targets)
        at_release = executor.loader.project_state([t for t in targets if t[1] is not None])
        release_rows_insert(at_release.apps)
        placed = release_recordings_place()
    finally:
        migrate_to_newest()
    executor = MigrationExecutor(connection)
    unapplied = executor.migration_plan(executor.loader.graph.leaf_nodes())
    assert unapplied == [], f"left unapplied: {unapplied}"
    if not getattr(connection, "is_in_memory_db", lambda: False)():
        connection.close()  # as processes restarted after `migrate` (prepared statements too)
    return placed


# The state an inbound call of the release ends in, by its record's status, and who answered
# it in the ledger's words, by the record's answered_by and forwarded_to.
END_STATES = {"answered": "completed", "missed": "no_answer", "blocked": "busy"}


def answered_by(record: dict) -> str | None:
    if record["forwarded_to"] == "browser":
        return "browser"
    return {"forward": "person"}.get(record["answered_by"], record["answered_by"])


def inbound_calls_unlike_the_release() -> list[str]:
    """How the ledger's inbound calls and legs differ from the release's InboundCall and
    ForwardLeg rows (none, after a good upgrade): each inbound call one ledger call named as its
    history record is, ended as the record says, with its events numbered 1, 2, 3 ...; each
    leg a ledger leg of its call, and a browser leg for a call a tab took."""
    from calls.models import Call, Leg

    tables = fixture()["tables"]
    records = {r["sip_call_id"]: r for r in tables["history_callrecord"]["rows"]}
    found = []
    for old in tables["telephony_inboundcall"]["rows"]:
        call = Call.objects.filter(direction="inbound", sip_call_id=old["sip_call_id"]).first()
        record = records.get(old["sip_call_id"])
        if call is None or record is None:
            found.append(f"inbound call {old['sip_call_id']}: no ledger call or no record")
            continue
        got = (str(call.pk), call.status, call.outcome, call.answered_by, call.caller_id)
        wanted = (
            record["id"],
            END_STATES[record["status"]],
            record["status"],
            answered_by(record),
            old["caller_num"],
        )
        if got != wanted:
            found.append(f"inbound call {old['sip_call_id']}: {got}, not {wanted}")
        seqs = list(call.events.values_list("seq", flat=True))
        if seqs != list(range(1, call.last_seq + 1)):
            found.append(f"inbound call {old['sip_call_id']}: events {seqs}")
        if record["forwarded_to"] == "browser" and not call.legs.filter(kind="browser").exists():
            found.append(f"inbound call {old['sip_call_id']}: no browser leg")
    for old in tables["telephony_forwardleg"]["rows"]:
        role = "dial_target" if old["request_id"] else "forward_target"
        if not Leg.objects.filter(sip_call_id=old["sip_call_id"], phone=old["target"], role=role):
            found.append(f"leg {old['sip_call_id']} to {old['target']}: not in the ledger")
    return found


# --- the tests -------------------------------------------------------------------------------
def test_the_fixture_holds_every_kind_of_call_and_every_kind_of_read():
    """A fixture built again must still be worth comparing: rows of each of the six call
    models, the release's migrations, its WAVs, and reads of each kind."""
    tables = fixture()["tables"]
    assert {
        table: bool(tables.get(table, {}).get("rows")) for table in CALL_TABLES
    } == dict.fromkeys(CALL_TABLES, True)
    assert {"accounts", "numbers", "history", "realtime", "telephony"} <= set(
        fixture()["migrations"]
    )
    assert "calls" not in fixture()["migrations"]  # the release is before the ledger's models
    for name, digest in fixture()["recordings"].items():
        assert hashlib.sha256((UPGRADE / "recordings" / name).read_bytes()).hexdigest() == digest
    records = tables["history_callrecord"]["rows"]
    assert {r["status"] for r in records} == {"answered", "missed", "blocked"}
    assert {r["answered_by"] for r in records} >= {"voicemail", "forward", "app"}
    assert "browser" in {r["forwarded_to"] for r in records}
    assert "done" in {r["transcript_status"] for r in records}
    reads = answers()["reads"]
    paths = [read["path"] for read in reads]
    assert any("/api/history?" in p and "before=" in p for p in paths)  # a cursor page
    assert any("/api/calls?" in p and "before=" in p for p in paths)
    assert any("timeline" in read.get("json", {}) for read in reads)
    assert any(read.get("file", {}).get("Content-Type") == "audio/wav" for read in reads)
    assert any(p.startswith("/api/calls/") and "/recordings/" in p for p in paths)
    assert any("/api/history/" in p and p.endswith("/recording") for p in paths)
    assert {read["as"] for read in reads if "export" in read} == set(answers()["users"])
    assert {read["status"] for read in reads} >= {200, 206, 404}


def test_an_answer_differs_in_anything_but_the_ledgers_new_keys_on_calls():
    call = {"callId": "c1", "status": "completed", "timeline": [{"status": "queued", "at": 1}]}
    grown = {**call, "call": "u1", "timeline": [{"status": "queued", "at": 1, "seq": 1}]}
    assert differences(call, grown, may_add=LEDGER_KEYS) == []
    assert differences(call, grown) == [".call: added", ".timeline[0].seq: added"]
    assert differences(call, {**call, "status": "failed"}, may_add=LEDGER_KEYS) == [
        ".status: 'completed', now 'failed'"
    ]
    assert differences(call, {**call, "to": "+44"}, may_add=LEDGER_KEYS) == [".to: added"]
    assert differences(call, {"callId": "c1", "timeline": []}) == [
        ".status: gone",
        ".timeline: 1 items, now 0",
    ]
    assert differences({"duration": 1}, {"duration": 1.0}) == [".duration: 1, now 1.0"]
    assert differences({"heard": False}, {"heard": 0}) == [".heard: False, now 0"]

    history = {"status": 200, "json": {"history": [{"id": "r1"}]}}
    read = {"as": "alice", "path": "/api/history", **history}
    grown_record = {"status": 200, "json": {"history": [{"id": "r1", "call": "u1"}]}}
    assert answer_differences(read, grown_record) == [".history[0].call: added"]
    assert answer_differences(read, {"status": 404, "json": {}}) == ["status 200, now 404"]
    file_read = {"as": "alice", "path": "/x", "status": 200, "file": {"sha256": "a"}}
    assert answer_differences(file_read, {"status": 200, "file": {"sha256": "b"}}) == [
        ".sha256: 'a', now 'b'"
    ]
    export = {"account": {"calls": [call], "history": []}, "files": {"v.wav": "a"}}
    export_read = {"as": "alice", "path": "/api/user/export", "status": 200, "export": export}
    grown_export = {"account": {"calls": [grown], "history": []}, "files": {"v.wav": "a"}}
    assert answer_differences(export_read, {"status": 200, "export": grown_export}) == []
    lost_file = {"account": export["account"], "files": {}}
    assert answer_differences(export_read, {"status": 200, "export": lost_file}) == [
        ".files.v.wav: gone"
    ]


@pytest.mark.django_db(transaction=True)
def test_every_read_answers_after_the_upgrade_as_the_release_answered_it():
    placed = the_upgrade()
    try:
        keys = {who: user["apiKey"] for who, user in answers()["users"].items()}
        client = Client()
        found = []
        for read in answers()["reads"]:
            headers = {
                f"HTTP_{name.upper().replace('-', '_')}": value
                for name, value in read.get("headers", {}).items()
            }
            response = client.get(read["path"], HTTP_X_API_KEY=keys[read["as"]], **headers)
            answer = answer_of(response)
            for difference in answer_differences(read, answer)[:10]:
                found.append(f"GET {read['path']} as {read['as']}: {difference}")
        found.extend(inbound_calls_unlike_the_release())
    finally:
        storage = storages["recordings"]
        for name in placed:
            storage.delete(name)
    assert not found, f"{len(found)} differences:\n" + "\n".join(found[:100])
