"""Truly concurrent requests against a live threaded server: the limits hold, nothing 500s.

Each test releases its requests together from a barrier; the database (row lock on the user,
conditional UPDATE on the token, unique inventory holder) must decide, not timing luck.
"""

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from accounts import services as accounts
from captcha.models import CaptchaToken
from harness.live import http
from tests.factories import NumberFactory, NumberMemberFactory, UserFactory
from virtual_numbers.models import InventoryNumber, Number, NumberMember
from virtual_numbers.services import inventory_provision

pytestmark = pytest.mark.django_db(transaction=True)


def post_json(url: str, body: dict, token: str) -> int:
    return http("POST", url, body, token, timeout=60)[0]


def race(calls) -> list[int]:
    """Run the callables at once, released together by a barrier; their status codes."""
    barrier = threading.Barrier(len(calls))

    def run(call):
        barrier.wait(timeout=30)
        return call()

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(run, calls))


def user_holding(count: int):
    """A user holding `count` numbers of a fresh inventory, and their JWT."""
    inventory_provision(start="+442079460000", count=100)
    user = UserFactory()
    for _ in range(count):
        NumberFactory(
            owner=user, inventory=InventoryNumber.objects.filter(holding__isnull=True).first()
        )
    return user, accounts.session_open(user=user).token


def test_twenty_parallel_creations_at_four_numbers_give_exactly_one(live_server, captcha_token):
    user, jwt = user_holding(4)
    tokens = [captcha_token() for _ in range(20)]
    url = f"{live_server.url}/api/numbers"

    codes = race(
        [
            lambda t=t: post_json(url, {"alias": "race", "pin": "1234", "captchaToken": t}, jwt)
            for t in tokens
        ]
    )

    assert sorted(codes) == [201] + [409] * 19
    assert Number.objects.filter(owner=user).count() == 5


def test_at_the_limit_parallel_made_up_tokens_are_invalid_and_valid_ones_stay_unspent(
    live_server, captcha_token
):
    user, jwt = user_holding(5)
    valid = [captcha_token() for _ in range(5)]
    made_up = [str(uuid.uuid4()) for _ in range(5)]
    url = f"{live_server.url}/api/numbers"

    codes = race(
        [
            lambda t=t: post_json(url, {"alias": "race", "pin": "1234", "captchaToken": t}, jwt)
            for t in valid + made_up
        ]
    )

    assert codes == [409] * 5 + [400] * 5
    assert Number.objects.filter(owner=user).count() == 5
    assert CaptchaToken.objects.filter(pk__in=valid, used_at__isnull=True).count() == 5


def test_ten_parallel_creations_sharing_one_token_give_exactly_one(live_server, captcha_token):
    inventory_provision(start="+442079460000", count=100)
    user = UserFactory()
    jwt = accounts.session_open(user=user).token
    token = captcha_token()
    url = f"{live_server.url}/api/numbers"

    codes = race(
        [lambda: post_json(url, {"alias": "race", "pin": "1234", "captchaToken": token}, jwt)] * 10
    )

    assert sorted(codes) == [201] + [400] * 9
    assert Number.objects.count() == 1


def test_two_users_racing_for_the_last_free_number(live_server, captcha_token):
    inventory_provision(start="+442079460000", count=1)
    users = [UserFactory(), UserFactory()]
    jwts = [accounts.session_open(user=u).token for u in users]
    tokens = [captcha_token(), captcha_token()]
    url = f"{live_server.url}/api/numbers"

    codes = race(
        [
            lambda i=i: post_json(
                url, {"alias": "last", "pin": "1234", "captchaToken": tokens[i]}, jwts[i]
            )
            for i in range(2)
        ]
    )

    assert sorted(codes) == [201, 503]
    assert Number.objects.count() == 1


def test_parallel_invitations_at_nineteen_members_give_exactly_one(live_server, settings):
    # issue 57: the 20 a number may have are counted under the number's row lock
    settings.RATE_LIMIT_INVITATIONS_PER_USER = "100/h"
    number = NumberFactory()
    NumberMemberFactory.create_batch(19, number=number)
    jwt = accounts.session_open(user=number.owner).token
    url = f"{live_server.url}/api/numbers/{number.pk}/members"

    codes = race(
        [
            lambda n=n: post_json(url, {"email": f"racer{n}@example.com", "role": "member"}, jwt)
            for n in range(8)
        ]
    )

    assert sorted(codes) == [201] + [400] * 7
    assert NumberMember.objects.filter(number=number).count() == 20


def test_parallel_invitations_of_one_address_give_exactly_one(live_server):
    number = NumberFactory()
    jwt = accounts.session_open(user=number.owner).token
    url = f"{live_server.url}/api/numbers/{number.pk}/members"

    codes = race(
        [
            lambda: post_json(url, {"email": "same@example.com", "role": "member"}, jwt)
            for _ in range(6)
        ]
    )

    assert sorted(codes) == [201] + [400] * 5
    assert NumberMember.objects.filter(number=number).count() == 1
