"""Mailed links lead only where people reach Relay (issue 53): Relay's own settings serve no
`testserver` (the test client's host is the test settings' alone), and outside DEBUG the
servers do not start without PUBLIC_URL, while operator commands need none of it."""

import relay.settings
from harness.live import assert_refused_at_start_up, child_environ, run_python
from tests import settings_env


def test_relays_own_settings_refuse_the_test_clients_host(client, settings):
    settings.ALLOWED_HOSTS = relay.settings.ALLOWED_HOSTS  # what a deployment gets by default

    response = client.get("/api/auth/password-reset")  # Django's test client: Host testserver

    assert "testserver" not in relay.settings.ALLOWED_HOSTS
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert client.get("/healthz", HTTP_HOST="127.0.0.1").status_code != 400


def test_runrelay_without_public_url_outside_debug_stops_at_start_up(tmp_path):
    result = settings_env.manage("runrelay", "--port", "1", RELAY_VAR_DIR=str(tmp_path))

    assert_refused_at_start_up(result, "PUBLIC_URL")
    assert "make run" in result.stderr


def test_gunicorn_and_daphne_without_public_url_stop_at_start_up(tmp_path):
    env = child_environ(**settings_env.BASE, RELAY_VAR_DIR=str(tmp_path))
    servers = {
        "gunicorn": ["-m", "gunicorn", "-c", "python:relay.gunicorn_conf", "-b", "127.0.0.1:1"],
        "daphne": ["-m", "relay.platform.daphne_server", "-b", "127.0.0.1", "-p", "1", "-v", "0"],
    }
    for name, argv in servers.items():
        app = "relay.wsgi:application" if name == "gunicorn" else "relay.asgi:application"
        result = run_python(*argv, app, env=env)

        last = result.stderr.strip().splitlines()[-1]
        assert result.returncode != 0, name
        assert last.startswith("Relay cannot start: PUBLIC_URL is not set."), result.stderr


def test_an_operator_command_runs_without_public_url(tmp_path):
    result = settings_env.manage("check", RELAY_VAR_DIR=str(tmp_path))

    assert result.returncode == 0, result.stderr
