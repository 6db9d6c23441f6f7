"""The README's operator commands, run exactly as printed against a freshly started `make run`.

Each `manage.py` line of the README's code blocks runs in a new shell whose environment holds
nothing of Relay's: no SECRET_KEY, DATABASE_URL or REDIS_URL. The one variable it does get is
RELAY_VAR_DIR, which points this `make run` (and so the commands) at a fresh var/ of the
test's own, so the suite never touches a developer's var/ or a Relay they have running.
"""

import json
import os
import pty
import re
import select
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from django.db import connection
from websockets.sync.client import connect

from harness.live import ROOT, ChildProcess, assert_private, http
from harness.ports import free_port
from history.management.commands.seed_demo import DEMO_RECORDS

pytestmark = [
    pytest.mark.timeout(600),
    # Every test here starts `make run` with nothing exported: the embedded default, whatever
    # database the suite's pass uses. The PostgreSQL pass would run the very same thing again.
    pytest.mark.skipif(
        connection.vendor != "sqlite",
        reason="runs `make run` on the embedded default whatever the pass's database: the "
        "embedded (SQLite) pass runs it",
    ),
]

START_DEADLINE = 180
COMMAND_DEADLINE = 120


def readme_manage_commands() -> list[str]:
    """Every shell line of the README's ```sh blocks that runs manage.py, continuation lines
    joined and trailing comments dropped."""
    text = (ROOT / "README.md").read_text()
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if "manage.py" in line:
                commands.append(line)
    return commands


def clean_env(var_dir: Path, **extra) -> dict:
    """What a new login shell has: PATH, HOME, a locale, and no Relay variable."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        "RELAY_VAR_DIR": str(var_dir),
    }
    env.update(extra)
    return env


def run_interactive(command: str, env: dict, answers: dict[str, str]) -> tuple[int, str]:
    """Run `command` on a terminal, answering each prompt that contains a key of `answers`."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the command, in a shell, on the terminal
        os.chdir(ROOT)
        os.execve("/bin/sh", ["/bin/sh", "-c", command], env)  # noqa: S606
    output, pending = "", ""
    deadline = time.monotonic() + COMMAND_DEADLINE
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 1)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 4096).decode(errors="replace")
            except OSError:  # the terminal closed: the command is done
                break
            if not chunk:
                break
            output += chunk
            pending += chunk
            for prompt, answer in answers.items():
                if prompt in pending:
                    os.write(fd, f"{answer}\n".encode())
                    pending = ""
                    break
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), output


@pytest.fixture
def make_run(tmp_path):
    """`make run` as the README prints it, on a free port and a fresh var/."""
    var_dir = tmp_path / "var"
    port, ws_port = free_port(), free_port()
    log = tmp_path / "make-run.log"
    make = ChildProcess(
        ["make", "run"],  # make from PATH, as the README says
        clean_env(var_dir, PORT=str(port), WS_PORT=str(ws_port)),
        log=log,
        own_group=True,  # SIGTERM reaches make and everything it started
    )
    base = f"http://127.0.0.1:{port}"
    try:
        make.wait_serving(f"{base}/healthz", what="make run to serve", deadline=START_DEADLINE)
        make.wait_serving(f"http://127.0.0.1:{ws_port}/healthz", what="make run's Daphne")
        yield var_dir, base
    finally:
        make.stop()
    startup = log.read_text()
    # A cold start says what it is doing.
    for step in ("Migrating", "Stocking the number inventory", "Starting Relay"):
        assert step in startup, startup


def test_the_readme_shows_every_operator_command():
    names = {re.search(r"manage\.py (\S+)", line).group(1) for line in readme_manage_commands()}
    assert {
        "provision_numbers",
        "seed_demo",
        "record_call",
        "seed_history",
        "createsuperuser",
        "createuser",
        "purge_expired",
        "recover_calls",
    } <= names
    assert all(line.startswith(".venv/bin/python manage.py ") for line in readme_manage_commands())


def recorded_wait(var_dir: Path, records: int) -> str:
    """A shell line the walkthrough tests put before the first history read: it waits (up to
    COMMAND_DEADLINE) until the embedded database holds `records` call records. The agent
    writes a call's record as the call ends, a moment after the caller's SIPp exits; a reader
    typing the next line never sees that moment, a script can."""
    program = (
        "import sqlite3, sys, time\n"
        "path, records, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])\n"
        "deadline = time.monotonic() + seconds\n"
        "db = sqlite3.connect(path, timeout=5)\n"
        'query = "SELECT count(*) FROM calls_call WHERE outcome IS NOT NULL"\n'
        "while db.execute(query).fetchone()[0] < records:\n"
        "    if time.monotonic() > deadline:\n"
        "        sys.exit('the call was never recorded')\n"
        "    time.sleep(0.05)\n"
    )
    arguments = (program, str(var_dir / "relay.sqlite3"), str(records), str(COMMAND_DEADLINE))
    return "python3 -c " + " ".join(map(shlex.quote, arguments))


