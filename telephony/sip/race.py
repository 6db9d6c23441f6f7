"""Racing awaitables: the first to finish wins, and every other is cancelled, however the
wait itself ends (a timeout, or the waiting task cancelled)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Collection


async def race(
    *racers: Awaitable, timeout: float | None = None, keep: Collection[asyncio.Future] = ()
) -> list[asyncio.Future]:
    """Wait until the first of `racers` finishes, or `timeout` seconds pass; then cancel every
    one not finished but those in `keep` (futures the caller goes on with). The racers as
    futures, in order: `won(f)` says which finished with a result."""
    futures = [asyncio.ensure_future(racer) for racer in racers]
    try:
        await asyncio.wait(futures, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in futures:
            if future not in keep:
                future.cancel()
    return futures


def won(future: asyncio.Future) -> bool:
    """Whether `future` finished with a result (not cancelled, not failed)."""
    return future.done() and not future.cancelled() and future.exception() is None
