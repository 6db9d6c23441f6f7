import pytest
from django.core.management import CommandError, call_command

from core.errors import InvalidRequest
from history.services import record_inbound_call
from tests.factories import BlockedCallerFactory, NumberFactory
from tests.records import record_get, records_count, records_where
from virtual_numbers.services import inventory_provision, number_grant


@pytest.fixture
def number(user):
    return NumberFactory(owner=user, inventory__e164="+442079460001")


@pytest.mark.django_db
def test_record_call_command_records_a_call(number, capsys):
    argv = "--number +442079460001 --caller +447700900123 --status answered --duration 45"
    call_command("record_call", *argv.split(), "--at", "1795320000000")

    record = record_get()
    assert (record.number, record.owner_id, record.caller_num, record.status, record.duration) == (
        number,
        number.owner_id,
        "+447700900123",
        "answered",
        45,
    )
    assert int(record.created_at.timestamp() * 1000) == 1795320000000
    assert "Recorded answered call" in capsys.readouterr().out


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--number", "+442079460999", "--caller", "+447700900123", "--status", "answered"],
            "holds",
        ),
        (["--number", "nonsense", "--caller", "+447700900123", "--status", "answered"], "holds"),
        (
            ["--number", "+442079460001", "--caller", "+447700900123", "--status", "rejected"],
            "status",
        ),
        (["--number", "+442079460001", "--caller", "07700900123", "--status", "missed"], "E.164"),
        (["--number", "+442079460001", "--caller", "+44", "--status", "missed"], "E.164"),
        (
            ["--number", "+442079460001", "--caller", "+44 7700 900abc", "--status", "missed"],
            "E.164",
        ),
        (
            [
                "--number",
                "+442079460001",
                "--caller",
                "+447700900123",
                "--status",
                "answered",
                "--duration",
                "-5",
            ],
            "duration",
        ),
    ],
)
def test_record_call_command_fails_clearly_on_bad_input(number, argv, message):
    with pytest.raises(CommandError, match=message):
        call_command("record_call", *argv)
    assert not records_count() > 0


@pytest.mark.django_db
def test_a_bad_at_timestamp_fails_clearly(number):
    with pytest.raises(CommandError, match="--at"):
        argv = "--number +442079460001 --caller +447700900123 --status missed"
        call_command("record_call", *argv.split(), "--at", str(10**20))


def test_record_call_exits_non_zero_from_the_shell(db):
    import subprocess
    import sys

    from django.conf import settings

    result = subprocess.run(  # noqa: S603
        [
            sys.executable,
            "manage.py",
            "record_call",
            "--number",
            "+442079460999",
            "--caller",
            "+447700900123",
            "--status",
            "answered",
        ],
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        check=False,
        env={**__import__("os").environ, "DATABASE_URL": "sqlite:///:memory:"},
    )
    assert result.returncode != 0
    assert "CommandError" in result.stderr or "Error" in result.stderr


@pytest.mark.django_db
def test_a_blocked_caller_is_recorded_as_blocked_with_no_duration(number):
    BlockedCallerFactory(number=number, caller_num="+447700900666")

    record = record_inbound_call(
        number=number, caller_num="+447700900666", status="answered", duration=120
    )
    other = record_inbound_call(
        number=number, caller_num="+447700900123", status="answered", duration=120
    )

    assert (record.status, record.duration) == ("blocked", 0)
    assert (other.status, other.duration) == ("answered", 120)


@pytest.mark.django_db
def test_who_answered_is_recorded_and_listed(number, client_jwt):
    forwarded = record_inbound_call(
        number=number,
        caller_num="+447700900123",
        status="answered",
        duration=30,
        answered_by="forward",
        forwarded_to="+447400123456",
    )
    voicemail = record_inbound_call(
        number=number,
        caller_num="+447700900124",
        status="answered",
        duration=12,
        answered_by="voicemail",
    )

    listed = {r["id"]: r for r in client_jwt.get("/api/history").json()["history"]}

    assert (
        listed[str(forwarded.pk)]["answered_by"],
        listed[str(forwarded.pk)]["forwarded_to"],
    ) == (
        "forward",
        "+447400123456",
    )
    assert (
        listed[str(voicemail.pk)]["answered_by"],
        listed[str(voicemail.pk)]["forwarded_to"],
    ) == (
        "voicemail",
        None,
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("status", "answered_by", "forwarded_to"),
    [
        ("missed", "voicemail", None),
        ("blocked", "forward", "+447400123456"),
        ("answered", "machine", None),
        ("answered", "voicemail", "+447400123456"),
        ("answered", None, "+447400123456"),
        ("answered", "forward", "07400123456"),
    ],
)
def test_who_answered_must_fit_the_status(number, status, answered_by, forwarded_to):
    with pytest.raises(InvalidRequest):
        record_inbound_call(
            number=number,
            caller_num="+447700900123",
            status=status,
            duration=0,
            answered_by=answered_by,
            forwarded_to=forwarded_to,
        )
    assert not records_count() > 0


@pytest.mark.django_db
def test_a_blocked_caller_is_never_recorded_as_forwarded(number):
    BlockedCallerFactory(number=number, caller_num="+447700900666")

    record = record_inbound_call(
        number=number,
        caller_num="+447700900666",
        status="answered",
        duration=30,
        answered_by="forward",
        forwarded_to="+447400123456",
    )

    assert (record.status, record.answered_by, record.forwarded_to) == ("blocked", None, None)


@pytest.mark.django_db
@pytest.mark.parametrize("duration", [-1, 1.5, "45", True, 10**9])
def test_record_inbound_call_refuses_bad_durations(number, duration):
    with pytest.raises(InvalidRequest):
        record_inbound_call(
            number=number, caller_num="+447700900123", status="missed", duration=duration
        )


@pytest.mark.django_db
def test_seed_demo_creates_a_demo_once(capsys):
    call_command("seed_demo")
    first = capsys.readouterr().out
    counts = (records_count(), NumberFactory._meta.model.objects.count())

    call_command("seed_demo")

    assert "demo@relay.example" in first and "relay-demo-password" in first
    assert 200 <= counts[0] <= 1000 and counts[1] == 3
    assert (records_count(), NumberFactory._meta.model.objects.count()) == counts
    again = capsys.readouterr().out
    assert "exists already" in again
    # Both runs print the demo numbers, which are the fixed ones the README names.
    for e164 in ("+442079460001", "+442079460002", "+442079460003"):
        assert e164 in first and e164 in again


@pytest.mark.django_db
def test_seed_demo_takes_random_numbers_when_its_own_are_held(user, capsys):
    inventory_provision(start="+442079460000", count=10)
    taken = number_grant(user=user, alias="Mine", pin="1234", preferred="+442079460001")

    call_command("seed_demo")

    demo_numbers = set(
        NumberFactory._meta.model.objects.exclude(owner=user).values_list("number", flat=True)
    )
    assert taken.number == "+442079460001" and taken.number not in demo_numbers
    assert len(demo_numbers) == 3 and {"+442079460002", "+442079460003"} < demo_numbers


@pytest.mark.django_db
def test_seed_history_bulk_loads_records(user, capsys):
    call_command("seed_history", "--email", user.email, "--count", "1200")

    assert records_count(owner=user) == 1200
    assert {record.status for record in records_where(owner=user)} <= {
        "answered",
        "missed",
        "blocked",
    }
    assert "Loaded 1200 records" in capsys.readouterr().out


@pytest.mark.django_db
def test_seed_history_refuses_an_unknown_user():
    with pytest.raises(CommandError, match="No user"):
        call_command("seed_history", "--email", "ghost@example.com", "--count", "10")
