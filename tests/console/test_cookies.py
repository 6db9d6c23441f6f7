"""Under the production settings docs/operations.md documents, the console's cookies are
`Secure` and `SameSite=Lax`, and the session cookie is out of scripts' reach."""

import json

import pytest

from harness.live import child_environ, run_python
from tests.security.test_owasp import production_environment_from_the_docs

COOKIE_SETTINGS = (
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SESSION_COOKIE_SAMESITE",
    "CSRF_COOKIE_SAMESITE",
    "SESSION_COOKIE_HTTPONLY",
)
PRINT_COOKIE_SETTINGS = (
    "import json, django; from django.conf import settings; django.setup(); "
    f"print(json.dumps({{n: getattr(settings, n) for n in {COOKIE_SETTINGS!r}}}))"
)


@pytest.fixture(scope="module")
def production_cookie_settings(tmp_path_factory) -> dict:
    """The cookie settings as a process started with the documented variables reads them."""
    documented = production_environment_from_the_docs()
    env = {
        **child_environ(),
        **{k: v for k, v in documented.items() if "…" not in v and "<" not in v},
        "DJANGO_SETTINGS_MODULE": "relay.settings",
        "SECRET_KEY": "production-secret-" * 3,
        "RELAY_VAR_DIR": str(tmp_path_factory.mktemp("var")),
    }
    env.pop("DATABASE_URL", None)
    result = run_python("-c", PRINT_COOKIE_SETTINGS, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_documented_production_settings_make_the_cookies_secure_and_lax(
    production_cookie_settings,
):
    assert production_cookie_settings == {
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SESSION_COOKIE_SAMESITE": "Lax",
        "CSRF_COOKIE_SAMESITE": "Lax",
        "SESSION_COOKIE_HTTPONLY": True,
    }


@pytest.mark.django_db
def test_a_console_sign_in_sets_its_cookies_so(client, user, settings, production_cookie_settings):
    for name, value in production_cookie_settings.items():
        setattr(settings, name, value)
    client.get("/login")

    response = client.post(
        "/login", {"email": user.email, "password": "correct-horse-battery-staple"}
    )

    session, csrf = response.cookies["sessionid"], client.cookies["csrftoken"]
    assert session["secure"] and session["httponly"] and session["samesite"] == "Lax"
    assert csrf["secure"] and csrf["samesite"] == "Lax"
