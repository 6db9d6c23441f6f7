"""telephony.sip.race: the first racer to finish wins and every other is cancelled, whatever
ends the wait."""

import asyncio

import pytest

from telephony.sip.race import race, won


async def forever():
    await asyncio.Event().wait()


async def soon(value, seconds=0.0):
    await asyncio.sleep(seconds)
    return value


async def test_the_first_to_finish_wins_and_the_rest_are_cancelled():
    slow, fast = await race(forever(), soon("key"))

    await asyncio.sleep(0)  # the cancelled racer runs to its cancellation
    assert won(fast) and fast.result() == "key"
    assert slow.cancelled() and not won(slow)


async def test_a_timeout_cancels_every_racer():
    first, second = await race(forever(), forever(), timeout=0.01)

    await asyncio.sleep(0)
    assert first.cancelled() and second.cancelled()


async def test_a_kept_future_goes_on_and_can_win_later():
    kept = asyncio.ensure_future(soon("later", 0.05))

    ended, same = await race(soon(None), kept, keep=(kept,))

    assert same is kept and won(ended) and not kept.done()
    assert await kept == "later"


async def test_the_waiter_cancelled_cancels_its_racers():
    event_wait = asyncio.ensure_future(forever())
    kept = asyncio.ensure_future(forever())
    waiter = asyncio.ensure_future(race(event_wait, kept, keep=(kept,)))
    await asyncio.sleep(0.01)

    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await asyncio.sleep(0)

    assert event_wait.cancelled()
    assert not kept.done()
    kept.cancel()


async def test_a_racer_that_failed_has_not_won():
    async def fails():
        raise OSError("the port closed")

    failed, slow = await race(fails(), forever())

    assert failed.done() and not won(failed)
    assert isinstance(failed.exception(), OSError)
    await asyncio.sleep(0)
    assert slow.cancelled()
