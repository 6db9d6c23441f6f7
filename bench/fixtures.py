"""The Django side of the harness: database, users, tokens, history rows, SQL baselines.

run.py puts the bench environment (DATABASE_URL, REDIS_URL, ...) into os.environ before
setup(), so this process talks to the same PostgreSQL database and Redis DB as the servers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from urllib.parse import urlsplit, urlunsplit

from harness.live import ROOT

PASSWORD = "bench-passphrase-not-secret"  # noqa: S105 - a throwaway user of a bench database
HTTP_EMAIL = "bench-http@relay.example"
HISTORY_EMAIL = "bench-history@relay.example"  # the user bench/history_plans.py loads too
WS_EMAIL = "bench-ws-{}@relay.example"
LOGIN_EMAIL = "bench-login-{}@relay.example"  # http_logins's logins at once, one request per user
NUMBERS_EMAIL = "bench-numbers@relay.example"  # http_logins's number creations at once
NUMBER_STOCK_START = "+442079460100"  # Ofcom's drama range for London


def ensure_database(url: str) -> None:
    """CREATE DATABASE for `url` unless it exists (connecting to the `postgres` database)."""
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def setup(env: dict) -> None:
    import django

    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relay.settings")
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def elsewhere(env: dict, function: str, *args):
    """`function(*args)` of this module run in a child process with Relay's settings in `env`
    (another database than this process's, such as the embedded default's SQLite), its result
    back through JSON (a set as a list)."""
    code = (
        "import json, sys, django; django.setup(); from bench import fixtures; "
        f"print(json.dumps(fixtures.{function}(*json.loads(sys.argv[1])), default=list))"
    )
    done = subprocess.run(  # noqa: S603 - our own code
        [sys.executable, "-c", code, json.dumps(args)],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "relay.settings"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"fixtures.{function} failed elsewhere: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def flush_redis(url: str) -> None:
    """Empty the bench's own Redis DB (never DB 0), so no stale channel or limit lingers."""
    import redis

    client = redis.Redis.from_url(url)
    assert client.connection_pool.connection_kwargs.get("db", 0) != 0, "bench never uses DB 0"
    client.flushdb()


def user(email: str, *, password: str | None = None):
    from accounts.models import User

    found = User.objects.filter(email=email).first()
    return found or User.objects.create_user(email=email, password=password)


def token_for(account) -> str:
    from accounts.services import session_open

    return session_open(user=account).token


def login_emails(count: int) -> list[str]:
    """The e-mails of `count` distinct users whose password is PASSWORD, hashed at the
    hasher's current parameters (so that no login re-hashes and writes it). One hash for all:
    making each its own would cost the harness a hash per user and prove nothing more."""
    from django.contrib.auth.hashers import make_password

    from accounts.models import User

    emails = [LOGIN_EMAIL.format(n) for n in range(count)]
    encoded = make_password(PASSWORD)
    have = set(User.objects.filter(email__in=emails).values_list("email", flat=True))
    for email in emails:
        if email not in have:
            User.objects.create_user(email=email, password_hash=encoded)
    User.objects.filter(email__in=emails).update(password=encoded)
    return emails


def numbers_account(stock: int):
    """A user of its own holding no number (the user of an earlier run is dropped first,
    with its numbers), and at least `stock` free numbers in the inventory, provisioned as an
    operator does (`manage.py provision_numbers`)."""
    from io import StringIO

    from django.core.management import call_command

    from accounts.models import User
    from virtual_numbers.models import InventoryNumber

    User.objects.filter(email=NUMBERS_EMAIL).delete()
    free = InventoryNumber.objects.filter(holding__isnull=True).count()
    if free < stock:
        call_command("provision_numbers", "--start", NUMBER_STOCK_START, "--count",
                     str(stock * 4), stdout=StringIO())  # fmt: skip
    return user(NUMBERS_EMAIL)


def numbers_held(account) -> int:
    from virtual_numbers.models import Number

    return Number.objects.filter(owner=account).count()


