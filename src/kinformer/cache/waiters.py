"""Futures parked on a list and woken together: the wake-up primitive of the cache's queues and listeners.

A waiter parks on a fresh future in a list; the producer resolves every future of the list at once. A
cancelled waiter leaves the list; waking never raises.
"""

from __future__ import annotations

import asyncio

__all__ = ["park", "wake_all"]


def wake_all(waiters: list[asyncio.Future[None]]) -> list[asyncio.Future[None]]:
    """Resolve every waiter; returns the new (empty) waiter list."""
    for fut in waiters:
        if not fut.done():
            fut.set_result(None)
    return []


async def park(waiters: list[asyncio.Future[None]]) -> None:
    """Wait on a new future in ``waiters`` until woken (it leaves the list however the wait ends)."""
    fut = asyncio.get_running_loop().create_future()
    waiters.append(fut)
    try:
        await fut
    finally:
        if fut in waiters:
            waiters.remove(fut)
