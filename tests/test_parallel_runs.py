"""What keeps the suite's xdist workers out of each other's way (tests/settings.py, tests/live.py)
and how the work is grouped and ordered (tests/scheduling.py)."""

import socket
from types import SimpleNamespace

import pytest

from tests import live, scheduling
from tests.settings import worker_redis_url


@pytest.mark.parametrize(
    ("url", "worker", "expected"),
    [
        ("", "gw3", ""),  # the embedded default: no Redis at all
        ("redis://127.0.0.1:6379/0", "", "redis://127.0.0.1:6379/0"),  # no xdist
        ("redis://127.0.0.1:6379/0", "gw0", "redis://127.0.0.1:6379/0"),
        ("redis://127.0.0.1:6379/0", "gw3", "redis://127.0.0.1:6379/3"),
        ("redis://127.0.0.1:6379", "gw2", "redis://127.0.0.1:6379/2"),
        ("redis://:pw@127.0.0.1:6379/12", "gw5", "redis://:pw@127.0.0.1:6379/1"),
    ],
)
def test_each_worker_has_a_redis_database_of_its_own(url, worker, expected):
    assert worker_redis_url(url, worker) == expected


def test_the_workers_port_bands_are_disjoint_and_below_the_ephemeral_ports(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
    bands = []
    for index in range(4):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{index}")
        bands += [live.worker_band(live.SINGLE_PORTS), live.worker_band(live.RTP_PORTS)]
    taken = [port for band in bands for port in band]
    assert len(taken) == len(set(taken))  # no port in two bands
    assert all(len(band) >= 1000 for band in bands)
    assert max(taken) < 32768
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert live.worker_band(live.SINGLE_PORTS) == live.SINGLE_PORTS  # outside xdist: all


def test_a_picker_hands_out_each_port_once_and_skips_a_port_in_use():
    with socket.socket() as held:
        held_port = live.free_port()
        held.bind(("127.0.0.1", held_port))
        picker = live.PortPicker(range(held_port - 10, held_port + 10))
        picker.cursor = held_port - 1
        handed = [picker.take() for _ in range(8)]
    assert held_port not in handed
    assert len(set(handed)) == 8
    rtp = live.PortPicker(live.RTP_PORTS)
    rtp.cursor = live.RTP_PORTS.start + 1
    first = rtp.take(10, align=2)
    assert first % 2 == 0
    assert rtp.take(10, align=2) >= first + 10


def item(nodeid: str, **fixtures: str):
    """A stand-in for a collected test using `fixtures` (name: scope), each written in
    tests/ (this module's own function stands for their code)."""
    definitions = {
        name: [SimpleNamespace(func=item, scope=scope, argname=name)]
        for name, scope in fixtures.items()
    }
    return Item(nodeid, definitions)


class Item:
    """Collected tests are told apart by identity, as pytest's are."""

    def __init__(self, nodeid: str, definitions: dict) -> None:
        self.nodeid = nodeid
        self._fixtureinfo = SimpleNamespace(name2fixturedefs=definitions)


def test_tests_that_share_a_start_up_form_one_group():
    alone = item("tests/a.py::test_alone", db="function")
    module_1 = item("tests/b.py::test_one", relay="module")
    module_2 = item("tests/b.py::test_two", relay="module", synapse="session")
    synapse_user = item("tests/c.py::test_chat", synapse="session")
    other_module = item("tests/d.py::test_browser", browser="module")

    groups = scheduling.start_up_groups([alone, module_1, module_2, synapse_user, other_module])

    assert alone not in groups  # handed out on its own
    # b.py's module-wide Relay and the session's Synapse tie three tests together.
    assert groups[module_1] == groups[module_2] == groups[synapse_user]
    assert groups[other_module] != groups[module_1]


def test_a_plugins_fixture_shares_nothing():
    # pytest's tmp_path_factory is session-wide, but it is not a start-up of the suite's.
    tmp = item("tests/a.py::test_x", tmp_path_factory="session")
    tmp._fixtureinfo.name2fixturedefs["tmp_path_factory"][0].func = pytest.fixture
    assert scheduling.start_up_groups([tmp]) == {}


@pytest.mark.parametrize(
    ("nodeid", "expected"),
    [
        ("tests/a.py::test_x@tests/a.py", "tests/a.py::test_x"),
        ("tests/a.py::test_x[u@host]", "tests/a.py::test_x[u@host]"),
        ("tests/a.py::test_x[u@host]@session:synapse", "tests/a.py::test_x[u@host]"),
        ("tests/a.py::test_x", "tests/a.py::test_x"),
    ],
)
def test_a_groups_suffix_is_not_part_of_the_tests_id(nodeid, expected):
    assert scheduling.test_id(nodeid) == expected