def captcha_tokens(count: int) -> list[str]:
    """`count` CAPTCHA tokens, each from a challenge issued and answered through the
    service, as `GET /api/captcha` and `POST /api/captcha/verify` give them (not over HTTP:
    their per-IP rate limits are Relay's defaults, 20 verifies a minute)."""
    from captcha.services import captcha_challenge_issue, captcha_verify

    tokens = []
    for _ in range(count):
        challenge = captcha_challenge_issue()
        token = captcha_verify(a=challenge.a, b=challenge.b, answer=challenge.a + challenge.b,
                               challenge_id=challenge.id)  # fmt: skip
        tokens.append(str(token.id))
    return tokens


def captcha_tokens_spent(tokens: list[str]) -> int:
    from captcha.models import CaptchaToken

    return CaptchaToken.objects.filter(pk__in=tokens, used_at__isnull=False).count()


def ws_accounts(count: int) -> list[tuple[str, str]]:
    """(JWT, user id) of `count` distinct users, so a call's events reach only its socket."""
    out = []
    for n in range(count):
        account = user(WS_EMAIL.format(n))
        out.append((token_for(account), str(account.pk)))
    return out


def history_user(count: int):
    """The history user with at least `count` records, loading only what is missing, and
    every history counter equal to its rows: seed_history counts what it loads, and a
    recount corrects counters of rows loaded by an older release (it says what it fixed)."""
    from django.core.management import call_command
    from django.db import connection

    from history.records import history_calls
    from history.services import call_record_counters_recount

    account = user(HISTORY_EMAIL)
    have = history_calls().filter(owner=account).count()
    if have < count:
        call_command("seed_history", "--email", HISTORY_EMAIL, "--count", str(count - have))
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE calls_call")
    for drift in call_record_counters_recount():
        print(f"[bench] history counter corrected: {drift}", flush=True)
    return account


def history_cursor(account, *, status: str | None, depth: int) -> str:
    """The `nextCursor` a client holds after paging `depth` rows into the list (the cursor
    after row `depth`), found once with an OFFSET."""
    from core.pagination import Cursor
    from history.selectors import history_querysets

    records, _counters = history_querysets(user=account, status=status)
    row = records.order_by("-created_at", "-id")[depth - 1]
    return Cursor.after(row).encode()


def history_sql_ms(
    account, *, status: str | None, offset: int, runs: int, before: str | None = None
) -> list[float]:
    """Wall time of the statements `history_page` runs, raw SQL: the counters' sum for
    `total`, then the page and the row past it (past an offset: their positions, then the
    page's rows with their numbers).

    The SQL is compiled from the same querysets the selector builds and executed straight on
    Django's psycopg connection: no ORM row building, no view, no HTTP.
    """
    from django.db import connection

    from core.pagination import Cursor
    from history.records import record_rows
    from history.selectors import history_querysets

    records, counters = history_querysets(user=account, status=status)
    ordered = records.order_by("-created_at", "-id")
    if before:
        ordered = ordered.filter(Cursor.decode(before).older())
    total_sql, total_params = counters.values("count").query.sql_with_params()
    total_sql = f"SELECT COALESCE(SUM(count), 0) FROM ({total_sql}) c"  # noqa: S608 - ORM SQL
    joined = record_rows(records)  # with the number, the voicemail and the phone that took it
    statements = [(total_sql, total_params)]
    if offset:
        keys = ordered.values_list("created_at", "id")[offset : offset + 51]
        ids = [i for _, i in keys[:50]]
        statements.append(keys.query.sql_with_params())
        statements.append(joined.filter(id__in=ids).query.sql_with_params())
    else:
        statements.append(record_rows(ordered)[:51].query.sql_with_params())
    timings = []
    with connection.cursor() as cursor:
        for _ in range(runs):
            started = time.perf_counter()
            for sql, params in statements:
                cursor.execute(sql, params)
                cursor.fetchall()
            timings.append((time.perf_counter() - started) * 1000)
    return timings


def calls_persisted(prefix: str) -> set[str]:
    from calls.models import Call

    return set(Call.objects.filter(call_id__startswith=prefix).values_list("call_id", flat=True))


def calls_reset() -> None:
    """Drop earlier runs' calls and queued steps, so a worker starts with an empty queue."""
    from django_tasks_db.models import DBTaskResult

    from calls.models import Call

    DBTaskResult.objects.all().delete()
    Call.objects.filter(owner__email__startswith="bench-ws-").delete()