def before_history(lines: list[str], wait: str) -> list[str]:
    """`lines` with `wait` run before the first one that reads the history (in the same
    entry, so that each printed line's output keeps its place)."""
    first = next(i for i, line in enumerate(lines) if "/api/history" in line)
    return [*lines[:first], f"{wait}\n{lines[first]}", *lines[first + 1 :]]


def run_printed(command: str, var_dir: Path, cwd: Path = ROOT) -> str:
    """Run one README line in a clean shell; its stdout, after asserting it succeeded."""
    result = subprocess.run(  # noqa: S603
        ["/bin/sh", "-c", command],
        cwd=cwd,
        env=clean_env(var_dir),
        capture_output=True,
        text=True,
        timeout=COMMAND_DEADLINE,
        check=False,
    )
    assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def test_every_readme_command_runs_as_printed_beside_make_run(make_run):
    var_dir, base = make_run
    # make run's var/ is its user's alone: the database, the secret key, the static files,
    # the Redis socket (issue 53).
    assert_private(var_dir)
    assert (var_dir / "relay.sqlite3").is_file() and (var_dir / "static").is_dir()
    # Its default ALLOWED_HOSTS serve no `testserver`: no reset link can be minted for it.
    status, refused = http(
        "POST",
        f"{base}/api/auth/password-reset",
        {"email": "demo@relay.example"},
        headers={"Host": "testserver"},
    )
    assert (status, refused["code"]) == (400, "invalid_request")
    commands = readme_manage_commands()
    # seed_demo first: the commands after it aim at the demo user and numbers it creates.
    seed = [c for c in commands if "seed_demo" in c]
    for command in seed + [c for c in commands if c not in seed]:
        if "createsuperuser" in command:
            code, output = run_interactive(
                command,
                clean_env(var_dir),
                {
                    "Email": "staff@example.com",
                    "Password (again)": "a-staff-passphrase-9",
                    "Password": "a-staff-passphrase-9",
                },
            )
            assert code == 0, output
            assert "Superuser created successfully" in output
        elif "createuser" in command:
            code, output = run_interactive(
                command, clean_env(var_dir), {"Password": "a-carol-passphrase-9"}
            )
            assert code == 0, output
            assert "Created carol@example.com (plan free)." in output
            assert "a-carol-passphrase-9" not in output  # the prompt does not echo it
            status, _ = http(
                "POST",
                f"{base}/api/auth/login",
                {"email": "carol@example.com", "password": "a-carol-passphrase-9"},
            )
            assert status == 200
        elif "record_call" in command:
            # The demo user's open socket hears of the call the command records: the command
            # found make run's embedded Redis with nothing exported.
            status, login = http(
                "POST",
                f"{base}/api/auth/login",
                {"email": "demo@relay.example", "password": "relay-demo-password"},
            )
            assert status == 200, login
            status, dashboard = http("GET", f"{base}/api/dashboard", token=login["token"])
            assert status == 200, dashboard
            with connect(dashboard["wsUrl"], open_timeout=10) as socket:
                socket.send(json.dumps({"type": "ping"}))
                assert json.loads(socket.recv(timeout=10))["type"] == "pong"
                run_printed(command, var_dir)
                frame = json.loads(socket.recv(timeout=10))
            assert frame["type"] == "call_record", frame
            assert (frame["number"], frame["caller_num"]) == ("+442079460001", "+447700900123")
        elif "seed_demo" in command:
            assert "+442079460001" in run_printed(command, var_dir)
        else:
            run_printed(command, var_dir)


def readme_block_after(heading: str, document: str = "README.md", nth: int = 0) -> list[str]:
    """The lines of the first (or `nth`) ```sh block after `heading` in `document`,
    continuations joined, comments dropped."""
    text = (ROOT / document).read_text()
    section = text.split(heading, 1)[1]
    block = re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)[nth]
    joined = re.sub(r"\\\n\s*", " ", block)
    return [re.sub(r"\s+#.*$", "", line).strip() for line in joined.splitlines() if line.strip()]


