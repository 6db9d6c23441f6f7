import pytest

from captcha.models import CaptchaToken
from tests.factories import NumberFactory
from virtual_numbers.models import InventoryNumber, Number


def create(client, token, alias="office", pin="1234"):
    return client.post(
        "/api/numbers", {"alias": alias, "pin": pin, "captchaToken": token}, format="json"
    )


@pytest.mark.django_db
def test_creating_a_number_assigns_a_free_inventory_number(
    user, client_jwt, inventory, captcha_token
):
    response = create(client_jwt, captcha_token(), alias="  Office line  ")

    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"id", "number", "alias", "created_at", "greeting"}
    assert body["alias"] == "Office line"
    assert body["number"].startswith("+44207946")
    assert isinstance(body["created_at"], int)
    number = Number.objects.get(pk=body["id"])
    assert number.owner == user
    assert number.inventory.e164 == body["number"]


@pytest.mark.django_db
def test_a_captcha_token_creates_one_number_only(client_jwt, inventory, captcha_token):
    token = captcha_token()
    assert create(client_jwt, token).status_code == 201

    again = create(client_jwt, token)

    assert again.status_code == 400
    assert again.json()["code"] == "captcha_invalid"
    assert Number.objects.count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("token", ["", "not-a-uuid", "00000000-0000-0000-0000-000000000000"])
def test_an_invalid_captcha_token_is_refused(client_jwt, inventory, token):
    response = create(client_jwt, token)

    assert response.status_code == 400
    assert response.json()["code"] in {"captcha_invalid", "invalid_request"}
    assert not Number.objects.exists()


@pytest.mark.django_db
def test_a_token_older_than_ten_minutes_is_refused(client_jwt, inventory, captcha_token, clock):
    token = captcha_token()
    clock.advance(minutes=10, seconds=1)

    response = create(client_jwt, token)

    assert response.status_code == 400
    assert response.json()["code"] == "captcha_invalid"
    assert not Number.objects.exists()


@pytest.mark.django_db
def test_the_sixth_number_is_refused_and_the_token_is_kept(
    user, client_jwt, inventory, captcha_token
):
    for i in range(5):
        assert create(client_jwt, captcha_token(), alias=f"n{i}").status_code == 201
    token = captcha_token()

    sixth = create(client_jwt, token)

    assert sixth.status_code == 409
    assert sixth.json()["code"] == "number_limit_reached"
    assert Number.objects.filter(owner=user).count() == 5
    # The failed creation did not spend the token: after a delete it still works.
    client_jwt.delete(f"/api/numbers/{Number.objects.filter(owner=user).first().pk}")
    assert create(client_jwt, token).status_code == 201


@pytest.mark.django_db
@pytest.mark.parametrize("token", ["made-up", "00000000-0000-0000-0000-000000000000"])
def test_at_the_limit_a_made_up_token_is_captcha_invalid_not_the_limit(
    user, client_jwt, inventory, captcha_token, token
):
    for i in range(5):
        assert create(client_jwt, captcha_token(), alias=f"n{i}").status_code == 201

    response = create(client_jwt, token)

    assert response.status_code == 400
    assert response.json()["code"] == "captcha_invalid"
    assert Number.objects.filter(owner=user).count() == 5


@pytest.mark.django_db
def test_at_the_limit_a_spent_token_is_captcha_invalid_and_a_valid_one_is_kept(
    user, client_jwt, inventory, captcha_token
):
    spent = captcha_token()
    for i in range(5):
        token = spent if i == 0 else captcha_token()
        assert create(client_jwt, token, alias=f"n{i}").status_code == 201
    kept = captcha_token()

    assert create(client_jwt, spent).json()["code"] == "captcha_invalid"
    assert create(client_jwt, kept).json()["code"] == "number_limit_reached"
    assert CaptchaToken.objects.get(pk=kept).used_at is None


@pytest.mark.django_db
def test_an_empty_inventory_is_503(client_jwt, captcha_token):
    response = create(client_jwt, captcha_token())

    assert response.status_code == 503
    assert response.json()["code"] == "no_numbers_available"


BAD_PINS = ["123", "123456789", "12a4", "", " 1234", "١٢٣٤", "1234\n", 1234, None]
BAD_ALIASES = ["", "   ", "x" * 65, "bad\nalias", "nul\x00", 42]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("field", "value"),
    [("pin", pin) for pin in BAD_PINS] + [("alias", alias) for alias in BAD_ALIASES],
)
def test_a_bad_pin_or_alias_is_refused(client_jwt, inventory, captcha_token, field, value):
    response = create(client_jwt, captcha_token(), **{field: value})

    assert response.status_code == 400
    assert field in response.json()["fields"]
    assert not Number.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("pin", ["1234", "12345678", "0000"])
def test_four_to_eight_digit_pins_are_accepted(client_jwt, inventory, captcha_token, pin):
    assert create(client_jwt, captcha_token(), pin=pin).status_code == 201


@pytest.mark.django_db
@pytest.mark.parametrize("alias", ["x" * 65, "x" * 5000, "  " + "x" * 65])
def test_an_alias_too_long_gets_the_one_length_rule(client_jwt, inventory, captcha_token, alias):
    response = create(client_jwt, captcha_token(), alias=alias)

    assert response.status_code == 400
    assert response.json()["fields"] == {"alias": ["Must be 1 to 64 characters after trimming."]}


