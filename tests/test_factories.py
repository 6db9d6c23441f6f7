"""The promises of tests/factories.py that other tests lean on."""

import phonenumbers
import pytest

from tests.conftest import api_key_client
from tests.factories import (
    BlockedCallerFactory,
    CallFactory,
    InventoryNumberFactory,
    inventory_e164,
)

DISTINCT = 10_000_000


def test_factory_numbers_start_past_the_numbers_tests_write_themselves():
    assert inventory_e164(0) == "+442079500000"
    assert inventory_e164(539) == "+442079500539"
    assert inventory_e164(39_999) == "+442079539999"
    # The inventory tests provision (+44 20 7946 0000 on) is reached only after ten million.
    assert "+442079460000" not in {inventory_e164(n) for n in range(400_000)}


def test_numbers_from_the_40001st_on_do_not_collide_with_earlier_ones():
    # Built with explicit sequence values: no 40,000 rows. The 40,001st is sequence 40,000.
    sequences = [0, 1, 39_999, 40_000, 40_001, 40_009, 40_010, 539_999, 540_000, DISTINCT - 1]
    built = [InventoryNumberFactory.build(__sequence=n).e164 for n in sequences]
    assert built == [inventory_e164(n) for n in sequences]
    assert len(set(built)) == len(sequences)

    first = {inventory_e164(n) for n in range(40_000)}
    later = {inventory_e164(n) for n in range(40_000, 200_000)}
    assert len(first) == 40_000
    assert len(later) == 160_000
    assert not first & later


def test_numbers_stay_distinct_and_valid_across_ten_million_sequences():
    # Around the wrap from +44 20 7999 9999 to +44 20 7000 0000, and a sample of the rest.
    wrap = range(499_000, 501_000)
    sample = [*range(0, DISTINCT, 9_973), *wrap, *range(DISTINCT - 1_000, DISTINCT)]
    numbers = [inventory_e164(n) for n in sample]

    assert len(set(numbers)) == len(set(sample))
    for number in numbers[::10]:
        assert phonenumbers.is_valid_number(phonenumbers.parse(number)), number
        assert len(number) == 13


def test_sequences_past_the_distinct_ones_fail_instead_of_colliding():
    with pytest.raises(ValueError, match="no distinct factory number"):
        inventory_e164(DISTINCT)


@pytest.mark.django_db
def test_a_factory_call_request_is_a_queued_call_its_owner_can_read():
    call = CallFactory()

    response = api_key_client(call.owner.api_key).get(f"/api/calls/{call.call_id}")

    assert response.status_code == 200
    assert response.json()["status"] == "queued"


@pytest.mark.django_db
def test_a_factory_blocked_caller_is_on_its_numbers_blocklist():
    blocked = BlockedCallerFactory()

    client = api_key_client(blocked.number.owner.api_key)
    response = client.get(f"/api/numbers/{blocked.number.pk}/blocked")

    assert [e["caller_num"] for e in response.json()["blocked"]] == [blocked.caller_num]
