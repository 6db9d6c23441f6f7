"""How the suite spreads over pytest-xdist's workers (`make test` runs it with
`--dist loadscope --no-loadscope-reorder`; the Makefile says how many workers).

- A module is one worker's (xdist's loadscope), so a module's shared start-up (a live Relay,
  an agent, a browser, a carrier edge) happens once. loadgroup would group finer (Synapse's
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


def scope(nodeid: str) -> str:
    """The unit xdist's loadscope hands out: a test's module, or its class (as xdist's own
    LoadScopeScheduling._split_scope cuts it)."""
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
# outcome can depend on the database runs on PostgreSQL, which runs them all. The embedded
# (SQLite) pass, with RELAY_TEST_PASS=embedded, leaves out the SIP suite (tests/telephony:
# live agents and their calls, about half the suite's time), which the PostgreSQL pass runs
# whole. A developer's plain `make test` runs everything on whichever database it is given.
PASS_LEAVES_OUT = {"embedded": ("tests/telephony/",)}


def pass_items(items: list, pass_name: str | None) -> tuple[list, list]:
    """`items` split into (kept, left out) for the CI pass `pass_name` (None: all kept)."""
    prefixes = PASS_LEAVES_OUT.get(pass_name or "", ())
    kept = [item for item in items if not item.nodeid.startswith(prefixes)]
    return kept, [item for item in items if item.nodeid.startswith(prefixes)]


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
