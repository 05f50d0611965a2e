"""ProcessorListener: how a handler with plain callbacks is handed its notifications."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from kinformer.cache.processor_listener import ADD, DELETE, UPDATE, Notification, ProcessorListener, callbacks_of
from kinformer.cache.tombstone import DeletedFinalStateUnknown
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


def _offered(accepts: Any, *notes: Notification, kinds: tuple[int, ...] = (ADD, UPDATE, DELETE),
             batch: bool = False) -> ProcessorListener:
    """A listener (never started, with callbacks for ``kinds``) offered ``notes`` (one by one, or in one batch
    through ``offer_all``): its buffer holds what ``accepts`` took."""
    def noop(*_: Any) -> None:
        return None

    callbacks = [noop if kind in kinds else None for kind in (ADD, UPDATE, DELETE)]
    listener = ProcessorListener(callbacks_of(None, *callbacks), 0.0, FakeClock(), "filtered", accepts)
    if batch:
        listener.offer_all(list(notes))
    else:
        for note in notes:
            listener.offer(note)
    return listener


@pytest.mark.parametrize("batch", [False, True], ids=["offer", "offer_all"])
def test_accepts_judges_an_update_by_its_old_or_new_object_and_a_delete_by_the_tombstones_object(batch: bool) -> None:
    """An update is kept if either side is accepted (an object leaving the filter is still seen); a
    tombstone is judged by its last known object, and kept when that is unknown."""
    def wanted(obj: Any) -> bool:
        return bool(obj.get("keep"))

    yes, no = {"keep": True}, {"keep": False}
    notes = [Notification(ADD, yes, None, False, 0.0), Notification(ADD, no, None, False, 0.0),
             Notification(UPDATE, yes, no, False, 0.0), Notification(UPDATE, no, yes, False, 0.0),
             Notification(UPDATE, no, no, False, 0.0), Notification(UPDATE, no, no, True, 0.0),
             Notification(DELETE, yes, None, False, 0.0), Notification(DELETE, no, None, False, 0.0),
             Notification(DELETE, DeletedFinalStateUnknown("k", yes), None, False, 0.0),
             Notification(DELETE, DeletedFinalStateUnknown("k", no), None, False, 0.0),
             Notification(DELETE, DeletedFinalStateUnknown("k", None), None, False, 0.0)]
    listener = _offered(wanted, *notes, batch=batch)
    assert list(listener.buffer) == [notes[i] for i in (0, 2, 3, 6, 8, 10)]
    assert listener.pending == 6 and listener.errors == 0


@pytest.mark.parametrize("batch", [False, True], ids=["offer", "offer_all"])
def test_a_notification_the_handler_has_no_callback_for_is_dropped_unjudged(batch: bool) -> None:
    """A handler of deletions alone (client-go's DeleteFunc) neither buffers nor judges adds and updates."""
    judged: list[Any] = []

    def wanted(obj: Any) -> bool:
        judged.append(obj)
        return True

    notes = [Notification(ADD, {"a": 1}, None, not batch, 0.0), Notification(UPDATE, {"u": 1}, {"u": 2}, False, 0.0),
             Notification(DELETE, {"d": 1}, None, False, 0.0)]
    listener = _offered(wanted, *notes, kinds=(DELETE,), batch=batch)
    assert list(listener.buffer) == [notes[2]] and judged == [{"d": 1}]
    assert listener.initial_pending == 0 and listener.pending == 1


def test_a_rejected_initial_add_is_not_waited_for_and_unfiltered_listeners_take_everything() -> None:
    listener = _offered(lambda obj: False, Notification(ADD, {}, None, True, 0.0))
    assert not listener.buffer and listener.initial_pending == 0
    unfiltered = ProcessorListener(callbacks_of(None, None, None, None), 0.0, FakeClock(), "all")
    assert unfiltered.offer == unfiltered.enqueue and unfiltered.offer_all == unfiltered.enqueue_all


def test_an_accepts_that_raises_is_counted_and_the_notification_delivered() -> None:
    def broken(obj: Any) -> bool:
        raise KeyError("metadata")

    note = Notification(ADD, {}, None, False, 0.0)
    listener = _offered(broken, note)
    assert list(listener.buffer) == [note] and listener.accept_errors == 1 and listener.errors == 0


def test_a_batch_is_judged_once_a_notification_in_order_and_one_accepts_fails_on_is_taken() -> None:
    """offer_all judges each notification once, in order (an update's new object only when its old one is
    rejected and differs); a failure counts once and keeps that notification, the others judged as usual."""
    judged: list[Any] = []

    def wanted(obj: Any) -> bool:
        judged.append(obj)
        if obj.get("broken"):
            raise KeyError("metadata")
        return bool(obj.get("keep"))

    yes, no, broken = {"keep": True}, {}, {"broken": True}
    notes = [Notification(ADD, no, None, False, 0.0), Notification(UPDATE, broken, yes, False, 0.0),
             Notification(UPDATE, no, yes, False, 0.0), Notification(UPDATE, yes, no, False, 0.0),
             Notification(UPDATE, no, no, True, 0.0), Notification(DELETE, yes, None, False, 0.0)]
    listener = _offered(wanted, *notes, batch=True)
    assert list(listener.buffer) == [notes[i] for i in (1, 2, 3, 5)]
    assert judged == [no, broken, no, yes, yes, no, yes]
    assert listener.accept_errors == 1 and listener.pending == 4
