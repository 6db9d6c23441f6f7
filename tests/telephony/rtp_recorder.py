"""A socket of a test's that stands for a phone's audio port: it keeps every RTP packet
Relay sends it (tests/telephony/test_answering_machines.py, test_hold.py)."""

from __future__ import annotations

import socket
import threading
import time

from harness.sip import free_udp_port


class Recorder:
    """A UDP socket that keeps each RTP packet Relay sends it: (arrival, payload type,
    payload), on a thread of its own."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", free_udp_port()))
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.packets: list[tuple[float, int, bytes]] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.is_set():
            try:
                data = self.sock.recv(2048)
            except TimeoutError:
                continue
            if len(data) > 12:
                self.packets.append((time.time(), data[1] & 0x7F, data[12:]))

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(5)
        self.sock.close()

    def bursts(self) -> list[list[tuple[float, int, bytes]]]:
        """The packets in runs without a gap of a second: each run a stretch Relay spoke (a
        busy machine may hold up Relay's sender for a moment within one)."""
        runs: list[list] = []
        for packet in self.packets:
            if runs and packet[0] - runs[-1][-1][0] < 1.0:
                runs[-1].append(packet)
            else:
                runs.append([packet])
        return runs
