"""Several hosts on one machine (issue 42): Linux network namespaces, each with an address of
its own on a bridge the test creates, stand in for hosts.

Nothing leaves that sandbox: the bridge has no route out and no host's namespace has a route
but the bridge's subnet. The machine's PostgreSQL and Redis listen on its 127.0.0.1 only, which
no namespace reaches; `Forwarder` relays the bridge's own address to them, as a real site's
hosts reach a database host. Creating namespaces takes root (`ip netns`): `sandbox_missing()`
says why a machine cannot, for a skip outside CI.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

IP = "/usr/sbin/ip"


def sandbox_missing() -> str | None:
    """Why this machine cannot make the sandbox, or None when it can."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces (ip netns); CI runs as root"
    if not Path(IP).exists():
        return "needs iproute2's ip (Debian: apt-get install iproute2)"
    if not shutil.which("ss"):
        return "needs iproute2's ss"
    return None


def run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")
    return done.stdout


@dataclass
class Host:
    """A namespace with one address on the bridge."""

    name: str
    namespace: str
    address: str

    def command(self, argv: list[str]) -> list[str]:
        """`argv` run inside this host (`ip netns exec` execs it: the pid is the command's)."""
        return [IP, "netns", "exec", self.namespace, *argv]

    def udp_listening(self, port: int) -> bool:
        out = run(IP, "netns", "exec", self.namespace, "ss", "-Hlun", f"sport = :{port}")
        return bool(out.strip())

    def tcp_listening(self, port: int) -> bool:
        out = run(IP, "netns", "exec", self.namespace, "ss", "-Hltn", f"sport = :{port}")
        return bool(out.strip())


class Sandbox:
    """A bridge with address .1 of a /24 of 10.77.0.0/16 (one per test process, so that xdist
    workers never share one), and a namespace per host name, addresses .10 and up."""

    def __init__(self, names: list[str]):
        tag = os.getpid() % 100_000
        subnet = 10 + os.getpid() % 240
        self.bridge = f"rlbr{tag}"
        self.gateway = f"10.77.{subnet}.1"
        self.hosts = {
            name: Host(name, f"relay-{tag}-{name}", f"10.77.{subnet}.{10 + index}")
            for index, name in enumerate(names)
        }
        self._veths: list[str] = []
        try:
            self._create(subnet)
        except Exception:
            self.destroy()
            raise

    def _create(self, subnet: int) -> None:
        run(IP, "link", "add", self.bridge, "type", "bridge")
        run(IP, "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        run(IP, "link", "set", self.bridge, "up")
        for index, host in enumerate(self.hosts.values()):
            run(IP, "netns", "add", host.namespace)
            veth = f"{self.bridge[:9]}v{index}"
            run(IP, "link", "add", veth, "type", "veth", "peer", "name", "eth0",
                "netns", host.namespace)  # fmt: skip
            self._veths.append(veth)
            run(IP, "link", "set", veth, "master", self.bridge)
            run(IP, "link", "set", veth, "up")
            inside = [IP, "netns", "exec", host.namespace, IP]
            run(*inside, "addr", "add", f"{host.address}/24", "dev", "eth0")
            run(*inside, "link", "set", "eth0", "up")
            run(*inside, "link", "set", "lo", "up")

    def destroy(self) -> None:
        """Every namespace, veth and the bridge gone; what is already gone is no error."""
        for host in self.hosts.values():
            with contextlib.suppress(RuntimeError):
                run(IP, "netns", "del", host.namespace)
        for veth in self._veths:  # gone with their peers' namespaces, unless a process held one
            with contextlib.suppress(RuntimeError):
                run(IP, "link", "del", veth)
        with contextlib.suppress(RuntimeError):
            run(IP, "link", "del", self.bridge)


class Forwarder:
    """TCP from `listen` (host, port) to `target` (host, port), a thread per direction of each
    connection, until close()."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int]):
        self.target = target
        self.server = socket.create_server(listen, reuse_port=False)
        self.server.settimeout(0.2)
        self.closed = threading.Event()
        self.connections: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            client.settimeout(None)
            self.connections += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.closed.set()
        self.server.close()
        for connection in self.connections:
            with contextlib.suppress(OSError):
                connection.close()
