"""How the suite spreads over pytest-xdist's workers (`make test` runs it with
`--dist loadscope --no-loadscope-reorder`; the Makefile says how many workers).

- A module is one worker's (xdist's loadscope), so a module's shared start-up (a live Relay,
  an agent, a browser, a carrier edge) happens once. A module whose every test starts its
  own processes (EACH_TEST_A_UNIT) shares nothing worth keeping together, so its tests go
  out one by one: the README's walk-throughs, each a `make run` of its own, would otherwise
  hold one worker for five minutes while the others idle. loadgroup would group finer (Synapse's
  users across modules, say), but under pytest 9 xdist 3.8 cannot mark a group: it renames
  `item._nodeid`, which pytest 9 no longer reads, so every test would go out alone.
- The longest modules go out first, so that no worker is left running a long one alone at
  the end while the others idle: `tests/durations.json` holds the seconds each slow test last
  took (setup, call and teardown), and the modules are ordered by their sum. It only orders:
  a stale or missing entry costs a little wall time, never a result. `make test-durations`
  measures the suite again and rewrites what it ran; a test it skipped (the other database's
  pass has it) or did not run keeps its entry. Run it on both passes.

Outside xdist (a plain `pytest` run) nothing is reordered.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

DURATIONS = Path(__file__).resolve().parent / "durations.json"
# Shorter tests are left out of the file: between them, order hardly matters.
RECORDED_FROM_SECONDS = 1.0


def pytest_addoption(parser):
    parser.addoption(
        "--record-durations",
        action="store_true",
        help=f"write every test's seconds (from {RECORDED_FROM_SECONDS} s) to {DURATIONS}",
    )


# Modules whose tests each start everything they use (a `make run`, a runrelay): a test is a
# unit of its own. A module-wide fixture of theirs runs once a worker instead of once, so it
# must be cheap (test_runrelay_restarts' migrated database: a migrate, seconds).
EACH_TEST_A_UNIT = (
    "tests/relay/test_readme.py",
    "tests/relay/test_runrelay.py",
    "tests/relay/test_runrelay_restarts.py",
)


def scope(nodeid: str) -> str:
    """The unit the workers are handed (RelayScheduling): a test's module or its class (as
    xdist's own LoadScopeScheduling._split_scope cuts it), or the test itself in a module of
    EACH_TEST_A_UNIT."""
    if nodeid.startswith(EACH_TEST_A_UNIT):
        return nodeid
    return nodeid.rsplit("::", 1)[0]


def longest_first(items: list, seconds: dict[str, float]) -> list:
    """`items` with their scopes ordered by the seconds they took last (the longest first),
    each scope's tests in their own order."""
    scopes: dict[str, list] = defaultdict(list)
    for item in items:
        scopes[scope(item.nodeid)].append(item)
    weight = {
        name: sum(seconds.get(item.nodeid, 0) for item in members)
        for name, members in scopes.items()
    }
    # Every worker must collect the same order (xdist checks): sorted() is stable, and the
    # weights come from one file.
    ordered = sorted(scopes.items(), key=lambda entry: -weight[entry[0]])
    return [item for _, members in ordered for item in members]


