"""Wakeups: the requests a component feeds its own controller, each key waiting once until taken."""

from __future__ import annotations

import asyncio

import kinformer as ki
from kinformer.cluster.wakeups import Wakeups


async def test_wakeups_queue_a_key_once_until_it_is_taken() -> None:
    wakeups = Wakeups()
    for _ in range(1000):
        wakeups.add("default", "web")
    wakeups.add("default", "db")
    assert len(wakeups) == 2  # bounded by the distinct keys, not by the events
    taken = aiter(wakeups)
    async with asyncio.timeout(5):
        assert [await anext(taken), await anext(taken)] == [ki.Request("default", "web"), ki.Request("default", "db")]
    wakeups.add("default", "web")
    async with asyncio.timeout(5):
        assert await anext(taken) == ki.Request("default", "web")

