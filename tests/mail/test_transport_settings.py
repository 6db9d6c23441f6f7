"""EMAIL_URL: each transport it names, and a URL it cannot take refused at start-up in one
line that never repeats the URL (it may hold the SMTP password)."""

import pytest

from harness import live
from relay.settings.mail import email_transport
from tests import settings_env


def test_smtp_is_starttls_on_587_by_default():
    config = email_transport("smtp://mailer:p%40ss@smtp.example.com")
    assert config == {
        "EMAIL_BACKEND": "mail.backends.SmtpBackend",
        "EMAIL_FILE_PATH": None,
        "EMAIL_HOST": "smtp.example.com",
        "EMAIL_PORT": 587,
        "EMAIL_HOST_USER": "mailer",
        "EMAIL_HOST_PASSWORD": "p@ss",
        "EMAIL_USE_SSL": False,
        "EMAIL_USE_TLS": True,
    }


def test_smtp_may_go_without_starttls_to_a_relay_that_has_none():
    config = email_transport("smtp://127.0.0.1:25?starttls=false")
    assert (config["EMAIL_PORT"], config["EMAIL_USE_TLS"], config["EMAIL_USE_SSL"]) == (
        25,
        False,
        False,
    )
    assert config["EMAIL_HOST_USER"] == ""


def test_smtps_is_tls_from_the_first_byte_on_465():
    config = email_transport("smtps://mailer:secret@smtp.example.com")
    assert (config["EMAIL_PORT"], config["EMAIL_USE_SSL"], config["EMAIL_USE_TLS"]) == (
        465,
        True,
        False,
    )


def test_console_and_file_transports():
    assert email_transport("console:")["EMAIL_BACKEND"].endswith("console.EmailBackend")
    config = email_transport("file:///var/spool/relay-mail")
    assert config["EMAIL_BACKEND"].endswith("filebased.EmailBackend")
    assert config["EMAIL_FILE_PATH"] == "/var/spool/relay-mail"


@pytest.mark.parametrize(
    "url",
    [
        "smtp://",
        "smtp://host:587?starttls=maybe",
        "smtp://host?tls=true",
        "imap://host",
        "file:relative/folder",
        "http://host",
        "",
    ],
)
def test_a_url_it_cannot_take_is_refused(url):
    with pytest.raises(ValueError):
        email_transport(url)


def test_a_wrong_email_url_stops_start_up_without_repeating_the_password():
    finished = settings_env.manage("check", EMAIL_URL="smtpx://mailer:hunter2-secret@host")
    live.assert_refused_at_start_up(finished, "EMAIL_URL")
    assert "hunter2-secret" not in finished.stdout + finished.stderr
