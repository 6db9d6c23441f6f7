"""The typed readers of relay/settings/readers.py: each takes what it documents, and refuses
anything else with one line that names the variable."""

import math

import pytest
from django.core.exceptions import ImproperlyConfigured

from harness import live
from relay.settings import readers
from tests import settings_env

NAME = "RELAY_READER_TEST"


@pytest.fixture
def given(monkeypatch):
    """Set the test's variable to a value (None: unset)."""

    def give(value: str | None) -> None:
        if value is None:
            monkeypatch.delenv(NAME, raising=False)
        else:
            monkeypatch.setenv(NAME, value)

    return give


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, 7), ("12", 12), (" 3 ", 3)],
)
def test_whole_number_takes_digits_within_bounds(given, value, expected):
    given(value)

    assert readers.whole_number(NAME, 7, maximum=20) == expected


@pytest.mark.parametrize("value", ["0", "21", "-1", "1.5", "1e3", "19MiB", "", "٣"])
def test_whole_number_refuses_anything_else(given, value):
    given(value)

    with pytest.raises(ImproperlyConfigured, match=f"^{NAME} must be a whole number from 1 to 20"):
        readers.whole_number(NAME, 7, maximum=20)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, None), ("Unlimited", None), ("4", 4)],
)
def test_a_quota_may_be_unlimited(given, value, expected):
    given(value)

    assert readers.whole_number(NAME, None, minimum=0, maximum=9, or_unlimited=True) == expected


@pytest.mark.parametrize(("value", "expected"), [(None, 0.5), ("2", 2.0), ("0.25", 0.25)])
def test_seconds_take_decimals(given, value, expected):
    given(value)

    assert readers.seconds(NAME, 0.5, above=True) == expected


@pytest.mark.parametrize("value", ["0", "-1", "soon", "30s", "nan", "inf", "1,5"])
def test_seconds_refuse_anything_else(given, value):
    given(value)

    with pytest.raises(ImproperlyConfigured, match=f"^{NAME} must be seconds more than 0"):
        readers.seconds(NAME, 0.5, above=True)


def test_a_bounded_number_says_its_bounds(given):
    given("31")

    with pytest.raises(ImproperlyConfigured, match="must be seconds from 0 to 30, not '31'"):
        readers.seconds(NAME, 2.0, maximum=30)
    assert readers.number(NAME, 1.0, maximum=math.inf) == 31.0


@pytest.mark.parametrize(
    ("value", "expected"), [(None, False), ("true", True), (" ON ", True), ("0", False)]
)
def test_boolean_takes_true_and_false_words(given, value, expected):
    given(value)

    assert readers.boolean(NAME, False) is expected


@pytest.mark.parametrize("value", ["ture", "", "2", "enabled"])
def test_boolean_refuses_any_other_word(given, value):
    given(value)

    with pytest.raises(ImproperlyConfigured, match=f"^{NAME} must be true or false"):
        readers.boolean(NAME, False)


def test_choice_lists_the_choices(given):
    given("xml")

    with pytest.raises(ImproperlyConfigured, match="must be plain or json, not 'xml'"):
        readers.choice(NAME, "plain", ("plain", "json"))
    given("JSON")
    assert readers.choice(NAME, "plain", ("plain", "json"), lower=True) == "json"


@pytest.mark.parametrize("value", ["30/m", "1/s", "500/h"])
def test_rate_takes_a_count_per_second_minute_or_hour(given, value):
    given(value)

    assert readers.rate(NAME, "10/h") == value


@pytest.mark.parametrize("value", ["0/m", "30/min", "30", "m/30", "thirty/m"])
def test_rate_refuses_anything_else(given, value):
    given(value)

    with pytest.raises(ImproperlyConfigured, match=f"^{NAME} must be a rate like 30/m"):
        readers.rate(NAME, "10/h")


def test_url_needs_its_scheme_and_a_host(given):
    given("matrix.example.com")

    with pytest.raises(ImproperlyConfigured, match="must be an http or https URL"):
        readers.url(NAME, schemes=("http", "https"))
    given("https://matrix.example.com")
    assert readers.url(NAME, schemes=("http", "https")) == "https://matrix.example.com"


def test_each_parsed_names_the_item_it_refuses(given):
    given("1,2,x,4")

    with pytest.raises(ImproperlyConfigured, match=f"^{NAME} must list digits, not 'x'$"):
        readers.each_parsed(NAME, int, expected="digits")


def test_a_json_object_never_repeats_its_text(given):
    given('["secret-access-key"]')

    with pytest.raises(ImproperlyConfigured) as refused:
        readers.json_object(NAME, {})
    assert "secret-access-key" not in str(refused.value)


def test_every_reader_records_the_name_it_read(given):
    readers.READ.discard(NAME)
    given(None)

    readers.text(NAME, "default")

    assert NAME in readers.READ


@pytest.mark.parametrize(
    ("name", "value"),
    [
        # Read with env.int/env.float before the readers: a traceback, not a line.
        ("SQLITE_BUSY_TIMEOUT", "abc"),
        ("JWT_ACCESS_TTL", "1d"),
        ("SIP_AGENTS", "two"),
        ("SIP_RING_TIMEOUT", "soon"),
        # Not checked at start-up before: the first request or process failed instead.
        ("RATE_LIMIT_AUTH_PER_IP", "30/min"),
        ("LOG_LEVEL", "debug"),
        ("WS_PORT", "99999"),
    ],
)
def test_a_wrong_number_rate_or_level_stops_start_up_with_one_line(name, value):
    live.assert_refused_at_start_up(settings_env.manage("check", **{name: value}), name)


def test_a_whisper_model_directory_for_another_engine_stops_start_up():
    """TRANSCRIBE_MODEL_DIR is a Whisper model: beside another engine it would do nothing,
    silently (issue 56)."""
    result = settings_env.manage(
        "check", TRANSCRIBE_ENGINE="pocketsphinx", TRANSCRIBE_MODEL_DIR="/srv/models/base.en"
    )
    live.assert_refused_at_start_up(result, "TRANSCRIBE_MODEL_DIR")
    assert "TRANSCRIBE_ENGINE=whisper" in result.stderr
