"""Who answered, in Relay's words and Twilio's (voiceapps.answered_by, issue 56): a hook of a
call with machine detection gets both, and either reads back as Relay's."""

from __future__ import annotations

import pytest

from voiceapps.answered_by import FROM_TWILIO, answered_by_of, twilio_answered_by


@pytest.mark.parametrize(
    ("answered_by", "message_end", "twilio"),
    [
        ("human", "", "human"),
        ("machine", "", "machine_start"),
        ("machine", "beep", "machine_end_beep"),
        ("machine", "silence", "machine_end_silence"),
        ("machine", "cap", "machine_end_other"),
        ("fax", "", "fax"),
        ("unknown", "", "unknown"),
        ("something new", "", "unknown"),
    ],
)
def test_relays_answer_in_twilios_words(answered_by, message_end, twilio):
    assert twilio_answered_by(answered_by, message_end=message_end) == twilio


def test_every_name_twilio_sends_reads_back_as_one_of_relays():
    names = [
        "human",
        "machine_start",
        "machine_end_beep",
        "machine_end_silence",
        "machine_end_other",
        "fax",
        "unknown",
    ]

    assert sorted(FROM_TWILIO) == sorted(names)
    assert {answered_by_of(name) for name in names} == {"human", "machine", "fax", "unknown"}
    assert answered_by_of("machine_end_beep") == "machine"
    assert answered_by_of("nonsense") == "unknown"
    for name in ("human", "machine", "fax", "unknown"):
        assert answered_by_of(twilio_answered_by(name)) == name
