import pytest

from tests.factories import NumberFactory


def change(client, number, current, new="5678", **extra):
    return client.put(
        f"/api/numbers/{number.pk}/pin",
        {"currentPin": current, "newPin": new},
        format="json",
        **extra,
    )


@pytest.fixture
def number(user):
    return NumberFactory(owner=user)  # PIN 1234


@pytest.mark.django_db
def test_the_pin_changes_after_the_current_one_is_verified(client_jwt, number):
    response = change(client_jwt, number, "1234", "5678")

    assert response.status_code == 200
    assert response.json() == {"success": True}
    assert change(client_jwt, number, "1234", "0000").status_code == 403  # the old PIN is gone
    assert change(client_jwt, number, "5678", "0000").status_code == 200


@pytest.mark.django_db
def test_a_wrong_current_pin_is_403(client_jwt, number):
    response = change(client_jwt, number, "9999")

    assert response.status_code == 403
    assert response.json() == {"error": "The current PIN is wrong.", "code": "pin_mismatch"}


@pytest.mark.django_db
@pytest.mark.parametrize("new", ["123", "123456789", "12a4", "", 5678])
def test_a_bad_new_pin_is_400_and_the_old_pin_stays(client_jwt, number, new):
    response = change(client_jwt, number, "1234", new)

    assert response.status_code == 400
    assert "newPin" in response.json()["fields"]
    assert change(client_jwt, number, "1234", "5678").status_code == 200


@pytest.mark.django_db
def test_missing_pin_fields_are_400(client_jwt, number):
    response = client_jwt.put(f"/api/numbers/{number.pk}/pin", {}, format="json")

    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"currentPin", "newPin"}


@pytest.mark.django_db
def test_five_wrong_pins_lock_changes_even_with_the_right_pin(client_jwt, number):
    codes = [change(client_jwt, number, f"000{i}").status_code for i in range(4)]
    fifth = change(client_jwt, number, "0004")
    right = change(client_jwt, number, "1234")

    assert codes == [403, 403, 403, 403]
    assert fifth.status_code == 429
    assert fifth.json()["code"] == "pin_locked"
    assert right.status_code == 429
    assert right.json()["code"] == "pin_locked"
    assert 1 <= int(right.headers["Retry-After"]) <= 15 * 60 + 1
    assert (right.headers["X-RateLimit-Limit"], right.headers["X-RateLimit-Remaining"]) == (
        "5",
        "0",
    )


@pytest.mark.django_db
def test_the_lock_holds_across_forged_forwarded_for_and_another_client(user, client_jwt, number):
    from tests.conftest import api_key_client

    for i in range(5):
        change(client_jwt, number, f"000{i}", HTTP_X_FORWARDED_FOR=f"203.0.113.{i}")

    from_elsewhere = change(
        api_key_client(user.api_key), number, "1234", HTTP_X_FORWARDED_FOR="198.51.100.9"
    )

    assert from_elsewhere.status_code == 429
    assert from_elsewhere.json()["code"] == "pin_locked"


@pytest.mark.django_db
def test_the_lock_is_per_number(user, client_jwt, number):
    other = NumberFactory(owner=user)
    for i in range(5):
        change(client_jwt, number, f"000{i}")

    assert change(client_jwt, other, "1234").status_code == 200


@pytest.mark.django_db
def test_the_lock_lifts_when_the_window_has_passed(client_jwt, number, clock):
    for i in range(5):
        change(client_jwt, number, f"000{i}")
    clock.advance(minutes=15, seconds=1)

    assert change(client_jwt, number, "1234").status_code == 200
