"""How the suite spreads over pytest-xdist's workers (`make test` runs it with
`--dist loadgroup`; the Makefile says how many workers).

- Tests that share a start-up go to one worker together, so it starts once: every test that
  uses a fixture of the suite's own wider than a function (a module's live Relay or browser,
  Synapse for the session) joins an xdist_group, one per module, or one per session-wide
  fixture.
- The longest work goes out first, so that no worker is left running a long test alone at the
  end while the others idle. `tests/durations.json` holds the seconds each slow test last took
  (setup, call and teardown), and the work is ordered by it, a group by the sum of its tests.
  It only orders: a stale or missing entry costs a little wall time, never a result.
  `make test-durations` measures the suite again and rewrites it.

Outside xdist (a plain `pytest` run) nothing is regrouped or reordered.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
DURATIONS = TESTS / "durations.json"
# Shorter tests are left out of the file: between them, order hardly matters.
RECORDED_FROM_SECONDS = 1.0
WIDE_SCOPES = ("class", "module", "package")


def pytest_addoption(parser):
    parser.addoption(
        "--record-durations",
        action="store_true",
        help=f"write every test's seconds (from {RECORDED_FROM_SECONDS} s) to {DURATIONS}",
    )


@functools.cache
def suite_fixture(function) -> bool:
    """The fixture is written under tests/ (a conftest or a plugin of the suite's own)."""
    source = inspect.getsourcefile(function)
    return source is not None and Path(source).resolve().is_relative_to(TESTS)


def shared_start_ups(item) -> set[str]:
    """What `item` shares with other tests: each session-wide fixture of the suite's own it
    uses (by name), and its module when it uses a class- or module-wide one."""
    shared = set()
    for definitions in item._fixtureinfo.name2fixturedefs.values():
        fixture = definitions[-1]
        if not suite_fixture(fixture.func):
            continue  # a plugin's (pytest-django's database, pytest's tmp_path_factory)
        if fixture.scope == "session":
            shared.add(f"session:{fixture.argname}")
        elif fixture.scope in WIDE_SCOPES:
            shared.add(item.nodeid.split("::", 1)[0])
    return shared


def start_up_groups(items) -> dict:
    """Each test that shares a start-up, mapped to its group: tests that share one, directly
    or through another test (Synapse's users, and a module whose fixture wants Synapse too),
    are one group, named by one of its start-ups."""
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    shared = {item: sorted(shared_start_ups(item)) for item in items}
    for keys in shared.values():
        for key in keys[1:]:
            first, other = root(keys[0]), root(key)
            if first != other:
                parent[other] = first
    return {item: root(keys[0]) for item, keys in shared.items() if keys}


def test_id(nodeid: str) -> str:
    """A test's id without the "@group" that xdist's loadgroup appends to it."""
    head, at, tail = nodeid.rpartition("@")
    return head if at and "]" not in tail and "::" not in tail else nodeid


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    """Groups marked before every other hook (xdist's turns the marks into ids), the order
    set after them all (pytest's own groups the tests of a module-wide fixture's params)."""
    under_xdist = bool(os.environ.get("PYTEST_XDIST_WORKER"))
    groups: dict[str, list] = defaultdict(list)
    if under_xdist:
        for item, group in start_up_groups(items).items():
            item.add_marker(pytest.mark.xdist_group(group))
    result = yield
    if not under_xdist:
        return result
    for item in items:
        marks = [mark.args[0] for mark in item.iter_markers("xdist_group")]
        groups[marks[0] if marks else item.nodeid].append(item)
    seconds = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    weight = {
        group: sum(seconds.get(test_id(item.nodeid), 0) for item in members)
        for group, members in groups.items()
    }
    # Every worker must collect the same order (xdist checks): sorted() is stable, and the
    # weights come from one file.
    ordered = sorted(groups.items(), key=lambda entry: -weight[entry[0]])
    items[:] = [item for _, members in ordered for item in members]
    return result


class DurationRecorder:
    """Adds up each test's phases as the reports arrive (from every xdist worker, on the
    controller), and writes the slow ones at the end."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report):
        self.seconds[test_id(report.nodeid)] += report.duration

    def pytest_sessionfinish(self, session):
        slow = {
            nodeid: round(spent, 1)
            for nodeid, spent in sorted(self.seconds.items())
            if spent >= RECORDED_FROM_SECONDS
        }
        DURATIONS.write_text(json.dumps(slow, indent=0) + "\n")


def pytest_configure(config):
    if config.getoption("record_durations") and not os.environ.get("PYTEST_XDIST_WORKER"):
        config.pluginmanager.register(DurationRecorder(), "relay-duration-recorder")