# CI's two passes (.ci/run, issue 55): every test runs at least once, and every test whose
# outcome can depend on the database runs on PostgreSQL. A test that runs in one process runs
# in both passes: its SQL is what differs between the two databases, and it is cheap. A test
# of live processes (a Relay, SIPp, a browser, Synapse) is slow and runs once, in the pass
# whose database it uses:
# - on the pass's own database (harness/live.py's test_database_url): the PostgreSQL pass only,
#   except the embedded default's concurrency under load (many sockets, many processes, one
#   SQLite file), which both passes run;
# - on an embedded default of its own (`make run`, runrelay on an SQLite file, whatever the
#   pass): the embedded pass only, since the PostgreSQL pass would repeat it to the byte.
# A module that reads no database and says so by skipping on PostgreSQL
# (tests/history/test_transcription_accuracy.py) must not be named here: the embedded pass
# would leave it out and the PostgreSQL pass skip it, and CI would run it nowhere
# (test_scheduling checks).
# A developer's plain `make test` runs everything on whichever database it is given.
LIVE_ON_THE_PASS_DATABASE = (
    "tests/telephony/",  # live agents and their calls: about half the suite's time
    "tests/accounts/test_ended_credentials_across_processes.py",
    "tests/accounts/test_hashing_admission.py",
    "tests/accounts/test_hashing_queue.py",
    "tests/admin/test_browser.py",
    "tests/admin/test_browser_sign_in.py",
    "tests/console/test_browser",  # every browser test of the console
    "tests/console/test_whole_flow.py",
    "tests/history/test_call_mail.py",
    "tests/matrix/test_matrix_bot.py",
    "tests/matrix/test_matrix_live.py",
    "tests/matrix/test_synapse_harness.py",
    "tests/realtime/test_dialing_policy.py",
    "tests/realtime/test_faults.py",
    "tests/relay/test_daphne_server.py",
    "tests/relay/test_generated_client.py",
    "tests/relay/test_healthz.py",
    "tests/relay/test_redis_faults.py",
    "tests/relay/test_request_ids_and_logs.py",
    "tests/security/test_api_fuzz.py",  # tests/security/test_bad_input.py runs on both
)
ON_AN_EMBEDDED_DEFAULT_OF_ITS_OWN = (
    "tests/relay/test_readme.py",
    "tests/relay/test_runrelay.py",
    "tests/relay/test_runrelay_restarts.py",
)
PASS_LEAVES_OUT = {
    "embedded": LIVE_ON_THE_PASS_DATABASE,
    "postgresql": ON_AN_EMBEDDED_DEFAULT_OF_ITS_OWN,
}


def pass_items(items: list, pass_name: str | None) -> tuple[list, list]:
    """`items` split into (kept, left out) for the CI pass `pass_name` (None: all kept)."""
    prefixes = PASS_LEAVES_OUT.get(pass_name or "", ())
    kept = [item for item in items if not item.nodeid.startswith(prefixes)]
    return kept, [item for item in items if item.nodeid.startswith(prefixes)]


def pytest_xdist_make_scheduler(config, log):
    """xdist's loadscope, with Relay's units (scope); any other --dist as xdist has it."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class RelayScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope(nodeid)

    return RelayScheduling(config, log)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    """The CI pass's tests (pass_items), in the order set after every other hook (pytest's
    own groups the tests of a module-wide fixture's params)."""
    result = yield
    kept, left_out = pass_items(items, os.environ.get("RELAY_TEST_PASS"))
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept
    if os.environ.get("PYTEST_XDIST_WORKER"):
        seconds = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
        items[:] = longest_first(items, seconds)
    return result


class DurationRecorder:
    """Adds up each test's phases as the reports arrive (from every xdist worker, on the
    controller), and writes the slow ones at the end."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.skipped: set[str] = set()

    def pytest_runtest_logreport(self, report):
        self.seconds[report.nodeid] += report.duration
        if report.skipped:
            self.skipped.add(report.nodeid)

    def pytest_sessionfinish(self, session):
        # A test this run skipped or did not run keeps what an earlier run measured: each pass
        # (SQLite, PostgreSQL) skips tests the other runs, and a run of some modules measures
        # only those.
        recorded = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
        measured = {
            nodeid: round(spent, 1)
            for nodeid, spent in self.seconds.items()
            if nodeid not in self.skipped
        }
        kept = {nodeid: spent for nodeid, spent in recorded.items() if nodeid not in measured}
        slow = {
            nodeid: spent
            for nodeid, spent in sorted({**kept, **measured}.items())
            if spent >= RECORDED_FROM_SECONDS
        }
        DURATIONS.write_text(json.dumps(slow, indent=0) + "\n")


def pytest_configure(config):
    if config.getoption("record_durations") and not os.environ.get("PYTEST_XDIST_WORKER"):
        config.pluginmanager.register(DurationRecorder(), "relay-duration-recorder")
