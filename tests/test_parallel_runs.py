"""What keeps the suite's xdist workers out of each other's way (tests/settings.py,
harness/ports.py) and how the work is grouped and ordered (tests/scheduling.py)."""

import socket
from types import SimpleNamespace

import pytest

from harness import live, ports
from tests import scheduling
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
        bands += [ports.worker_band(ports.SINGLE_PORTS), ports.worker_band(ports.RTP_PORTS)]
    taken = [port for band in bands for port in band]
    assert len(taken) == len(set(taken))  # no port in two bands
    assert all(len(band) >= 1000 for band in bands)
    assert max(taken) < 32768
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert ports.worker_band(ports.SINGLE_PORTS) == ports.SINGLE_PORTS  # outside xdist: all


def test_a_picker_hands_out_each_port_once_and_skips_a_port_in_use():
    with socket.socket() as held:
        held_port = ports.free_port()
        held.bind(("127.0.0.1", held_port))
        picker = ports.PortPicker(range(held_port - 10, held_port + 10))
        picker.cursor = held_port - 1
        handed = [picker.take() for _ in range(8)]
    assert held_port not in handed
    assert len(set(handed)) == 8
    rtp = ports.PortPicker(ports.RTP_PORTS)
    rtp.cursor = ports.RTP_PORTS.start + 1
    first = rtp.take(10, align=2)
    assert first % 2 == 0
    assert rtp.take(10, align=2) >= first + 10


class Item:
    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid


def test_the_longest_modules_go_out_first_each_whole_and_in_its_own_order():
    items = [
        Item("tests/a.py::test_quick"),
        Item("tests/b.py::test_one"),
        Item("tests/b.py::test_two[udp]"),
        Item("tests/c.py::Case::test_slow"),
        Item("tests/c.py::Case::test_other"),
        Item("tests/d.py::test_unmeasured"),
    ]
    seconds = {
        "tests/a.py::test_quick": 2.0,
        "tests/b.py::test_one": 30.0,
        "tests/b.py::test_two[udp]": 45.0,
        "tests/c.py::Case::test_slow": 60.0,
    }

    ordered = [item.nodeid for item in scheduling.longest_first(items, seconds)]

    assert ordered == [
        "tests/b.py::test_one",  # 75 s in all
        "tests/b.py::test_two[udp]",
        "tests/c.py::Case::test_slow",  # 60 s, a class is a unit of its own
        "tests/c.py::Case::test_other",
        "tests/a.py::test_quick",
        "tests/d.py::test_unmeasured",  # not in the file: last
    ]


@pytest.mark.parametrize(
    ("nodeid", "expected"),
    [
        ("tests/a.py::test_x", "tests/a.py"),
        ("tests/a.py::test_x[udp-open]", "tests/a.py"),
        ("tests/a.py::Case::test_x", "tests/a.py::Case"),
        (
            "tests/relay/test_readme.py::test_the_quickstart_runs_as_printed_against_make_run",
            "tests/relay/test_readme.py::test_the_quickstart_runs_as_printed_against_make_run",
        ),
    ],
)
def test_a_tests_unit_is_its_module_or_its_class(nodeid, expected):
    assert scheduling.scope(nodeid) == expected


def test_the_workers_are_handed_relays_units(pytestconfig):
    """The units xdist hands out are scheduling.scope's, so the README's walk-throughs spread
    over the workers instead of queueing on one."""
    from xdist.scheduler import LoadScopeScheduling

    def config_with(dist):
        values = {"dist": dist, "tx": ["2*popen"]}
        return SimpleNamespace(
            getvalue=lambda name: values.get(name, pytestconfig.getvalue(name)),
            getoption=pytestconfig.getoption,
            option=pytestconfig.option,
        )

    made = scheduling.pytest_xdist_make_scheduler(config_with("loadscope"), log=None)
    assert isinstance(made, LoadScopeScheduling)
    for nodeid in (
        "tests/relay/test_readme.py::test_the_quickstart_runs_as_printed_against_make_run",
        "tests/relay/test_runrelay_restarts.py::test_restart_delays_double_up_to_the_longest",
        "tests/telephony/test_inbound.py::test_a_call",
        "tests/a.py::Case::test_x",
    ):
        assert made._split_scope(nodeid) == scheduling.scope(nodeid)
    assert made._split_scope("tests/telephony/test_inbound.py::test_a_call") == (
        "tests/telephony/test_inbound.py"
    )
    assert scheduling.pytest_xdist_make_scheduler(config_with("load"), log=None) is None


def test_cis_passes_run_each_live_test_once_in_the_pass_whose_database_it_uses():
    items = [
        Item("tests/history/test_x.py::test_a"),  # one process: both passes
        Item("tests/telephony/test_inbound.py::test_b"),
        Item("tests/telephony/interop/test_interop_inbound.py::test_c"),
        Item("tests/relay/test_readme.py::test_d"),  # make run: an embedded default of its own
        Item("tests/console/test_browser_calls.py::test_e"),  # a live Relay on the pass's db
        Item("tests/realtime/test_live.py::test_f"),  # the embedded default under load: both
    ]

    embedded, left_out_of_embedded = scheduling.pass_items(items, "embedded")
    postgresql, left_out_of_postgresql = scheduling.pass_items(items, "postgresql")
    everything, nothing = scheduling.pass_items(items, None)

    assert [i.nodeid.split("::")[1] for i in embedded] == ["test_a", "test_d", "test_f"]
    assert [i.nodeid.split("::")[1] for i in postgresql] == [
        "test_a",
        "test_b",
        "test_c",
        "test_e",
        "test_f",
    ]
    assert [i.nodeid.split("::")[1] for i in left_out_of_embedded] == ["test_b", "test_c", "test_e"]
    assert [i.nodeid.split("::")[1] for i in left_out_of_postgresql] == ["test_d"]
    assert (everything, nothing) == (items, [])  # a developer's plain run: all of it


def test_every_module_a_pass_leaves_out_is_there():
    """A renamed module would otherwise run in both passes again, unnoticed."""
    for prefixes in scheduling.PASS_LEAVES_OUT.values():
        for prefix in prefixes:
            path = live.ROOT / prefix
            assert path.exists() or list(path.parent.glob(path.name + "*.py")), prefix


def test_no_module_that_only_the_embedded_pass_runs_is_left_out_of_it():
    """A module that skips itself on PostgreSQL (it reads no database) runs in the embedded
    pass or nowhere: naming it among the live modules the embedded pass leaves out would
    leave it out of CI altogether, as tests/history/test_transcription_accuracy.py once was."""
    skipping_on_postgresql = sorted(
        str(path.relative_to(live.ROOT))
        for path in (live.ROOT / "tests").rglob("test_*.py")
        if 'connection.vendor != "sqlite"' in path.read_text()
    )
    assert "tests/history/test_transcription_accuracy.py" in skipping_on_postgresql
    left_out = [
        module
        for module in skipping_on_postgresql
        if module.startswith(scheduling.PASS_LEAVES_OUT["embedded"])
    ]
    assert left_out == []
