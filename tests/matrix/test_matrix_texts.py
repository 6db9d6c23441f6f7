"""What the bot says of an outbound call that ended, with who answered it (issue 56)."""

from __future__ import annotations

import pytest

from matrix import texts


@pytest.mark.parametrize(
    ("answered_by", "says"),
    [
        ("", "Your call to +442079460123 completed, 12 s."),
        ("human", "Your call to +442079460123 completed, answered by a person, 12 s."),
        (
            "machine",
            "Your call to +442079460123 completed, answered by an answering machine, 12 s.",
        ),
        ("unknown", "Your call to +442079460123 completed, answered by no telling who, 12 s."),
    ],
)
def test_an_ended_call_says_who_answered_when_detection_was_asked_for(answered_by, says):
    text = texts.outbound_call(
        to="+442079460123", status="completed", duration=12, answered_by=answered_by
    )

    assert text.body == says


def test_a_fax_hung_up_on_says_so():
    text = texts.outbound_call(
        to="+442079460123", status="completed", duration=2, reason="fax", answered_by="fax"
    )

    assert text.body == "Your call to +442079460123 completed, answered by a fax, 2 s."
