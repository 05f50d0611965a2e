"""ProcessorListener: how a handler with plain callbacks is handed its notifications."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from kinformer.cache.processor_listener import ADD, UPDATE, Notification, ProcessorListener, callbacks_of
from kinformer.clock import FakeClock
from testlib import wait_until


class CountingEvent(threading.Event):
    def __init__(self) -> None:
        super().__init__()
        self.sets = 0

    def set(self) -> None:
        self.sets += 1
        super().set()


async def test_a_burst_reaches_a_plain_handler_in_one_hand_over_and_in_order() -> None:
    """1000 notifications queued in one turn of the loop wake the sleeping worker thread once (the GIL changes
    hands rarely), and the handler sees them in order, on its own thread."""
    seen: list[int] = []
    threads: set[int] = set()

    def on_update(old: Any, new: Any) -> None:
        seen.append(new)
        threads.add(threading.get_ident())

    listener = ProcessorListener(callbacks_of(None, None, on_update, None), 0.0, FakeClock(), "plain")
    wake = listener._wake_worker = CountingEvent()
    async with asyncio.TaskGroup() as tg:
        listener.start(tg)
        listener.enqueue(Notification(ADD, {}, None, True, 0.0))  # no on_add: delivered as nothing
        await wait_until(lambda: listener.initial_pending == 0 and listener._sleeping, what="worker asleep")
        sets = wake.sets
        for i in range(1000):
            listener.enqueue(Notification(UPDATE, i, i, False, 0.0))
        assert listener.pending == 1000
        await wait_until(lambda: len(seen) == 1000, what="the burst delivered")
        assert wake.sets == sets + 1
        assert seen == list(range(1000)) and threads and threading.get_ident() not in threads
        assert listener.pending == 0 and listener.processed == 1001
        listener.stop()


async def test_a_batch_enqueued_at_once_wakes_a_plain_handler_once_and_keeps_its_order() -> None:
    seen: list[int] = []
    listener = ProcessorListener(callbacks_of(None, None, lambda old, new: seen.append(new), None), 0.0,
                                 FakeClock(), "plain")
    wake = listener._wake_worker = CountingEvent()
    async with asyncio.TaskGroup() as tg:
        listener.start(tg)
        await wait_until(lambda: listener._sleeping, what="worker asleep")
        sets = wake.sets
        for start in range(0, 300, 100):
            listener.enqueue_all([Notification(UPDATE, i, i, False, 0.0) for i in range(start, start + 100)])
        assert listener.pending == 300
        await wait_until(lambda: len(seen) == 300, what="the batches delivered")
        assert wake.sets == sets + 1 and seen == list(range(300)) and listener.processed == 300
        listener.stop()


async def test_a_batch_enqueued_at_once_reaches_an_async_handler_in_order() -> None:
    seen: list[int] = []

    async def on_update(old: Any, new: Any) -> None:
        seen.append(new)

    listener = ProcessorListener(callbacks_of(None, None, on_update, None), 0.0, FakeClock(), "async")
    async with asyncio.TaskGroup() as tg:
        listener.start(tg)
        await wait_until(lambda: listener._waiter is not None, what="task waiting")
        listener.enqueue_all([Notification(UPDATE, i, i, False, 0.0) for i in range(5)])
        listener.enqueue_all([Notification(UPDATE, i, i, False, 0.0) for i in range(5, 8)])
        await wait_until(lambda: len(seen) == 8, what="the batches delivered")
        assert seen == list(range(8)) and listener.pending == 0
        listener.stop()
