import uuid

import pytest
from django.core.management import call_command

from captcha.models import CaptchaChallenge, CaptchaToken

WRONG = {"error": "答案错误", "code": "captcha_wrong_answer"}


def issue(client):
    response = client.get("/api/captcha")
    assert response.status_code == 200
    return response.json()


def verify(client, **body):
    return client.post("/api/captcha/verify", body, format="json")


@pytest.mark.django_db
def test_a_challenge_is_a_simple_addition_with_an_id(api_client):
    body = issue(api_client)

    assert set(body) == {"a", "b", "question", "challengeId"}
    assert 1 <= body["a"] <= 50 and 1 <= body["b"] <= 50
    assert body["question"] == f"{body['a']} + {body['b']} = ?"
    assert CaptchaChallenge.objects.filter(pk=body["challengeId"], used_at=None).exists()


@pytest.mark.django_db
def test_addends_cover_the_range(api_client):
    seen = {issue(api_client)["a"] for _ in range(50)}
    assert len(seen) > 10  # random, not a constant


@pytest.mark.django_db
def test_the_right_answer_gets_a_token_valid_ten_minutes(api_client):
    c = issue(api_client)

    response = verify(api_client, a=c["a"], b=c["b"], answer=c["a"] + c["b"])

    assert response.status_code == 200
    assert set(response.json()) == {"token"}
    token = CaptchaToken.objects.get(pk=uuid.UUID(response.json()["token"]))
    assert (token.expires_at - token.created_at).total_seconds() == 600


@pytest.mark.django_db
def test_the_right_answer_with_the_challenge_id_gets_a_token(api_client):
    c = issue(api_client)

    response = verify(
        api_client, a=c["a"], b=c["b"], answer=c["a"] + c["b"], challengeId=c["challengeId"]
    )

    assert response.status_code == 200


@pytest.mark.django_db
def test_a_wrong_answer_is_refused_with_the_chinese_text_and_spends_the_challenge(api_client):
    c = issue(api_client)

    wrong = verify(api_client, a=c["a"], b=c["b"], answer=c["a"] + c["b"] + 1)
    retry = verify(api_client, a=c["a"], b=c["b"], answer=c["a"] + c["b"])

    assert wrong.status_code == 400
    assert wrong.json() == WRONG
    assert retry.status_code == 400
    assert retry.json()["code"] == "captcha_invalid"
    assert not CaptchaToken.objects.exists()


@pytest.mark.django_db
def test_a_forged_challenge_that_was_never_issued_is_refused(api_client):
    response = verify(api_client, a=0, b=0, answer=0)

    assert response.status_code == 400
    assert response.json()["code"] == "captcha_invalid"
    assert not CaptchaToken.objects.exists()


@pytest.mark.django_db
def test_a_spent_challenge_cannot_be_answered_again(api_client):
    c = issue(api_client)
    assert verify(api_client, a=c["a"], b=c["b"], answer=c["a"] + c["b"]).status_code == 200

    again = verify(api_client, a=c["a"], b=c["b"], answer=c["a"] + c["b"])

    assert again.status_code == 400
    assert again.json()["code"] == "captcha_invalid"


@pytest.mark.django_db
def test_an_expired_challenge_is_refused(api_client, clock):
    c = issue(api_client)
    clock.advance(minutes=5, seconds=1)

    response = verify(api_client, a=c["a"], b=c["b"], answer=c["a"] + c["b"])

    assert response.status_code == 400
    assert response.json()["code"] == "captcha_invalid"


@pytest.mark.django_db
def test_a_challenge_id_with_other_addends_is_refused_and_spent(api_client):
    c = issue(api_client)
    other_a = c["a"] % 50 + 1

    forged = verify(
        api_client, a=other_a, b=c["b"], answer=other_a + c["b"], challengeId=c["challengeId"]
    )
    honest = verify(
        api_client, a=c["a"], b=c["b"], answer=c["a"] + c["b"], challengeId=c["challengeId"]
    )

    assert forged.status_code == honest.status_code == 400
    assert forged.json()["code"] == "captcha_invalid"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body",
    [
        {"a": "1", "b": 2, "answer": 3},
        {"a": 1, "b": 2, "answer": 3.0},
        {"a": 1, "b": 2, "answer": True},
        {"a": 1, "b": 2},
        {"a": 1, "b": 2, "answer": 3, "challengeId": "not-a-uuid"},
    ],
)
def test_malformed_verify_bodies_are_rejected(api_client, body):
    response = api_client.post("/api/captcha/verify", body, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert response.json()["fields"]


@pytest.mark.django_db
def test_verify_is_rate_limited_per_ip_even_with_a_forged_forwarded_for(api_client, settings):
    settings.RATE_LIMIT_CAPTCHA_VERIFY_PER_IP = "3/m"
    for i in range(3):
        verify(api_client, a=0, b=0, answer=0, HTTP_X_FORWARDED_FOR=f"203.0.113.{i}")

    response = api_client.post(
        "/api/captcha/verify",
        {"a": 0, "b": 0, "answer": 0},
        format="json",
        HTTP_X_FORWARDED_FOR="198.51.100.1",
    )

    assert response.status_code == 429
    assert response.json()["code"] == "rate_limited"
    assert int(response.headers["Retry-After"]) >= 1


@pytest.mark.django_db
def test_purge_deletes_only_expired_challenges_and_tokens(api_client, clock, captcha_token):
    old_challenge = issue(api_client)
    old_token = captcha_token()
    clock.advance(minutes=11)
    fresh_challenge = issue(api_client)
    fresh_token = captcha_token()

    call_command("purge_expired", verbosity=0)

    assert not CaptchaChallenge.objects.filter(pk=old_challenge["challengeId"]).exists()
    assert not CaptchaToken.objects.filter(pk=old_token).exists()
    assert CaptchaChallenge.objects.filter(pk=fresh_challenge["challengeId"]).exists()
    assert CaptchaToken.objects.filter(pk=fresh_token).exists()
