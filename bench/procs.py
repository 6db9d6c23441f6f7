"""Servers the harness starts and stops itself, and the CPU/RSS figures read from them.

Ports, child processes and their start-up wait come from harness/ (ports.py, live.py), the
one place the suite and the bench share them. A server is metered as every process it is made of:
gunicorn's master and its workers, or each of runrelay's Daphne processes.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

from harness.live import ChildProcess, RelayProcess
from harness.ports import free_port

STOP_GRACE = 15.0


def raise_open_files_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (children inherit it); return it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else 1 << 20
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft


def children_cpu_seconds() -> float:
    """User + system CPU of every child this process has reaped so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def tree_cpu_seconds(roots: list[psutil.Process]) -> float:
    """User + system CPU of `roots` and every process under them, the exited ones included.

    A process that exited and was reaped counts in its parent's children_* times (a gunicorn
    worker that was replaced, in its master's), so each CPU second is counted once.
    """

    def cpu(proc: psutil.Process) -> float:
        t = proc.cpu_times()
        return t.user + t.system + t.children_user + t.children_system

    return _tree_sum(roots, cpu)


def tree_rss(roots: list[psutil.Process]) -> int:
    """Summed RSS of `roots` and every process under them (pages they share count twice)."""
    return _tree_sum(roots, lambda proc: proc.memory_info().rss)


def _tree_sum(roots: list[psutil.Process], read) -> float:
    """`read(process)` summed over `roots` and every process under them; a process that
    exited between listing and reading is skipped (its parent's children_* times have it)."""
    total = 0
    for root in roots:
        for proc in _tree(root):
            try:
                total += read(proc)
            except psutil.Error:
                continue
    return total


def _tree(root: psutil.Process) -> list[psutil.Process]:
    try:
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return [root]


class Server(ChildProcess):
    """One server command on a free port; `ready` is an HTTP path that must answer 200.
    Its CPU and RSS are its process's and its children's (gunicorn's workers)."""

    stop_grace = STOP_GRACE

    def __init__(self, name: str, argv: list[str], env: dict, *, port: int, ready: str = "/"):
        self.name = name
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.ws_base = f"ws://127.0.0.1:{port}"
        super().__init__(argv, env, log=Path(env["RELAY_VAR_DIR"]) / f"{name}-{port}.log")
        self.ps = psutil.Process(self.proc.pid)
        self.wait_serving(self.base + ready, what=f"{name} to serve {ready}")

    def cpu_seconds(self) -> float:
        return tree_cpu_seconds([self.ps])

    def rss(self) -> int:
        return tree_rss([self.ps])


class Listener:
    """One of runrelay's servers as the harness sees it: where it listens, and its processes
    (runrelay's children running `python -m <module>`, and theirs)."""

    def __init__(self, port: int, roots: list[psutil.Process]):
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.ws_base = f"ws://127.0.0.1:{port}"
        self.roots = roots

    def cpu_seconds(self) -> float:
        return tree_cpu_seconds(self.roots)

    def rss(self) -> int:
        return tree_rss(self.roots)


class Relay(RelayProcess):
    """`manage.py runrelay --no-worker`, as production runs it: gunicorn (HTTP_WORKERS sync
    workers) on `http`, WS_PROCESSES Daphne processes (relay.platform.daphne_server) on `ws`.

    The worker is left out: ws_status_push starts its own, sip_50_calls must have none, and
    elsewhere it would only poll its queue.
    """

    stop_grace = STOP_GRACE

    def __init__(self, env: dict, *, log_name: str = "runrelay"):
        var_dir = Path(env["RELAY_VAR_DIR"])
        super().__init__(var_dir, "--no-worker", environ=env, log=var_dir / f"{log_name}.log")
        children = psutil.Process(self.proc.pid).children()
        self.http = Listener(self.port, _running_module(children, "gunicorn"))
        self.ws = Listener(self.ws_port, _running_module(children, "relay.platform.daphne_server"))


def _running_module(processes: list[psutil.Process], module: str) -> list[psutil.Process]:
    """Those of `processes` started as `python -m <module>`; there must be one at least."""
    found = []
    for proc in processes:
        try:
            argv = proc.cmdline()
        except psutil.Error:
            continue
        if argv[1:3] == ["-m", module]:
            found.append(proc)
    if not found:
        raise RuntimeError(f"runrelay started no `python -m {module}`")
    return found


def daphne(name: str, app: str, env: dict) -> Server:
    port = free_port()
    # -v 0: no access log (Daphne's would also print the WebSocket token in query strings).
    argv = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "-v", "0", app]
    ready = "/healthz" if app.startswith("relay.") else "/"
    return Server(name, argv, env, port=port, ready=ready)


def gunicorn_plain(name: str, env: dict) -> Server:
    """bench/plain_urls.py's one view under gunicorn, configured as runrelay configures it
    (relay/gunicorn_conf.py, HTTP_WORKERS sync workers), on a port of its own."""
    port = free_port()
    argv = [
        sys.executable, "-m", "gunicorn", "--config", "python:relay.gunicorn_conf",
        "--bind", f"127.0.0.1:{port}", "relay.wsgi:application",
    ]  # fmt: skip
    # PUBLIC_URL: gunicorn under Relay's configuration needs it outside DEBUG (relay.serving).
    env = {
        "PUBLIC_URL": f"http://127.0.0.1:{port}",
        **env,
        "DJANGO_SETTINGS_MODULE": "bench.plain_settings",
    }
    return Server(name, argv, env, port=port, ready="/plain")


def uvicorn(name: str, app: str, env: dict) -> Server:
    port = free_port()
    argv = [
        sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port),
        "--no-access-log", "--log-level", "warning", "--lifespan", "off",
    ]  # fmt: skip
    return Server(name, argv, env, port=port)


def start_together(stack: contextlib.ExitStack, *starts) -> list:
    """Call every `start` at once (each returns a server once it serves) and return their
    servers, stopped together when `stack` closes: a server's start-up and stop are mostly
    waiting, so the run pays the slowest one instead of their sum. A start that fails is
    raised once the others are in `stack`."""
    with ThreadPoolExecutor(max_workers=len(starts)) as pool:
        futures = [pool.submit(start) for start in starts]
    stack.callback(stop_together, [f.result() for f in futures if f.exception() is None])
    return [f.result() for f in futures]


def stop_together(servers: list) -> None:
    with ThreadPoolExecutor(max_workers=max(1, len(servers))) as pool:
        for future in [pool.submit(server.stop) for server in servers]:
            future.result()


class Worker(ChildProcess):
    """`manage.py relay_worker`, for the scenarios whose calls must progress (ws_status_push)."""

    stop_grace = STOP_GRACE

    def __init__(self, env: dict):
        argv = [
            sys.executable, "manage.py", "relay_worker", "--queue-name", "default",
            "--no-reload", "--no-startup-delay", "--interval", env["WORKER_POLL_INTERVAL"],
        ]  # fmt: skip
        super().__init__(argv, env, log=Path(env["RELAY_VAR_DIR"]) / "worker.log")


def machine() -> str:
    import platform

    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = psutil.virtual_memory().total / 2**30
    return (
        f"{platform.node()}: {os.cpu_count()} cores ({cpu}), {mem:.0f} GiB RAM, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}"
    )