def printed_sipp(line: str, tmp_path: Path, var_dir: Path, name: str, **ports) -> ChildProcess:
    """A printed `sipp ...` line in a clean shell, in the background, its printed ports
    (`ports`: printed -> free) moved."""
    for printed, free in ports.items():
        line = line.replace(printed, free)
    return ChildProcess(
        ["/bin/sh", "-c", line], clean_env(var_dir), log=tmp_path / f"{name}.out", own_group=True
    )


def sip_make_run(line: str, tmp_path: Path, var_dir: Path, *, trunk: str) -> tuple:
    """A printed `... make run` of TELEPHONY_PROVIDER=sip in a clean shell, its trunk port
    (5062) moved to `trunk` and every port of its own to a free one, serving: the process,
    its HTTP port, its WebSocket port and its agent's SIP port."""
    from harness.ports import rtp_range
    from harness.sip import free_udp_port

    port, ws_port, agent = free_port(), free_port(), free_udp_port()
    make = ChildProcess(
        ["/bin/sh", "-c", line.replace("5062", trunk)],
        clean_env(
            var_dir,
            PORT=str(port),
            WS_PORT=str(ws_port),
            SIP_BIND=f"127.0.0.1:{agent}",
            RTP_PORT_RANGE=rtp_range(),
        ),
        log=tmp_path / "make-run.log",
        own_group=True,
    )
    try:
        make.wait_serving(
            f"http://127.0.0.1:{port}/healthz", what="make run to serve", deadline=START_DEADLINE
        )
        make.wait_serving(f"http://127.0.0.1:{ws_port}/healthz", what="make run's Daphne")
    except BaseException:
        make.stop()
        raise
    return make, port, ws_port, agent


@pytest.mark.skipif(
    not os.environ.get("CI") and not all(map(shutil.which, ("sipp", "espeak-ng", "sox"))),
    reason="needs sipp, espeak-ng and sox (Debian: apt-get install sip-tester espeak-ng sox)",
)
def test_the_readmes_sip_walkthrough_places_a_call_sipp_answers(tmp_path):
    from harness.sip import free_udp_port

    sipp_line, make_line, seed_line, call_line = readme_block_after("## Real calls over SIP")
    assert sipp_line.startswith("sipp ") and make_line.endswith("make run")
    # The printed ports, moved to free ones so that nothing else on the machine interferes.
    trunk, var_dir = str(free_udp_port()), tmp_path / "var"
    sipp = printed_sipp(sipp_line, tmp_path, var_dir, "sipp", **{"5062": trunk})
    try:
        make, *_ = sip_make_run(make_line, tmp_path, var_dir, trunk=trunk)
        try:
            run_printed(seed_line, var_dir)
            frames = [json.loads(line) for line in run_printed(call_line, var_dir).splitlines()]
        finally:
            make.stop()
    finally:
        sipp.stop()

    statuses = [f["status"] for f in frames if f["type"] == "call_status"]
    assert statuses == ["queued", "dialing", "ringing", "in_progress", "completed"], frames
    assert frames[-1]["duration"] >= 2


@pytest.mark.skipif(
    not os.environ.get("CI") and not all(map(shutil.which, ("sipp", "espeak-ng", "sox"))),
    reason="needs sipp, espeak-ng and sox (Debian: apt-get install sip-tester espeak-ng sox)",
)
def test_the_telephony_walkthrough_leaves_a_message_the_api_plays(tmp_path):
    from harness.sip import free_udp_port

    heading = "### Trying it: leave a message with SIPp"
    [make_line] = readme_block_after(heading, "docs/telephony.md")
    seed_line, sipp_line, *api_lines = readme_block_after(heading, "docs/telephony.md", nth=1)
    assert make_line.endswith("make run") and sipp_line.startswith("sipp ")
    assert "seed_demo" in seed_line and api_lines[-1].startswith("soxi ")
    # The printed ports, moved to free ones so that nothing else on the machine interferes.
    var_dir = tmp_path / "var"
    make, port, _, agent = sip_make_run(make_line, tmp_path, var_dir, trunk=str(free_udp_port()))
    try:
        run_printed(seed_line, var_dir)
        sipp_line = sipp_line.replace("127.0.0.1:5060", f"127.0.0.1:{agent}")
        run_printed(sipp_line.replace("-p 5070", f"-p {free_udp_port()}"), var_dir)
        # The API lines in one shell, as typed one after another, where message.wav may land.
        wait = recorded_wait(var_dir, DEMO_RECORDS + 1)
        script = "\n".join(before_history(api_lines, wait))
        script = script.replace("localhost:8000", f"127.0.0.1:{port}")
        output = run_printed(f"set -e\n{script}", var_dir, cwd=tmp_path)
    finally:
        make.stop()

    listed, seconds = output.rsplit("}", 1)  # curl prints the JSON without a newline
    record = json.loads(listed + "}")["history"][0]
    assert (record["status"], record["caller_num"]) == ("answered", "+447700900123")
    assert record["recording_url"] == f"/api/history/{record['id']}/recording"
    assert abs(record["recording_seconds"] - float(seconds)) < 0.1
    assert 6.5 <= float(seconds) <= 8  # SIPp's 7 s of speech