@pytest.mark.django_db
def test_a_64_character_alias_is_accepted(client_jwt, inventory, captcha_token):
    response = create(client_jwt, captcha_token(), alias=" " + "é" * 64 + " ")

    assert response.status_code == 201
    assert response.json()["alias"] == "é" * 64


@pytest.mark.django_db
def test_the_list_shows_my_numbers_oldest_first(user, client_jwt, other_user):
    mine = [NumberFactory(owner=user) for _ in range(3)]
    NumberFactory(owner=other_user)

    response = client_jwt.get("/api/numbers")

    assert response.status_code == 200
    assert set(response.json()) == {"numbers"}
    listed = response.json()["numbers"]
    assert [n["id"] for n in listed] == [
        str(n.pk) for n in sorted(mine, key=lambda n: n.created_at)
    ]
    assert set(listed[0]) == {"id", "number", "alias", "created_at", "greeting"}


@pytest.mark.django_db
def test_numbers_work_with_an_api_key(client_key, inventory, captcha_token):
    assert create(client_key, captcha_token()).status_code == 201
    assert len(client_key.get("/api/numbers").json()["numbers"]) == 1


@pytest.mark.django_db
def test_numbers_need_authentication(api_client, inventory, captcha_token):
    assert api_client.get("/api/numbers").status_code == 401
    assert create(api_client, captcha_token()).status_code == 401


@pytest.mark.django_db
def test_changing_the_alias_returns_the_updated_number(user, client_jwt):
    number = NumberFactory(owner=user)

    response = client_jwt.put(f"/api/numbers/{number.pk}/alias", {"alias": " Home "}, format="json")

    assert response.status_code == 200
    assert response.json() == {
        "id": str(number.pk),
        "number": number.number,
        "alias": "Home",
        "created_at": int(number.created_at.timestamp() * 1000),
        "greeting": "",
    }


@pytest.mark.django_db
@pytest.mark.parametrize("alias", ["", "x" * 65, None])
def test_a_bad_new_alias_changes_nothing(user, client_jwt, alias):
    number = NumberFactory(owner=user, alias="keep")

    response = client_jwt.put(f"/api/numbers/{number.pk}/alias", {"alias": alias}, format="json")

    assert response.status_code == 400
    number.refresh_from_db()
    assert number.alias == "keep"


@pytest.mark.django_db
def test_deleting_a_number_frees_its_inventory_entry(user, client_jwt):
    number = NumberFactory(owner=user)
    entry = number.inventory

    response = client_jwt.delete(f"/api/numbers/{number.pk}")

    assert response.status_code == 200
    assert response.json() == {"success": True}
    assert not Number.objects.filter(pk=number.pk).exists()
    assert InventoryNumber.objects.filter(pk=entry.pk, holding__isnull=True).exists()
    assert client_jwt.get("/api/numbers").json()["numbers"] == []


@pytest.mark.django_db
def test_an_outsider_gets_404_on_every_number_route_and_changes_nothing(outsider, user):
    number = NumberFactory(owner=user, alias="private")
    pin_hash = number.pin_hash
    base = f"/api/numbers/{number.pk}"

    responses = [
        outsider.put(f"{base}/alias", {"alias": "stolen"}, format="json"),
        outsider.put(f"{base}/pin", {"currentPin": "1234", "newPin": "9999"}, format="json"),
        outsider.delete(base),
    ]

    for response in responses:
        assert response.status_code == 404
        assert response.json() == {"error": "Not found.", "code": "not_found"}
    number.refresh_from_db()
    assert (number.alias, number.pin_hash) == ("private", pin_hash)
    assert number.owner == user


@pytest.mark.django_db
@pytest.mark.parametrize("number_id", ["not-a-uuid", "00000000-0000-0000-0000-000000000000", "1"])
def test_unknown_or_malformed_ids_are_404(client_jwt, number_id):
    for response in (
        client_jwt.put(f"/api/numbers/{number_id}/alias", {"alias": "x"}, format="json"),
        client_jwt.put(
            f"/api/numbers/{number_id}/pin", {"currentPin": "1234", "newPin": "5678"}, format="json"
        ),
        client_jwt.delete(f"/api/numbers/{number_id}"),
    ):
        assert response.status_code == 404
        assert response.json()["code"] == "not_found"


@pytest.mark.django_db
def test_no_response_ever_contains_the_pin_or_its_hash(user, client_jwt, inventory, captcha_token):
    pin = "97531"
    bodies = [create(client_jwt, captcha_token(), pin=pin).content]
    number = Number.objects.get(owner=user)
    bodies.append(client_jwt.get("/api/numbers").content)
    bodies.append(
        client_jwt.put(f"/api/numbers/{number.pk}/alias", {"alias": "a"}, format="json").content
    )
    bodies.append(
        client_jwt.put(
            f"/api/numbers/{number.pk}/pin", {"currentPin": pin, "newPin": "86420"}, format="json"
        ).content
    )
    bodies.append(
        client_jwt.put(
            f"/api/numbers/{number.pk}/pin", {"currentPin": pin, "newPin": "11111"}, format="json"
        ).content
    )
    number.refresh_from_db()

    for body in bodies:
        for secret in (pin, "86420", number.pin_hash, number.pin_hash.split("$")[-1]):
            assert secret.encode() not in body