def argon2_verify_ms(runs: int) -> list[float]:
    """One password check with Relay's hasher, in this process (one core)."""
    from django.contrib.auth.hashers import check_password, make_password

    encoded = make_password(PASSWORD)
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        check_password(PASSWORD, encoded)
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def probe_sender(user_ids: list[str], *, rate: float, seconds: float) -> int:
    """Push `bench_probe` frames to the users' groups through the channel layer at `rate`.

    One event loop and one Redis connection pool throughout: this is the transport's floor,
    without the per-call event loop a worker's on_commit hook pays.
    """
    import asyncio

    from channels.layers import get_channel_layer

    from core.events import user_group

    async def send_all() -> int:
        layer = get_channel_layer()
        total = max(1, int(rate * seconds))
        start = time.perf_counter()
        for i in range(total):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            group = user_group(user_ids[i % len(user_ids)])
            event = {"type": "bench_probe", "t": time.time()}
            await layer.group_send(group, {"type": "relay.event", "event": event})
        return total

    return asyncio.run(send_all())


FORWARD_EMAIL = "bench-forward@relay.example"
# The numbers the scenarios hold by name lie outside every range the bench provisions (London's
# drama range, +44 20 7946 0000-0999, seed_history's and NUMBER_STOCK_START's), from which
# number_grant hands out free numbers at random: one of them was once granted to the history
# user first. Birmingham's drama range: Ofcom's, never a real line.
FORWARD_NUMBER = "+441214960990"
FORWARD_TARGET = "+441134960990"
TRANSFER_TARGET = "+441134960994"  # sip_transfer's: who FORWARD_TARGET hands its calls on to


def _own_number(email: str, e164: str, **fields):
    """`e164`, held by a user of its own (`email`) with `fields` (no PIN: unusable, as Django
    marks an unusable password); the user of an earlier run is dropped first, with its calls,
    legs and records, so the plan's rolling counts start empty."""
    from accounts.models import User
    from virtual_numbers.models import InventoryNumber, Number

    User.objects.filter(email=email).delete()
    inventory, _ = InventoryNumber.objects.get_or_create(e164=e164)
    return Number.objects.create(
        owner=user(email), inventory=inventory, number=e164, pin_hash="!", **fields
    )


def forwarding_number():
    """FORWARD_NUMBER, forwarding to FORWARD_TARGET alone (no screening, the caller shown)."""
    return _own_number(
        FORWARD_EMAIL,
        FORWARD_NUMBER,
        alias="bench forwarding",
        ring_entries=[{"phone": FORWARD_TARGET}],  # its ring list (issue 57): one phone
        forward_ring_seconds=30,
    )


EDGE_EMAIL = "bench-edge@relay.example"
EDGE_NUMBER = "+441214960991"


def voicemail_number():
    """EDGE_NUMBER, answered by voicemail after a one-word greeting (no forwarding)."""
    return _own_number(EDGE_EMAIL, EDGE_NUMBER, alias="bench edge", greeting="Hi.")


MAIL_EMAIL = "bench-voicemail@relay.example"
MAIL_NUMBER = "+441214960992"


def mailed_number():
    """MAIL_NUMBER, whose owner has each voicemail mailed to a verified address."""
    number = _own_number(MAIL_EMAIL, MAIL_NUMBER, alias="bench mail")
    number.owner.__class__.objects.filter(pk=number.owner_id).update(
        email_verified=True, voicemail_email=True
    )
    number.owner.refresh_from_db()
    return number


RING_EMAIL = "bench-ring-group@relay.example"
RING_NUMBER = "+441214960993"
RING_PHONES = ("+441134960991", "+441134960992", "+441134960993")  # each rung by the trunk


def ring_group_number():
    """RING_NUMBER, whose ring list rings `all` at once: the three RING_PHONES through the
    trunk, then its owner as a member entry (their console tabs with Phone on; no ring
    phone), 30 s each, no screening, the caller shown."""
    number = _own_number(RING_EMAIL, RING_NUMBER, alias="bench ring group",
                         forward_ring_seconds=30, ring_strategy="all")  # fmt: skip
    number.ring_entries = [{"phone": phone} for phone in RING_PHONES]
    number.ring_entries.append({"member": str(number.owner_id)})
    number.save(update_fields=["ring_entries"])
    return number
