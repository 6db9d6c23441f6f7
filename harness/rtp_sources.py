"""`python harness/rtp_sources.py OUT`: every distinct UDP flow this network namespace receives,
a line `source-address source-port destination-port` each, written to OUT as it is first seen,
until SIGTERM. Run inside a sandbox host (harness/netns.py) as root: it reads the packets
themselves (AF_PACKET), so it tells which address a call's audio really came from."""

import signal
import socket
import struct
import sys

ETH_P_IP = 0x0800


def main(out_path: str) -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sniffer = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IP))
    seen = set()
    with open(out_path, "a", buffering=1) as out:
        out.write("listening\n")
        while True:
            packet, (_, _, packet_type, _, _) = sniffer.recvfrom(65535)
            if packet_type == socket.PACKET_OUTGOING or len(packet) < 28:
                continue
            header_length = (packet[0] & 0x0F) * 4
            if packet[9] != socket.IPPROTO_UDP:
                continue
            source = socket.inet_ntoa(packet[12:16])
            source_port, destination_port = struct.unpack(
                "!HH", packet[header_length : header_length + 4]
            )
            flow = (source, source_port, destination_port)
            if flow not in seen:
                seen.add(flow)
                out.write(f"{source} {source_port} {destination_port}\n")


if __name__ == "__main__":
    main(sys.argv[1])
