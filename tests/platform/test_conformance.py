"""The private names Relay's code uses of other libraries (tests/platform/edges.py) are all
there, in the shape the code expects, in the releases installed; and the check is one that
fails when a name goes."""

import re
import sys
import types

import pytest
from django.conf import settings
from packaging.utils import canonicalize_name

from harness.live import ROOT
from tests.platform import edges
from tests.platform.edges import EDGES, Assigned, Edge, Method, Own, Present
from tests.platform.pins import pinned
from tests.relay.test_settings_table import readme_variables


@pytest.mark.parametrize("edge", EDGES, ids=lambda edge: f"{edge.module}:{edge.distribution}")
def test_every_private_name_relay_uses_is_there_in_its_shape(edge):
    found = edges.problems(edge)
    assert not found, "\n".join(found)


def test_each_library_with_an_edge_is_pinned_in_pyproject_to_the_release_installed():
    pins = pinned()
    for distribution in {edge.distribution for edge in EDGES}:
        pin = pins.get(canonicalize_name(distribution))
        installed = edges.installed_version(distribution)
        assert pin is not None, f"{distribution} is not pinned to a release in pyproject.toml"
        assert pin.contains(installed), f"{distribution} {installed} is not the pinned {pin}"


def test_each_edges_off_switch_is_a_setting_in_the_readmes_table():
    documented = readme_variables()
    for edge in EDGES:
        if edge.switch is not None:
            assert hasattr(settings, edge.switch), f"{edge.module}: no setting {edge.switch}"
            assert edge.switch in documented, f"{edge.switch} is not in README.md's table"


class _Worker:
    """A stand-in for gthread's ThreadWorker of a release without enqueue_req."""

    def __init__(self):
        self.tpool = None

    def handle(self, conn, extra):  # a parameter more than 27.0's
        pass


class _Serializer:
    to_representation = None  # no longer callable, and not a method of the class's own


@pytest.fixture
def stand_in_gthread(monkeypatch):
    module = types.ModuleType("relay_stand_in_gthread")
    module.ThreadWorker = _Worker
    monkeypatch.setitem(sys.modules, "relay_stand_in_gthread", module)
    return module


def test_the_check_fails_on_a_stand_in_module_without_a_pinned_name(stand_in_gthread):
    edge = Edge(
        "relay/platform/gunicorn_worker.py",
        "gunicorn",
        "GUNICORN_RELAY_WORKER",
        (
            Method("relay_stand_in_gthread.ThreadWorker", "enqueue_req", ("self", "conn")),
            Method("relay_stand_in_gthread.ThreadWorker", "handle", ("self", "conn")),
            Assigned("relay_stand_in_gthread.ThreadWorker", "tpool"),
            Assigned("relay_stand_in_gthread.ThreadWorker", "poller"),
            Present("relay_stand_in_gthread", "_DEFER"),
        ),
    )
    found = edges.problems(edge)
    release = f"gunicorn {edges.installed_version('gunicorn')}: "
    assert found == [
        release + "relay_stand_in_gthread.ThreadWorker.enqueue_req is missing"
        " (relay/platform/gunicorn_worker.py uses it)",
        release + "relay_stand_in_gthread.ThreadWorker.handle takes (self, conn, extra),"
        " not (self, conn) (relay/platform/gunicorn_worker.py uses it)",
        release + "relay_stand_in_gthread.ThreadWorker.poller is never assigned"
        " (relay/platform/gunicorn_worker.py uses it)",
        release + "relay_stand_in_gthread._DEFER is missing"
        " (relay/platform/gunicorn_worker.py uses it)",
    ]
    with pytest.raises(AssertionError, match=re.escape(release) + ".*enqueue_req is missing"):
        test_every_private_name_relay_uses_is_there_in_its_shape(edge)


def test_the_check_fails_on_a_name_that_changed_kind_or_whose_module_is_gone(monkeypatch):
    module = types.ModuleType("relay_stand_in_fields")
    module.Serializer = _Serializer
    monkeypatch.setitem(sys.modules, "relay_stand_in_fields", module)
    edge = Edge(
        "core/platform/representation.py",
        "djangorestframework",
        "COMPILED_REPRESENTATION",
        (
            Method("relay_stand_in_fields.Serializer", "to_representation", ("self", "instance")),
            Own("relay_stand_in_fields.Base", "to_representation"),
            Present("relay_stand_in_no_such_module.Serializer", "_readable_fields"),
        ),
    )
    found = edges.problems(edge)
    assert [line.split(": ", 1)[1].split(" (core/")[0] for line in found] == [
        "relay_stand_in_fields.Serializer.to_representation is no longer callable (NoneType)",
        "relay_stand_in_fields.Base.to_representation is missing (its owner does not import)",
        "relay_stand_in_no_such_module.Serializer._readable_fields is missing"
        " (its owner does not import)",
    ]
    release = f"djangorestframework {edges.installed_version('djangorestframework')}: "
    assert all(line.startswith(release) for line in found)


def test_relays_own_list_fails_when_the_installed_library_loses_a_name(monkeypatch):
    from gunicorn.workers import gthread

    monkeypatch.delattr(gthread.ThreadWorker, "enqueue_req")
    monkeypatch.delattr(gthread, "_DEFER")
    gunicorn_edge = next(edge for edge in EDGES if edge.distribution == "gunicorn")
    found = edges.problems(gunicorn_edge)
    release = f"gunicorn {edges.installed_version('gunicorn')}: "
    assert [line.removeprefix(release).split(" (")[0] for line in found] == [
        "gunicorn.workers.gthread.ThreadWorker.enqueue_req is missing",
        "gunicorn.workers.gthread._DEFER is missing",
    ]


# The places other libraries' internals may be used (issue 55): the kernel's and the roof's
# platform packages, and the browser leg's media edge.
EDGE_PLACES = ("core/platform/", "relay/platform/", "telephony/webrtc/fastpath.py")


def test_every_module_that_uses_a_private_name_lives_at_the_edge():
    for edge in EDGES:
        assert edge.module.startswith(EDGE_PLACES), f"{edge.module} is outside {EDGE_PLACES}"
        assert (ROOT / edge.module).is_file(), edge.module
