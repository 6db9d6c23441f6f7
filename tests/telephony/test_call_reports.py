"""An outbound call's reports (on_ringing, on_answered: database writes in the agent, which
wait their turn when many calls ring at once) never hold up the call itself: the answer is
ACKed and the message plays and ends on time while a report is still under way, and the
reports still arrive in order, the outcome after them (issue 29: 200 calls at once)."""

from __future__ import annotations

import asyncio

from harness.sip import Sipp, free_udp_port
from telephony.sip.ua import UaConfig, UserAgent

MESSAGE = b"\xff" * 8000  # 1 s of mu-law silence: 50 frames


async def until(condition, *, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


async def test_a_ringing_report_still_under_way_holds_up_neither_the_answer_nor_the_message(
    tmp_path,
):
    trunk = free_udp_port()
    sipp = Sipp(tmp_path / "sipp", "uas", port=trunk, calls=1, timeout=30)  # 180, then 200
    ua = UserAgent(UaConfig(trunk_uri=f"sip:127.0.0.1:{trunk}", bind_port=free_udp_port()))
    await ua.start()
    reports: list[str] = []
    database = asyncio.Event()  # the agent's database thread, busy with other calls

    async def ringing() -> None:
        reports.append("ringing asked")
        await database.wait()
        reports.append("ringing")

    async def answered() -> None:
        reports.append("answered")

    call = ua.place(to="+442079460001", caller="+447700900123", audio={0: MESSAGE},
                    ring_timeout=10, max_seconds=30, on_ringing=ringing,
                    on_answered=answered)  # fmt: skip
    run = asyncio.ensure_future(call.run())
    try:
        # The whole message plays and the call is hung up while the ringing report waits.
        await until(lambda: "\nBYE sip:" in sipp.messages.read_text(errors="replace")
                    if sipp.messages.exists() else False, timeout=5)  # fmt: skip
        assert call.stream is not None and call.stream.sent_packets == 50
        assert reports == ["ringing asked"]  # the answer's report waits behind it
        assert not run.done()  # and so does the outcome
        database.set()
        outcome = await asyncio.wait_for(run, 5)
    finally:
        run.cancel()
        await ua.close()
        sipp.stop()
    assert reports == ["ringing asked", "ringing", "answered"]
    assert (outcome.kind, outcome.hung_up_by) == ("answered", "local")
    assert 1.0 <= outcome.duration < 1.5
