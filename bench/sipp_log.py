"""SIPp's message log (its `-trace_msg` file), read back: which INVITEs SIPp received and when,
and each call as SIPp, the callee, saw it. This is text parsing alone, with no process, socket or
database behind it, which is why it sits apart from bench/sip.py; the SIP scenarios and
bench/forward.py read their SIPps' logs through it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

SIPP_STAMP = re.compile(r"^-{20,} (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Invite:
    at: float  # when SIPp received it, epoch seconds
    sender: str  # the Via's host:port, which tells the agents apart


def _messages(message_log: Path):
    """(when, received, text) of each message in SIPp's log, in order: `when` in epoch
    seconds, from SIPp's stamp of the machine's local wall clock, which datetime reads back
    as local time; `received` False for what SIPp sent."""
    if not message_log.exists():
        return
    parts = SIPP_STAMP.split(message_log.read_text(errors="replace"))
    for stamp, block in zip(parts[1::2], parts[2::2], strict=True):
        at = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").astimezone().timestamp()
        yield at, "message received" in block, block


def _header(name: str, block: str) -> str | None:
    found = re.search(rf"^{name}:\s*(.+?)\s*$", block, re.MULTILINE | re.IGNORECASE)
    return found.group(1) if found else None


def invites(message_log: Path) -> dict[str, Invite]:
    """Call-ID -> the first INVITE of that call SIPp received."""
    found: dict[str, Invite] = {}
    for at, received, block in _messages(message_log):
        if not received or "\nINVITE sip:" not in block:
            continue
        call_id = _header("Call-ID", block)
        via = re.search(r"^Via:\s*SIP/2\.0/\w+\s+([^;\s]+)", block, re.MULTILINE | re.IGNORECASE)
        if call_id and call_id not in found:
            found[call_id] = Invite(at, via.group(1) if via else "?")
    return found


def invites_received(message_log: Path) -> int:
    """Every INVITE SIPp received, retransmissions included."""
    return sum(1 for _, received, block in _messages(message_log)
               if received and "\nINVITE sip:" in block)  # fmt: skip


@dataclass
class Dialog:
    """One call as SIPp, the callee, saw it (epoch seconds)."""

    media_port: int | None = None  # the agent's RTP port, from its INVITE's SDP
    answered: float | None = None  # SIPp's first 200 OK to the INVITE
    bye: float | None = None  # the agent's BYE


def _answers_invite(block: str) -> bool:
    cseq = re.search(r"^CSeq:\s*\d+\s+INVITE", block, re.MULTILINE | re.IGNORECASE)
    return "\nSIP/2.0 200" in block and cseq is not None


def dialogs(message_log: Path) -> dict[str, Dialog]:
    """Call-ID -> when SIPp answered it and received its BYE, and the agent's RTP port."""
    out: dict[str, Dialog] = {}
    for at, received, block in _messages(message_log):
        call_id = _header("Call-ID", block)
        if call_id is None:
            continue
        dialog = out.setdefault(call_id, Dialog())
        if received and "\nINVITE sip:" in block and dialog.media_port is None:
            media = re.search(r"^m=audio (\d+) ", block, re.MULTILINE)
            dialog.media_port = int(media.group(1)) if media else None
        elif received and "\nBYE sip:" in block and dialog.bye is None:
            dialog.bye = at
        elif not received and dialog.answered is None and _answers_invite(block):
            dialog.answered = at
    return out


def requests(message_log: Path, method: str) -> dict[str, str]:
    """Call-ID -> the first `method` request of that call SIPp received, as text (what
    sip_ring_group reads the CANCELs' Reason from)."""
    found: dict[str, str] = {}
    for _, received, block in _messages(message_log):
        if received and f"\n{method} sip:" in block:
            call_id = _header("Call-ID", block)
            if call_id and call_id not in found:
                found[call_id] = block
    return found


def first_sent(message_log: Path, method: str) -> dict[str, float]:
    """Call-ID -> when SIPp first sent a `method` request in that call, epoch seconds (its
    retransmissions left out): sip_transfer's REFERs from the phone."""
    found: dict[str, float] = {}
    for at, received, block in _messages(message_log):
        if not received and re.search(rf"^{method} \S+ SIP/2\.0", block, re.MULTILINE):
            call_id = _header("Call-ID", block)
            if call_id and call_id not in found:
                found[call_id] = at
    return found
