"""Builds the fixture of tests/calls/test_upgrade.py: a database filled by the release before
the call ledger (issue 54, "Nothing is lost on upgrade"), and what that release's API answered
about it. pytest never runs this; run it by hand from the checkout's root when the fixture
must be made again (a read to add, a kind of call to add):

    .venv/bin/python tests/calls/upgrade/build_fixture.py

It needs the release's commit in the checkout's history, Relay's virtualenv (.venv), and the
SIP tests' tools: sipp, espeak-ng and sox (Debian: sip-tester espeak-ng sox; .ci/run installs
them). It takes about two minutes, and leaves nothing behind but the files it writes
(`--keep` leaves the release's worktree and the run's directory, to look into).

1. It checks RELEASE out into a worktree of its own (/tmp/relay-old), this checkout's .venv
   linked in, and runs that release's own code for everything below, against a new SQLite
   database, with settings of its own: SECRET_KEY (the suite's), DEBUG on, and nothing of the
   caller's environment but PATH, HOME, TMPDIR, USER and the locale. Its live processes are
   started by the release's own test helpers (tests.live, tests.telephony): the release has
   no harness/ (issue 55 made it later), so those imports name the release's modules, never
   this checkout's.
2. `manage.py migrate`, `provision_numbers`, then the release's `runrelay` with the simulated
   provider, filled through its public surface only: two users registered (their JWTs, their
   API keys from the dashboard), numbers taken with the CAPTCHA, a greeting, a blocked caller,
   forwarding (to a phone, and to the browser), a number's voice app, a webhook (to a receiver
   of this script's), outbound calls by POST /api/calls to every end (completed, busy,
   no_answer, failed, canceled; a script; a statusCallback; a callId with a slash, and one
   callId both users use) driven by the release's worker, and records by `manage.py
   record_call` (answered, missed, blocked; two at the same instant).
3. `runrelay` again with TELEPHONY_PROVIDER=sip, SIPp as the trunk and the callers, and aiortc
   as a console tab: a script that records (a CallRecording and its WAV) and dials (a dial
   leg), voicemail left by a caller (the WAV, then its transcript by the worker's
   pocketsphinx), a caller who hangs up while it rings (missed), a blocked caller (603), a call
   forwarded to a phone (a forward leg), one answered by the number's voice app, one answered
   in the browser (forwarded_to "browser"), and a call from the browser.
4. `runrelay` once more (simulated, nothing in flight) answers every read the upgrade test
   asks again, as each user, twice; both passes must agree (a read that changed what it read,
   or that depends on the clock, would make the test fail for nothing).
5. With the servers stopped, it writes, under tests/calls/upgrade/:
   - fixture.json.gz: the migration each of Relay's apps stood at (the schema before the
     change) and every row of every table of Relay's apps, each column with its kind so that
     the test can give each value back its type;
   - answers.json.gz: the users (e-mail, API key) and every read with its answer;
   - recordings/: the WAV files the rows name (voicemail, a script's recording).
   The JSON is gzipped (a tenth of its size; the whole fixture must stay under 100 KB), one
   row or read a line: `zcat tests/calls/upgrade/answers.json.gz | less` reads it.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from answers import answer_of  # this script's folder: the test keeps answers the same way

RELEASE = "3af7243"  # the last commit before any model of the call ledger (issue 54)
HERE = Path(__file__).resolve().parent
CHECKOUT = HERE.parents[2]
OLD_TREE = Path("/tmp/relay-old")  # noqa: S108 - a fixed place, emptied before use
SECRET_KEY = "test-only-secret-key-not-for-production"
KEPT_ENVIRONMENT = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER")
# All the build writes (the JSON gzipped, the WAVs), to keep in the repository.
MAX_FIXTURE_BYTES = 100_000

PASSWORD = "correct-horse-battery-staple"
USERS = {"alice": "alice@example.com", "bob": "bob@example.com"}
TARGET = "+441134960200"  # a phone numbers forward to and scripts dial: allowed, not Relay's
BLOCKED_CALLER = "+447700900666"
MESSAGE = "Call me back, please."  # short: its WAV is kept in the repository
RECORD_EVENTS = ["call_record", "call_record.transcribed"]
TERMINAL = {"completed", "busy", "no_answer", "failed", "canceled"}
CALL_STATES = [
    "queued",
    "dialing",
    "ringing",
    "in_progress",
    "completed",
    "busy",
    "no_answer",
    "failed",
    "canceled",
]


# --- 1: the release's worktree, and running it -------------------------------------------
def git(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(  # noqa: S603 - git, by name, with our own arguments
        ["git", "-C", str(CHECKOUT), *argv],  # noqa: S607
        check=check,
        capture_output=True,
        text=True,
    )


def worktree_add(tree: Path, release: str) -> None:
    """`release` checked out at `tree` (a worktree of this checkout's repository, detached),
    this checkout's virtualenv linked in as its .venv."""
    worktree_remove(tree)
    git("worktree", "add", "--detach", str(tree), release)
    (tree / ".venv").symlink_to((CHECKOUT / ".venv").resolve())


def worktree_remove(tree: Path) -> None:
    if tree.exists():
        git("worktree", "remove", "--force", str(tree), check=False)
        shutil.rmtree(tree, ignore_errors=True)
    git("worktree", "prune")


def release_environment(work: Path) -> dict:
    """The release's settings for this run: its own database and var/ under `work`, the
    suite's SECRET_KEY, DEBUG on, and nothing else of the caller's environment."""
    env = {name: os.environ[name] for name in KEPT_ENVIRONMENT if name in os.environ}
    env.update(
        SECRET_KEY=SECRET_KEY,
        DEBUG="true",
        DATABASE_URL=f"sqlite:///{work / 'relay.sqlite3'}",
        RELAY_VAR_DIR=str(work / "var"),
        DJANGO_SETTINGS_MODULE="relay.settings",
        TELEPHONY_PROVIDER="simulated",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


def run_in(tree: Path, env: dict, *argv: str) -> None:
    """`argv` run by the release's interpreter in its worktree; stops the build if it fails."""
    print("==", " ".join(argv), flush=True)
    subprocess.run([str(tree / ".venv" / "bin" / "python"), *argv], cwd=tree, env=env, check=True)  # noqa: S603


def build(tree: Path, release: str, keep: bool) -> None:
    worktree_add(tree, release)
    work = Path(tempfile.mkdtemp(prefix="relay-upgrade-"))
    try:
        env = release_environment(work)
        (work / "var").mkdir()
        run_in(tree, env, "manage.py", "migrate", "--noinput", "--verbosity", "0")
        run_in(
            tree, env, "manage.py", "provision_numbers", "--start", "+442079460000", "--count", "8"
        )
        here = str(Path(__file__).resolve())
        run_in(tree, env, here, "--inside", str(work), "--release", release)
        written = work / "out"
        shutil.rmtree(HERE / "recordings", ignore_errors=True)
        shutil.copytree(written / "recordings", HERE / "recordings")
        for name in ("fixture.json.gz", "answers.json.gz"):
            shutil.copyfile(written / name, HERE / name)
        release_recorded = json.loads(gzip.decompress((HERE / "fixture.json.gz").read_bytes()))[
            "release"
        ]
        assert release_recorded == release, release_recorded
        print(f"== written to {HERE.relative_to(CHECKOUT)}", flush=True)
    finally:
        if keep:
            print(f"== kept {tree} and {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
            worktree_remove(tree)


# --- 2-5: inside the release's worktree, with its code --------------------------------------
class Api:
    """HTTP to a live Relay; stops the build on any answer but the one expected."""

    def __init__(self, base: str) -> None:
        self.base = base

    def request(
        self,
        method: str,
        path: str,
        body=None,
        *,
        token: str | None = None,
        key: str | None = None,
        headers: dict | None = None,
    ) -> tuple[int, dict, bytes]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method)  # noqa: S310 - our server
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        if key:
            request.add_header("X-API-Key", key)
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read()

    def json(self, method: str, path: str, body=None, *, expect: int = 200, **auth):
        status, _, data = self.request(method, path, body, **auth)
        if status != expect:
            raise SystemExit(f"{method} {path}: {status}, not {expect}: {data[:800]!r}")
        return json.loads(data) if data else None


class Receiver:
    """Where the user's webhook and statusCallback post: answers 204 to everything."""

    def __init__(self, port: int) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the name http.server calls
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def quoted(call_id: str) -> str:
    """A callId in a path: the API takes slashes in it as they are."""
    return urllib.parse.quote(call_id, safe="/")


def ms(year, month, day, hour, minute=0) -> int:
    return int(datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp() * 1000)


def fill_and_record(work: Path, release: str) -> None:
    """Steps 2 to 5, run by the release's interpreter with the release's checkout as the
    current directory: its code, its test helpers (tests.live, tests.telephony)."""
    sys.path[0] = str(Path.cwd())  # the release's packages, never this checkout's
    import django

    django.setup()
    from tests.live import RelayProcess, free_port, manage, relay_env

    var = work / "var"
    receiver = Receiver(free_port())
    simulated = {"SIMULATED_STEP_SECONDS": "0.3", "WEBHOOK_ALLOW_PRIVATE": "true"}

    relay = RelayProcess(var, log=work / "relay-simulated.log", **simulated)
    try:
        people = fill_simulated(Api(relay.base), receiver)
    finally:
        relay.stop()
    records_by_command(people, env=relay_env(var), manage=manage)

    fill_over_sip(work, people)

    relay = RelayProcess(var, log=work / "relay-reads.log", **simulated)
    try:
        api = Api(relay.base)
        first = all_reads(api, people)
        again = all_reads(api, people)
    finally:
        relay.stop()
    if first != again:
        raise SystemExit("two passes of the reads differ: " + differing(first, again))

    out = work / "out"
    out.mkdir()
    recordings = copy_recordings(var / "recordings", out / "recordings")
    fixture = {
        "release": release,
        "migrations": migration_targets(),
        "tables": dump_tables(),
        "recordings": recordings,
    }
    write_gzipped(out / "fixture.json.gz", json_lines(fixture, depth=4))
    answers = {
        "release": release,
        "users": {
            who: {"email": person["email"], "apiKey": person["key"]}
            for who, person in people.items()
        },
        "reads": first,
    }
    write_gzipped(out / "answers.json.gz", json_lines(answers, depth=2))
    size = sum(path.stat().st_size for path in out.rglob("*") if path.is_file())
    if size > MAX_FIXTURE_BYTES:
        raise SystemExit(f"the fixture is {size} bytes, more than {MAX_FIXTURE_BYTES}")


# --- 2: the simulated provider ---------------------------------------------------------------
def fill_simulated(api: Api, receiver: Receiver) -> dict:
    """Step 2 over HTTP (the `record_call` records come after, by command): the users, their
    numbers and settings, and their outbound calls, each to its end."""
    people = {}
    for who, email in USERS.items():
        token = api.json(
            "POST", "/api/auth/register", {"email": email, "password": PASSWORD}, expect=201
        )["token"]
        key = api.json("GET", "/api/dashboard", token=token)["apiKey"]
        people[who] = {"email": email, "key": key, "numbers": {}}
    alice, bob = people["alice"], people["bob"]

    for who, aliases in (("alice", ["Shop", "Office", "Menu", "Desk"]), ("bob", ["Home"])):
        for alias in aliases:
            people[who]["numbers"][alias] = take_number(api, people[who]["key"], alias)
    numbers = alice["numbers"]
    at = alice["key"]
    shop, office, menu, desk = (numbers[a]["id"] for a in ("Shop", "Office", "Menu", "Desk"))
    api.json("PUT", f"/api/numbers/{shop}/greeting", {"greeting": "Hi."}, key=at)
    api.json(
        "POST", f"/api/numbers/{shop}/blocked", {"caller_num": BLOCKED_CALLER}, key=at, expect=201
    )
    api.json("PUT", f"/api/numbers/{office}/forwarding", {"targets": [TARGET]}, key=at)
    api.json("PUT", f"/api/numbers/{desk}/forwarding", {"targets": ["browser"]}, key=at)
    api.json(
        "PUT",
        f"/api/numbers/{menu}/voice",
        {"script": [{"say": {"text": "Thanks for calling."}}, {"hangup": {}}]},
        key=at,
    )

    said = {"message": "Your table is ready."}
    alice_calls = [
        {"callId": "order-1001", "to": "+442079460123", **said},
        {"callId": "order/1002", "to": "+442079460127", **said},  # busy; a slash in its id
        {"callId": "order-1003", "to": "+442079460128", **said},  # no_answer
        {"callId": "order-1004", "to": "+442079460129", **said},  # failed
        {
            "callId": "order-1005",
            "to": "+442079460124",
            "message": "Ihr Tisch ist fertig.",
            "language": "de",
            "from": numbers["Office"]["number"],
        },
        {
            "callId": "order-1006",
            "to": "+442079460125",
            "statusCallback": f"{receiver.url}/status",
            **said,
        },
        {
            "callId": "survey-1",
            "to": "+442079460126",
            "script": [
                {"say": {"text": "Hello from Relay."}},
                {"gather": {"numDigits": 1, "say": {"text": "Press a key."}}},
                {"record": {"maxSeconds": 2}},
                {"dial": {"targets": [TARGET]}},
            ],
        },
    ]
    for call in alice_calls:
        if call["callId"] == "order-1006":
            # From here on the records' events go to a webhook too (only those: every status
            # of every call would be dozens of rows more).
            webhook = {"url": f"{receiver.url}/events", "events": RECORD_EVENTS}
            api.json("PUT", "/api/user/webhook", webhook, key=at, expect=201)
        submit_and_end(api, at, call)
    # Canceled before it ends: the provider's steps are 0.3 s apart.
    doomed = {"callId": "order-1007", "to": "+442079460122", **said}
    api.json("POST", "/api/calls", doomed, key=at, expect=202)
    canceled = api.json("POST", "/api/calls/order-1007/cancel", key=at)
    assert canceled["status"] == "canceled", canceled

    for call in (
        {"callId": "order-1001", "to": "+442079460121", **said},  # alice's callId, bob's call
        {"callId": "bob-2", "to": "+442079460117", **said},
    ):
        submit_and_end(api, bob["key"], call)
    return people


def take_number(api: Api, key: str, alias: str) -> dict:
    """A number taken as a person takes one: the CAPTCHA answered, then POST /api/numbers."""
    challenge = api.json("GET", "/api/captcha")
    answer = {
        "a": challenge["a"],
        "b": challenge["b"],
        "answer": challenge["a"] + challenge["b"],
        "challengeId": challenge["challengeId"],
    }
    token = api.json("POST", "/api/captcha/verify", answer)["token"]
    body = {"alias": alias, "pin": "2468", "captchaToken": token}
    return api.json("POST", "/api/numbers", body, key=key, expect=201)


def submit_and_end(api: Api, key: str, call: dict) -> dict:
    """POST /api/calls, then GET the call until it has ended (one at a time: the free plan
    allows three at once)."""
    api.json("POST", "/api/calls", call, key=key, expect=202)
    path = f"/api/calls/{quoted(call['callId'])}"
    deadline = time.monotonic() + 60
    while (answer := api.json("GET", path, key=key))["status"] not in TERMINAL:
        if time.monotonic() > deadline:
            raise SystemExit(f"{call['callId']} did not end: {answer}")
        time.sleep(0.1)
    return answer


def records_by_command(people: dict, *, env: dict, manage) -> None:
    """Records by `manage.py record_call`, at instants of their own (two at the same one: the
    history's order then rests on the ids)."""
    shop = people["alice"]["numbers"]["Shop"]["number"]
    home = people["bob"]["numbers"]["Home"]["number"]
    records = [
        (shop, "+447700900201", "answered", 42, ms(2026, 10, 1, 9)),
        (shop, "+447700900202", "missed", 0, ms(2026, 10, 2, 9)),
        (shop, BLOCKED_CALLER, "blocked", 0, ms(2026, 10, 3, 9)),
        (shop, "+447700900203", "answered", 7, ms(2026, 10, 4, 9)),
        (shop, "+447700900204", "missed", 0, ms(2026, 10, 4, 9)),
        (home, "+447700900205", "answered", 61, ms(2026, 10, 5, 9)),
        (home, "+447700900206", "missed", 0, ms(2026, 10, 6, 9)),
    ]
    for number, caller, status, duration, at in records:
        argv = ["--number", number, "--caller", caller, "--status", status]
        argv += ["--duration", str(duration), "--at", str(at)]
        print("== manage.py record_call", *argv, flush=True)
        done = manage("record_call", *argv, env=env)
        if done.returncode != 0:
            raise SystemExit(f"record_call {argv}: {done.stdout}{done.stderr}")


# --- 3: SIP ---------------------------------------------------------------------------------
def fill_over_sip(work: Path, people: dict) -> None:
    import asyncio

    from telephony.speech import Speech
    from tests.live import RelayProcess
    from tests.telephony.conftest import (
        Sipp,
        call_in,
        free_udp_port,
        pcap_from_alaw,
        sip_env,
    )

    sip = work / "sip"
    sip.mkdir()
    trunk = free_udp_port()
    env = sip_env(
        sip, trunk, INBOUND_RING_SECONDS=1, WEBHOOK_ALLOW_PRIVATE="true", SIP_RING_TIMEOUT=10
    )
    relay = RelayProcess(work / "var", log=work / "relay-sip.log", **env)
    agent = env["SIP_BIND"]
    api = Api(relay.base)
    alice = people["alice"]
    key, numbers = alice["key"], alice["numbers"]
    try:
        # A script that records what the callee says (1 s) and dials TARGET, who talks 1 s.
        parties = Sipp(
            sip / "parties",
            "dial_parties",
            port=trunk,
            calls=2,
            target=re.escape(TARGET),
            busy="none",
            answer_ms=300,
            talk_ms=1000,
        )
        script = [
            {"record": {"maxSeconds": 1, "beep": False}},
            {"dial": {"targets": [TARGET], "timeout": 10}},
        ]
        call = {"callId": "sip-1", "to": "+442079460123", "script": script}
        ended = submit_and_end(api, key, call)
        assert parties.finish() == 0, parties
        assert ended["status"] == "completed" and len(ended["recordings"]) == 1, ended

        speech = Speech(sip / "tts")
        message = speech.render(MESSAGE, "en")[8]
        pcap = pcap_from_alaw(message, sip / "message.pcap")
        greeting = len(speech.render("Hi.", "en")[8]) / 8000 + 0.4  # and the beep
        said_ms = len(message) * 1000 // 8000

        shop = numbers["Shop"]["number"]
        caller = call_in(
            agent,
            sip,
            "inbound_message",
            shop,
            pcap=pcap,
            greeting_ms=int((greeting + 0.3) * 1000),
            message_ms=said_ms + 300,
        )
        assert caller.finish(90) == 0, caller
        caller = call_in(agent, sip, "inbound_cancel", shop, caller="+447700900124", resend="")
        assert caller.finish() == 0, caller
        caller = call_in(agent, sip, "inbound_refused", shop, caller=BLOCKED_CALLER, status=603)
        assert caller.finish() == 0, caller

        phones = Sipp(
            sip / "phones",
            "forward_target",
            port=trunk,
            answering=re.escape(TARGET),
            codec="8",
            codec_name="PCMA",
            answer_ms=300,
            actions="",
        )
        caller = call_in(
            agent,
            sip,
            "inbound_message",
            numbers["Office"]["number"],
            caller="+447700900125",
            pcap=pcap,
            greeting_ms=0,
            message_ms=said_ms + 1000,
        )
        assert caller.finish(60) == 0, caller
        assert phones.finish() == 0, phones

        caller = call_in(
            agent,
            sip,
            "inbound_keys",
            numbers["Menu"]["number"],
            caller="+447700900126",
            before_ms=0,
            presses="",
            hangup_timeout_ms=30000,
        )
        assert caller.finish(60) == 0, caller

        token = api.json("POST", "/api/auth/login", {"email": alice["email"], "password": PASSWORD})
        asyncio.run(browser_calls(relay, sip, agent, trunk, token["token"], numbers["Desk"]))

        settled(api, people)
    finally:
        relay.stop()


async def browser_calls(relay, sip: Path, agent: str, trunk: int, token: str, desk: dict) -> None:
    """A console tab (aiortc, on a real socket) that answers a call forwarded to the browser,
    then places a call from the browser."""
    import asyncio

    from websockets.asyncio.client import connect

    from tests.telephony.browser_peer import BROWSER_SAYS, Browser, next_frame, until
    from tests.telephony.conftest import Sipp, call_in

    async with connect(f"{relay.ws_base}/ws?token={token}") as ws:
        await ws.send(json.dumps({"type": "phone", "on": True}))
        await next_of(ws, "phone")
        caller = await asyncio.to_thread(
            call_in, agent, sip, "inbound_wait_bye", desk["number"], caller="+447700900127"
        )
        ring = await next_of(ws, "incoming_call", ringBrowser=True)
        browser = Browser()
        try:
            offer = await browser.offer()
            await ws.send(json.dumps({"type": "rtc_offer", "callId": ring["callId"], "sdp": offer}))
            await browser.take((await next_of(ws, "rtc_answer", callId=ring["callId"]))["sdp"])
            await until(lambda: browser.pc.connectionState == "connected", "the connection")
            for _ in range(25):
                browser.track.push(BROWSER_SAYS)
                await asyncio.sleep(0.02)
            await ws.send(json.dumps({"type": "rtc_hangup", "callId": ring["callId"]}))
            assert await asyncio.to_thread(caller.finish) == 0, caller
        finally:
            await browser.pc.close()

        far_end = await asyncio.to_thread(Sipp, sip / "far-end", "uas", port=trunk, echo=True)
        browser = Browser()
        try:
            offer = await browser.offer()
            frame = {"type": "rtc_offer", "callId": "browser-1", "to": "+442079460123"}
            await ws.send(json.dumps({**frame, "sdp": offer}))
            await browser.take((await next_frame(ws, "browser-1", "rtc_answer"))["sdp"])
            await until(lambda: browser.pc.connectionState == "connected", "the connection")
            await next_of(ws, "call_status", callId="browser-1", status="in_progress")
            for _ in range(25):
                browser.track.push(BROWSER_SAYS)
                await asyncio.sleep(0.02)
        finally:
            await browser.pc.close()  # the tab hangs up
        await next_of(ws, "call_status", callId="browser-1", status="completed")
        assert await asyncio.to_thread(far_end.finish) == 0, far_end


async def next_of(ws, kind: str, timeout: float = 30, **fields) -> dict:
    """The next frame of `kind` with `fields` on the socket (others are passed over)."""
    import asyncio

    async with asyncio.timeout(timeout):
        while True:
            frame = json.loads(await ws.recv())
            if frame["type"] == kind and all(frame.get(k) == v for k, v in fields.items()):
                return frame


def settled(api: Api, people: dict) -> None:
    """Wait until nothing is left to happen: every inbound call recorded, every message's
    transcript made, every webhook delivered, every mail sent, no call up."""
    from django.db import close_old_connections
    from realtime.models import TERMINAL_STATES, CallRequest

    from history.models import CallRecord
    from mail.models import OutboundMail
    from telephony.models import InboundCall
    from webhooks.models import WebhookDelivery

    def quiet() -> bool:
        close_old_connections()
        return not (
            InboundCall.objects.filter(recorded=False).exists()
            or CallRequest.objects.exclude(status__in=TERMINAL_STATES).exists()
            or CallRecord.objects.filter(transcript_status="pending").exists()
            or WebhookDelivery.objects.exclude(status="delivered").exists()
            or OutboundMail.objects.exclude(status="sent").exists()
        )

    deadline = time.monotonic() + 120
    while not quiet():
        if time.monotonic() > deadline:
            raise SystemExit("Relay did not settle in 120 s")
        time.sleep(0.2)
    history = api.json("GET", "/api/history?limit=200", key=people["alice"]["key"])["history"]
    transcribed = [r for r in history if r["transcript_status"] == "done"]
    if not transcribed:
        raise SystemExit(f"no voicemail was transcribed: {history}")


# --- 4: the reads -------------------------------------------------------------------------
def all_reads(api: Api, people: dict) -> list[dict]:
    """Every read the upgrade test asks again, as each user, with its answer."""
    reads: list[dict] = []

    def read(who: str, path: str, headers: dict | None = None) -> dict:
        status, answer_headers, body = api.request(
            "GET", path, key=people[who]["key"], headers=headers
        )
        entry = {"as": who, "path": path, "status": status, **answer_of(answer_headers, body)}
        if headers:
            entry["headers"] = headers
        reads.append(entry)
        return entry

    def pages(who: str, path: str) -> None:
        """A list's first page and each cursor page after it."""
        separator = "&" if "?" in path else "?"
        answer = read(who, path)["json"]
        while answer["nextCursor"] is not None:
            cursor = urllib.parse.quote(answer["nextCursor"], safe="")
            answer = read(who, f"{path}{separator}before={cursor}")["json"]

    for who in people:
        history = read(who, "/api/history")["json"]["history"]
        for status in ("answered", "missed", "blocked"):
            read(who, f"/api/history?status={status}")
        pages(who, "/api/history?limit=3")
        pages(who, "/api/history?status=answered&limit=2")
        read(who, "/api/history?limit=2&offset=2")
        numbers = read(who, "/api/numbers")["json"]["numbers"]
        for number in numbers:
            read(who, f"/api/history?number_id={number['id']}")
        messages = [r["recording_url"] for r in history if r["recording_url"]]
        for url in messages:
            read(who, url)
            read(who, url, headers={"Range": "bytes=100-299"})

        calls = read(who, "/api/calls")["json"]["calls"]
        for state in CALL_STATES:
            read(who, f"/api/calls?status={state}")
        pages(who, "/api/calls?limit=3")
        read(who, "/api/calls?limit=2&offset=1")
        for call in calls:
            detail = read(who, f"/api/calls/{quoted(call['callId'])}")["json"]
            for recording in detail["recordings"]:
                read(who, f"/api/calls/{quoted(call['callId'])}/recordings/{recording['id']}")
        read(who, "/api/user/webhook")
        read(who, "/api/user/export")

    # Bob asks for Alice's: each is not found, before the upgrade and after.
    alice_history = [r for r in reads if r["as"] == "alice" and r["path"] == "/api/history"]
    message = next(r for r in alice_history[0]["json"]["history"] if r["recording_url"])
    read("bob", message["recording_url"])
    read("bob", "/api/calls/sip-1")
    recorded = next(r for r in reads if r["as"] == "alice" and r["path"] == "/api/calls/sip-1")[
        "json"
    ]["recordings"][0]
    read("bob", f"/api/calls/sip-1/recordings/{recorded['id']}")
    shop = people["alice"]["numbers"]["Shop"]["id"]
    read("bob", f"/api/history?number_id={shop}")
    return reads


def differing(first: list[dict], again: list[dict]) -> str:
    for one, other in zip(first, again, strict=False):
        if one != other:
            return json.dumps({"first": one, "again": other})[:3000]
    return f"{len(first)} reads, then {len(again)}"


# --- 5: what the test needs ----------------------------------------------------------------
def relay_apps() -> list:
    """Relay's own apps (their code in this checkout), not Django's nor a library's."""
    from django.apps import apps

    root = Path.cwd().resolve()
    return [c for c in apps.get_app_configs() if Path(c.path).resolve().is_relative_to(root)]


def migration_targets() -> dict[str, str]:
    """The newest migration of each of Relay's apps, as applied to this database."""
    from django.db import connection
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(connection)
    labels = {config.label for config in relay_apps()}
    targets = {app: name for app, name in loader.graph.leaf_nodes() if app in labels}
    unapplied = {node for node in targets.items() if node not in loader.applied_migrations}
    assert not unapplied, unapplied
    return dict(sorted(targets.items()))


KINDS = {
    "AutoField": "int",
    "BigAutoField": "int",
    "SmallAutoField": "int",
    "IntegerField": "int",
    "BigIntegerField": "int",
    "SmallIntegerField": "int",
    "PositiveIntegerField": "int",
    "PositiveBigIntegerField": "int",
    "PositiveSmallIntegerField": "int",
    "FloatField": "float",
    "DecimalField": "decimal",
    "BooleanField": "bool",
    "CharField": "text",
    "TextField": "text",
    "EmailField": "text",
    "SlugField": "text",
    "URLField": "text",
    "GenericIPAddressField": "text",
    "DateTimeField": "datetime",
    "DateField": "date",
    "TimeField": "time",
    "DurationField": "duration",
    "UUIDField": "uuid",
    "JSONField": "json",
    "BinaryField": "bytes",
}


def kind_of(field) -> str:
    """How a column's values are written in the fixture (a foreign key: as its target's)."""
    internal = (field.target_field if field.is_relation else field).get_internal_type()
    if internal not in KINDS:
        raise SystemExit(f"{field.model.__name__}.{field.name}: no kind for {internal}")
    return KINDS[internal]


def encoded(kind: str, value):
    """`value` in a JSON-safe form from which the test, knowing `kind`, gives it back."""
    if value is None or kind in ("int", "float", "bool", "text", "json"):
        return value
    if kind in ("datetime", "date", "time"):
        return value.isoformat()
    if kind in ("uuid", "decimal"):
        return str(value)
    if kind == "duration":
        return value // value.resolution  # microseconds
    if kind == "bytes":
        return base64.b64encode(bytes(value)).decode()
    raise AssertionError(kind)


def dump_tables() -> dict:
    """Every row of every table of Relay's apps, by table: its app and model, each column's
    kind, and the rows (column: value), in primary-key order."""
    from django.db import close_old_connections

    close_old_connections()
    tables = {}
    for config in relay_apps():
        for model in config.get_models(include_auto_created=True):
            meta = model._meta
            if not meta.managed or meta.proxy:
                continue
            fields = meta.local_concrete_fields
            kinds = {field.column: kind_of(field) for field in fields}
            rows = [
                {
                    field.column: encoded(kinds[field.column], value)
                    for field, value in zip(fields, values, strict=True)
                }
                for values in model._base_manager.order_by("pk").values_list(
                    *[field.attname for field in fields]
                )
            ]
            tables[meta.db_table] = {
                "model": meta.label,
                "columns": kinds,
                "rows": rows,
            }
    return dict(sorted(tables.items()))


def write_gzipped(path: Path, text: str) -> None:
    """`text` gzipped, the same bytes for the same text (no name, no time in the header).
    Gzipped, the JSON is a tenth of its size: the fixture stays far under 100 KB."""
    with path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", filename="", mtime=0) as out:
        out.write((text + "\n").encode())


def json_lines(value, *, depth: int, indent: int = 0) -> str:
    """`value` as JSON, its containers spread one item a line down to `depth` and compact
    below it: a row of a table, or a read, is one line (small files, diffs by line)."""
    if depth > 0 and isinstance(value, dict | list) and value:
        pad = " " * (indent + 1)
        if isinstance(value, dict):
            items = [
                f"{pad}{json.dumps(key)}: {json_lines(item, depth=depth - 1, indent=indent + 1)}"
                for key, item in value.items()
            ]
            opening, closing = "{", "}"
        else:
            items = [
                f"{pad}{json_lines(item, depth=depth - 1, indent=indent + 1)}" for item in value
            ]
            opening, closing = "[", "]"
        return opening + "\n" + ",\n".join(items) + "\n" + " " * indent + closing
    return json.dumps(value, separators=(",", ":"))


def copy_recordings(source: Path, target: Path) -> dict[str, str]:
    """Every file of the recordings storage copied to `target` (same relative names); their
    sha256 by name."""
    target.mkdir(parents=True)
    copied = {}
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        name = path.relative_to(source).as_posix()
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target / name)
        copied[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return copied


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", default=RELEASE, help="the commit before the change")
    parser.add_argument("--tree", type=Path, default=OLD_TREE, help="its worktree")
    parser.add_argument("--keep", action="store_true", help="keep the worktree and the run")
    parser.add_argument("--inside", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside is not None:
        fill_and_record(args.inside, args.release)
    else:
        build(args.tree, args.release, args.keep)


if __name__ == "__main__":
    main()
