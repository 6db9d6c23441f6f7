"""`manage.py recount_totals` recounts the counters behind `total` from the rows, corrects
any drift and says which counters it corrected."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.db.models import F

from calls.models import CallCounter, OutcomeCounter
from history.services import record_inbound_call
from tests.factories import CallFactory, NumberFactory
from tests.totals import assert_totals_exact, calls_counted, history_counted

pytestmark = pytest.mark.django_db


def recount() -> str:
    out = StringIO()
    call_command("recount_totals", stdout=out)  # raises on a non-zero exit
    return out.getvalue()


@pytest.fixture
def counted(user, other_user):
    """Records and calls of two users, all counted."""
    office, home = NumberFactory(owner=user), NumberFactory(owner=user)
    for number, status in [(office, "answered"), (office, "missed"), (home, "missed")]:
        record_inbound_call(number=number, caller_num="+447700900123", status=status, duration=0)
    CallFactory.create_batch(2, owner=user)
    CallFactory(owner=other_user, status="busy")
    return office, home


def test_with_nothing_drifted_it_corrects_nothing(counted):
    before = (history_counted(), calls_counted())

    assert recount() == "No drift: every counter matches its rows.\n"
    assert (history_counted(), calls_counted()) == before


def test_it_corrects_every_kind_of_drift_and_reports_it_per_owner(user, other_user, counted):
    office, home = counted
    OutcomeCounter.objects.filter(number=office, outcome="answered").update(count=F("count") + 5)
    OutcomeCounter.objects.filter(number=home).delete()  # a counter lost
    OutcomeCounter.objects.create(owner=user, number=home, outcome="blocked", count=3)  # stray
    CallCounter.objects.filter(owner=other_user).update(count=0)

    output = recount()

    assert_totals_exact()
    lines = output.splitlines()
    assert (
        f"history: owner {user.pk} ({user.email}), number {office.pk}, status answered: "
        "counted 6, rows 1 (-5)" in lines
    )
    assert (
        f"history: owner {user.pk} ({user.email}), number {home.pk}, status missed: "
        "counted 0, rows 1 (+1)" in lines
    )
    assert (
        f"history: owner {user.pk} ({user.email}), number {home.pk}, status blocked: "
        "counted 3, rows 0 (-3)" in lines
    )
    assert (
        f"calls: owner {other_user.pk} ({other_user.email}), status busy: "
        "counted 0, rows 1 (+1)" in lines
    )
    assert lines[-1] == "Corrected 3 history counter(s), 1 calls counter(s) of 2 owner(s)."
    assert recount() == "No drift: every counter matches its rows.\n"


def test_the_api_total_is_right_again_after_a_recount(client_jwt, counted):
    OutcomeCounter.objects.update(count=0)
    assert client_jwt.get("/api/history").json()["total"] == 0

    recount()

    assert client_jwt.get("/api/history").json()["total"] == 3
