"""Each library edge's off switch (tests/platform/edges.py) falls back to the library's public
path with the same observable behaviour: these run the same requests both ways."""

from datetime import timedelta

import pytest
from django.utils import timezone

from core.platform import compiled, representation
from tests.factories import CallRecordFactory, NumberFactory

# What each switch turns off: with the switch off, a call to it fails the request.
BYPASSED = {
    "COMPILED_QUERIES": (compiled, "prepared_cursor"),
    "COMPILED_REPRESENTATION": (representation, "_compiled"),
}


def _refused(*args, **kwargs):
    raise AssertionError("the path the off switch turns off was taken")


def _answers(client, user) -> list:
    """What a client sees of the reads every request makes (its session, quotas, history)."""
    paths = ["/api/user/me", "/api/dashboard", "/api/history", "/api/history?status=missed",
             f"/api/history?number_id={user.numbers.first().pk}", "/api/numbers"]  # fmt: skip
    answers = []
    for path in paths:
        response = client.get(path)
        answers.append((path, response.status_code, response.json()))
    return answers


@pytest.mark.django_db
@pytest.mark.parametrize("switch", ["COMPILED_QUERIES", "COMPILED_REPRESENTATION"])
def test_compiled_queries_and_representation_off_answer_as_on(
    settings, monkeypatch, client_jwt, user, switch
):
    numbers = [NumberFactory(owner=user, alias="Office"), NumberFactory(owner=user, alias="Home")]
    now = timezone.now()
    for i in range(5):
        status = "missed" if i % 2 else "answered"
        CallRecordFactory(number=numbers[i % 2], status=status, created_at=now - timedelta(hours=i))

    on = _answers(client_jwt, user)
    setattr(settings, switch, False)
    monkeypatch.setattr(*BYPASSED[switch], _refused)
    off = _answers(client_jwt, user)

    assert off == on
    assert [status for _path, status, _body in on] == [200] * len(on)
    assert len(on[2][2]["history"]) == 5
