"""What the console's tests do again and again: sign in (a test client, or a page in
Chromium), answer the CAPTCHA, leave a voicemail, and wait for its player."""

import re
from concurrent.futures import ThreadPoolExecutor

from django.test import Client

from tests.browser import submit
from tests.factories import DEFAULT_PASSWORD

# True once the page's <audio> element has loaded a message `seconds` long.
PLAYABLE = """(seconds) => {
    const audio = document.querySelector("audio");
    if (!audio.dataset.loading) { audio.dataset.loading = "1"; audio.load(); }
    return audio.readyState >= 1 && Math.abs(audio.duration - seconds) < 0.05;
}"""


def csrf_signed_in(user) -> Client:
    """A browser signed in as `user` (with the login form's token) that checks CSRF."""
    client = Client(enforce_csrf_checks=True)
    client.get("/login")
    token = client.cookies["csrftoken"].value
    signed_in = client.post(
        "/login", {"email": user.email, "password": DEFAULT_PASSWORD, "csrfmiddlewaretoken": token}
    )
    assert signed_in.status_code == 302
    return client


def log_in(page, base: str, user, *, then: str = "/numbers") -> None:
    """Log `user` in through the login form in Chromium, landing on `then`."""
    page.goto(f"{base}/login?next={then}")
    page.fill("#id_email", user.email)
    page.fill("#id_password", DEFAULT_PASSWORD)
    submit(page, "Log in")
    assert page.url == f"{base}{then}"


def answer_the_captcha(page) -> None:
    a, b = re.search(r"what is (\d+) \+ (\d+)\?", page.inner_text("legend")).groups()
    page.fill("#id_answer", str(int(a) + int(b)))


def off_the_loop(write, **kwargs):
    """`write(**kwargs)` in a thread of its own: it pushes a `call_record` event on commit
    (async_to_sync), which cannot run beside the Playwright event loop of this thread."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(write, **kwargs).result()