def invitation_wait(log: Path) -> str:
    """A shell command that waits (up to COMMAND_DEADLINE) for an invitation's mail in `make
    run`'s log and prints its token, the link's last part: what a reader copies from there.
    The worker sends the mail a moment after the invitation's request; a reader never sees
    that moment, a script can."""
    program = (
        "import re, sys, time\n"
        "path, seconds = sys.argv[1], int(sys.argv[2])\n"
        "deadline = time.monotonic() + seconds\n"
        "link = re.compile(r'/invitations/([0-9a-f]{32}\\.[A-Za-z0-9_-]+)')\n"
        "while not (found := link.findall(open(path, errors='replace').read())):\n"
        "    if time.monotonic() > deadline:\n"
        "        sys.exit('no invitation was mailed')\n"
        "    time.sleep(0.05)\n"
        "print(found[-1])\n"
    )
    arguments = (program, str(log), str(COMMAND_DEADLINE))
    return "python3 -c " + " ".join(map(shlex.quote, arguments))


def test_the_sharing_walkthrough_runs_as_printed_against_make_run(make_run, tmp_path):
    """The README's "Sharing a number": the owner's lines, the token read from the mail in
    `make run`'s log as the text says, then the member's lines, in one shell."""
    var_dir, base = make_run
    port = base.rsplit(":", 1)[1]
    heading = "## Sharing a number"
    owner_lines = readme_block_after(heading)
    member_lines = readme_block_after(heading, nth=1)
    lines = [*owner_lines, f"INVITATION=$({invitation_wait(tmp_path / 'make-run.log')})"]
    lines += [*member_lines]
    script = "\n".join(line.replace("localhost:8000", f"127.0.0.1:{port}") for line in lines)

    output = run_printed("set -e\n" + script, var_dir)

    assert '"email":"sam@example.com","role":"member","status":"invited"' in output
    assert output.count('"role":"member"') >= 3  # invited, accepted, listed
    assert '"missedCallEmail":true' in output
    total = re.findall(r'"total":(\d+)', output)
    assert total and int(total[-1]) > 0, output[-500:]  # the demo number's calls, shared


def test_the_quickstart_runs_as_printed_against_make_run(make_run):
    """docs/quickstart.md after `make run`: the curl lines, examples/quickstart.py and the
    JavaScript socket example, in one shell as a reader types them."""
    var_dir, base = make_run
    text = (ROOT / "docs/quickstart.md").read_text()
    make_block, *blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL)
    assert make_block.strip() == "make run"
    port = base.rsplit(":", 1)[1]
    lines = []
    for line in "\n".join(blocks).splitlines():
        if line.startswith(".venv/bin/python examples/quickstart.py"):
            line += f" --base {base}"
        elif "examples/quickstart-socket.mjs" in line:
            line = f"RELAY_BASE={base} {line}"
        lines.append(line.replace("localhost:8000", f"127.0.0.1:{port}"))
    assert any("quickstart-socket.mjs" in line for line in lines)
    output = run_printed("set -e\n" + "\n".join(lines), var_dir)

    assert '"number":"+44' in output  # the curl lines took a number
    assert '"callId":"first-call"' in output
    python_part, js_part = output.split("calling +442079460123 from", 1)[1].split(
        "calling +442079460123 as quickstart-js-", 1
    )
    states = ["queued", "dialing", "ringing", "in_progress", "completed"]
    for part in (python_part, js_part):
        shown = [line.strip().split()[0] for line in part.splitlines() if line.startswith("  ")]
        assert shown == states, part


