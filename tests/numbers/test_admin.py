from tests.factories import InventoryNumberFactory, NumberFactory
from virtual_numbers.models import InventoryNumber, Number, OpeningHours


def test_numbers_are_searchable_by_number_alias_and_owner(staff_client):
    number = NumberFactory(alias="findable", owner__email="owner@example.com")
    NumberFactory(alias="unrelated-line")

    for q in (number.number, "findable", "owner@example"):
        page = staff_client.get("/admin/numbers/number/", {"q": q})
        assert page.status_code == 200
        assert b"findable" in page.content and b"unrelated-line" not in page.content


def test_the_number_page_never_shows_the_pin(staff_client):
    number = NumberFactory()

    page = staff_client.get(f"/admin/numbers/number/{number.pk}/change/")

    assert page.status_code == 200
    assert number.pin_hash.encode() not in page.content
    assert b"pin_hash" not in page.content


def test_the_inventory_filters_free_and_held(staff_client):
    held = NumberFactory().inventory
    free = InventoryNumberFactory(e164="+442079460777")

    free_page = staff_client.get("/admin/numbers/inventorynumber/", {"state": "free"})
    held_page = staff_client.get("/admin/numbers/inventorynumber/", {"state": "held"})

    assert free.e164.encode() in free_page.content and held.e164.encode() not in free_page.content
    assert held.e164.encode() in held_page.content and free.e164.encode() not in held_page.content


def test_releasing_a_number_returns_it_to_the_inventory(staff_client):
    number = NumberFactory()

    staff_client.post(
        "/admin/numbers/number/", {"action": "release", "_selected_action": [str(number.pk)]}
    )

    assert not Number.objects.filter(pk=number.pk).exists()
    assert InventoryNumber.objects.filter(e164=number.number, holding__isnull=True).exists()


def test_the_number_page_shows_its_forwarding_and_staff_turn_it_off(staff_client):
    forwarding = NumberFactory(
        forward_targets=["+447400123456", "+447400123457"],
        forward_ring_seconds=30,
        forward_screening=True,
    )
    plain = NumberFactory()

    page = staff_client.get(f"/admin/numbers/number/{forwarding.pk}/change/")
    response = staff_client.post(
        "/admin/numbers/number/",
        {"action": "forwarding_off", "_selected_action": [str(forwarding.pk), str(plain.pk)]},
        follow=True,
    )

    assert (
        b"To +447400123456, +447400123457, ringing 30 s, screened, showing the original caller"
        in page.content
    )
    assert b"Turned forwarding off for 1 number(s)." in response.content
    forwarding.refresh_from_db()
    assert (forwarding.forward_targets, forwarding.forward_ring_seconds) == ([], 20)
    off_page = staff_client.get(f"/admin/numbers/number/{forwarding.pk}/change/")
    assert b"Off: calls go to voicemail." in off_page.content


def test_the_number_page_shows_its_ring_list(staff_client):
    group = NumberFactory(
        ring_entries=[
            {"sip": "sip:desk@pbx.example.com", "ringSeconds": 10},
            {"phone": "+447400123456"},
        ],
        ring_strategy="in_order",
        forward_ring_seconds=25,
    )

    page = staff_client.get(f"/admin/numbers/number/{group.pk}/change/").content.decode()

    assert "Each entry in turn, for its own seconds." in page
    assert "<li>sip:desk@pbx.example.com, 10 s</li><li>+447400123456, 25 s</li>" in page
    plain = staff_client.get(f"/admin/numbers/number/{NumberFactory().pk}/change/")
    assert "Nobody: calls go to voicemail." in plain.content.decode()


def test_the_number_page_shows_its_opening_hours(staff_client):
    shop = NumberFactory()
    OpeningHours.objects.create(
        number=shop,
        time_zone="Europe/London",
        weekly=[{"days": ["mon", "tue"], "start": "09:00", "end": "17:30"}],
        closed_dates=["2026-12-25"],
        do_not_disturb=True,
        closed_greeting="Closed <for> Christmas.",
        closed_greeting_recording="greetings/closed.wav",
        closed_greeting_recording_seconds=2.5,
    )
    plain = NumberFactory()

    page = staff_client.get(f"/admin/numbers/number/{shop.pk}/change/").content.decode()
    plain_page = staff_client.get(f"/admin/numbers/number/{plain.pk}/change/").content.decode()

    assert "Do not disturb is on. Times in Europe/London; closed now." in page
    assert "<li>mon tue 09:00-17:30</li>" in page
    assert "Closed dates: 2026-12-25." in page
    assert "Closed greeting: Closed &lt;for&gt; Christmas. (a recording by phone, 2.5 s" in page
    assert "None: always open." in plain_page


def test_the_number_page_shows_its_music_on_hold(staff_client):
    uploaded = NumberFactory(hold_music="hold-music/shop.wav", hold_music_seconds=42.5)
    plain = NumberFactory()

    page = staff_client.get(f"/admin/numbers/number/{uploaded.pk}/change/").content.decode()
    plain_page = staff_client.get(f"/admin/numbers/number/{plain.pk}/change/").content.decode()

    assert "The owner&#x27;s, uploaded (42.5 s)." in page
    assert "Relay&#x27;s own." in plain_page