@pytest.mark.skipif(
    not os.environ.get("CI") and not all(map(shutil.which, ("sipp", "espeak-ng", "sox"))),
    reason="needs sipp, espeak-ng and sox (Debian: apt-get install sip-tester espeak-ng sox)",
)
def test_the_forwarding_walkthrough_bridges_the_caller_to_the_owners_phone(tmp_path):
    from harness.sip import free_udp_port

    heading = "### Trying it: forward a call to SIPp"
    [owner_line] = readme_block_after(heading, "docs/telephony.md")
    [make_line] = readme_block_after(heading, "docs/telephony.md", nth=1)
    seed_line, *api_lines = readme_block_after(heading, "docs/telephony.md", nth=2)
    assert owner_line.startswith("sipp ") and make_line.endswith("make run")
    assert "seed_demo" in seed_line and any(line.startswith("sipp ") for line in api_lines)
    # The printed ports, moved to free ones so that nothing else on the machine interferes.
    trunk, var_dir = str(free_udp_port()), tmp_path / "var"
    owner = printed_sipp(
        owner_line,
        tmp_path,
        var_dir,
        "owner-sipp",
        **{"5062": trunk, "6100": str(free_udp_port(4))},
    )
    try:
        make, port, _, agent = sip_make_run(make_line, tmp_path, var_dir, trunk=trunk)
        try:
            run_printed(seed_line, var_dir)
            # The rest in one shell, as typed one after another; each line's output apart.
            wait = recorded_wait(var_dir, DEMO_RECORDS + 1)
            script = (
                "\necho; echo @@@\n".join(before_history(api_lines, wait))
                .replace("localhost:8000", f"127.0.0.1:{port}")
                .replace("127.0.0.1:5060", f"127.0.0.1:{agent}")
                .replace("-p 5070", f"-p {free_udp_port()}")
                .replace("-mp 6200", f"-mp {free_udp_port(4)}")
            )
            outputs = run_printed(f"set -e\n{script}", var_dir).split("@@@\n")
            assert owner.proc.wait(timeout=30) == 0, "the owner's SIPp saw a call fail"
        finally:
            make.stop()
    finally:
        owner.stop()

    put = next(i for i, line in enumerate(api_lines) if line.startswith("curl -s -X PUT"))
    assert json.loads(outputs[put]) == {
        "targets": ["+441134960200"],
        "ringSeconds": 20,
        "screening": False,
        "callerId": "caller",
    }
    record = json.loads(outputs[-1])["history"][0]
    assert (record["status"], record["answered_by"], record["forwarded_to"]) == (
        "answered",
        "forward",
        "+441134960200",
    )
    assert record["caller_num"] == "+447700900123"
    assert 4 <= record["duration"] <= 7, record


def test_the_reminder_walkthrough_reads_the_digit_back(make_run):
    """docs/voice-apps.md's first walkthrough: examples/reminder.py after `make run`."""
    var_dir, base = make_run
    heading = "## Walkthrough: an appointment reminder, with the digit read back"
    [line] = readme_block_after(heading, "docs/voice-apps.md")
    assert line == ".venv/bin/python examples/reminder.py"

    output = run_printed(f"{line} --base {base}", var_dir)

    shown = [line.strip() for line in output.splitlines() if line.startswith("  ")]
    assert shown == [
        "queued",
        "dialing",
        "ringing",
        "in_progress",
        "pressed 1 (numDigits)",
        "completed",
    ], output


@pytest.mark.skipif(
    not os.environ.get("CI") and not all(map(shutil.which, ("sipp", "espeak-ng", "sox"))),
    reason="needs sipp, espeak-ng and sox (Debian: apt-get install sip-tester espeak-ng sox)",
)
def test_the_menu_walkthrough_answers_sipp_with_the_numbers_script(tmp_path):
    from harness.sip import free_udp_port

    heading = "## Walkthrough: a number's menu, with SIPp as the caller"
    [make_line] = readme_block_after(heading, "docs/voice-apps.md")
    seed_line, *lines = readme_block_after(heading, "docs/voice-apps.md", nth=1)
    assert make_line.endswith("make run") and "seed_demo" in seed_line
    assert any(line.startswith("sipp ") for line in lines)
    var_dir = tmp_path / "var"
    make, port, _, agent = sip_make_run(make_line, tmp_path, var_dir, trunk=str(free_udp_port()))
    try:
        run_printed(seed_line, var_dir)
        # The rest in one shell, as typed one after another; each line's output apart.
        wait = recorded_wait(var_dir, DEMO_RECORDS + 1)
        script = (
            "\necho; echo @@@\n".join(before_history(lines, wait))
            .replace("localhost:8000", f"127.0.0.1:{port}")
            .replace("127.0.0.1:5060", f"127.0.0.1:{agent}")
            .replace("-p 5070", f"-p {free_udp_port()}")
        )
        outputs = run_printed(f"set -e\n{script}", var_dir).split("@@@\n")
    finally:
        make.stop()

    put = next(i for i, line in enumerate(lines) if line.startswith("curl -s -X PUT"))
    assert json.loads(outputs[put])["script"][0]["gather"]["numDigits"] == 1
    record = json.loads(outputs[-1])["history"][0]
    assert (record["status"], record["answered_by"]) == ("answered", "app")
    assert record["caller_num"] == "+447700900123"
