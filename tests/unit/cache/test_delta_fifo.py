"""DeltaFIFO semantics (client-go delta_fifo.go), in asyncio form."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinformer.cache import DeletedFinalStateUnknown, Delta, DeltaFIFO, DeltaType, FIFOClosed, Indexer
from kinformer.cache.delta_fifo import YIELD_EVERY
from kinformer.cache.real_fifo import RealFIFO

ADDED, UPDATED, DELETED, REPLACED, SYNC = (DeltaType.ADDED, DeltaType.UPDATED, DeltaType.DELETED,
                                          DeltaType.REPLACED, DeltaType.SYNC)
WAIT = 5.0  # bound on every wait in these tests


def obj(name: str, rv: str = "1", namespace: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": rv}}


def types(deltas: list[Delta] | None) -> list[DeltaType]:
    assert deltas is not None
    return [d.type for d in deltas]


async def pop(fifo: DeltaFIFO) -> list[Delta]:
    return await asyncio.wait_for(fifo.pop(lambda deltas, initial: None), WAIT)


def apply_to(indexer: Indexer):
    """A process function that keeps ``indexer`` in step, like the informer does."""

    def process(deltas: list[Delta], _initial: bool) -> None:
        for d in deltas:
            if d.type is DELETED:
                indexer.delete(d.object)
            else:
                indexer.update(d.object)

    return process


class HeldProcess:
    """A process function that sets ``entered``, then waits for ``release`` before applying to the indexer."""

    def __init__(self, indexer: Indexer) -> None:
        self.entered, self.release = asyncio.Event(), asyncio.Event()
        self._apply = apply_to(indexer)

    async def __call__(self, deltas: list[Delta], initial: bool) -> None:
        self.entered.set()
        await self.release.wait()
        self._apply(deltas, initial)


# ------------------------------------------------------------------------------------------ basics


async def test_per_key_ordered_deltas_in_fifo_order() -> None:
    fifo = DeltaFIFO()
    fifo.add(obj("a"))
    fifo.add(obj("b"))
    fifo.update(obj("a", "2"))
    fifo.delete(obj("a", "2"))
    assert fifo.list_keys() == ["ns/a", "ns/b"]
    assert len(fifo) == 2 and "ns/a" in fifo
    assert types(fifo.get_by_key("ns/a")) == [ADDED, UPDATED, DELETED]
    assert [d.object["metadata"]["resourceVersion"] for d in fifo.get(obj("a"))] == ["1", "2", "2"]
    assert [o["metadata"]["name"] for o in fifo.list()] == ["a", "b"]
    copy = fifo.get_by_key("ns/a")
    copy.clear()
    assert len(fifo.get_by_key("ns/a")) == 3  # reads return copies
    first = await pop(fifo)
    assert types(first) == [ADDED, UPDATED, DELETED]
    assert types(await pop(fifo)) == [ADDED]
    assert len(fifo) == 0 and fifo.get_by_key("ns/a") is None


def test_delta_type_values() -> None:
    assert [t.value for t in DeltaType] == ["Added", "Updated", "Deleted", "Replaced", "Sync"]
    assert DeltaType.ADDED == "Added" and isinstance(DeltaType.SYNC, str)
    assert Delta(ADDED, 1) == (ADDED, 1)


def test_delete_of_unknown_object_is_dropped() -> None:
    fifo = DeltaFIFO()
    fifo.delete(obj("ghost"))
    assert len(fifo) == 0
    known = Indexer()
    known.add(obj("cached"))
    fifo = DeltaFIFO(known_objects=known)
    fifo.delete(obj("ghost"))
    assert len(fifo) == 0
    fifo.delete(obj("cached"))
    assert types(fifo.get_by_key("ns/cached")) == [DELETED]


def test_consecutive_deletes_merge_keeping_the_real_object() -> None:
    known = Indexer()
    known.add(obj("a"))
    fifo = DeltaFIFO(known_objects=known)
    real = obj("a", "5")
    fifo.delete(real)
    fifo.delete(DeletedFinalStateUnknown("ns/a", obj("a", "1")))
    assert fifo.get_by_key("ns/a") == [Delta(DELETED, real)]

    fifo2 = DeltaFIFO(known_objects=known)
    fifo2.delete(DeletedFinalStateUnknown("ns/a", obj("a", "1")))
    fifo2.delete(real)
    assert fifo2.get_by_key("ns/a") == [Delta(DELETED, real)]

    fifo3 = DeltaFIFO(known_objects=known)
    fifo3.delete(real)
    fifo3.update(obj("a", "6"))
    fifo3.delete(obj("a", "7"))
    assert types(fifo3.get_by_key("ns/a")) == [DELETED, UPDATED, DELETED]  # only consecutive ones merge


# ------------------------------------------------------------------------------------------ replace


def test_replace_emits_replaced_and_tombstones_for_known_but_missing() -> None:
    known = Indexer()
    known.add(obj("stay"))
    gone = obj("gone", "3")
    known.add(gone)
    fifo = DeltaFIFO(known_objects=known)
    fifo.replace([obj("stay", "4"), obj("new")], "10")
    assert types(fifo.get_by_key("ns/stay")) == [REPLACED]
    assert types(fifo.get_by_key("ns/new")) == [REPLACED]
    assert fifo.get_by_key("ns/gone") == [Delta(DELETED, DeletedFinalStateUnknown("ns/gone", gone))]


def test_replace_emits_sync_when_replaced_is_off() -> None:
    fifo = DeltaFIFO(emit_delta_type_replaced=False)
    fifo.replace([obj("a")], "1")
    assert types(fifo.get_by_key("ns/a")) == [SYNC]


def test_replace_tombstones_queued_but_missing_keys() -> None:
    fifo = DeltaFIFO()  # no known objects: the queue itself is the only memory
    queued = obj("q", "2")
    fifo.add(obj("q", "1"))
    fifo.update(queued)
    fifo.replace([obj("other")], "5")
    deltas = fifo.get_by_key("ns/q")
    assert types(deltas) == [ADDED, UPDATED, DELETED]
    assert deltas[-1].object == DeletedFinalStateUnknown("ns/q", queued)


def test_replace_unwraps_queued_tombstone_and_does_not_double_delete() -> None:
    known = Indexer()
    last = obj("k", "7")
    known.add(last)
    fifo = DeltaFIFO(known_objects=known)
    fifo.replace([], "1")  # tombstone for ns/k
    fifo.replace([], "2")  # again: merges, still one deletion, object unwrapped (not a tombstone in a tombstone)
    assert fifo.get_by_key("ns/k") == [Delta(DELETED, DeletedFinalStateUnknown("ns/k", last))]

    fifo2 = DeltaFIFO(known_objects=known)
    real = obj("k", "8")
    fifo2.delete(real)
    fifo2.replace([], "3")  # last queued delta is already a real Deleted: nothing more
    assert fifo2.get_by_key("ns/k") == [Delta(DELETED, real)]


def test_replace_with_known_key_already_queued_uses_the_queued_object() -> None:
    known = Indexer()
    known.add(obj("k", "1"))
    fifo = DeltaFIFO(known_objects=known)
    fifo.update(obj("k", "2"))
    fifo.replace([], "3")
    deltas = fifo.get_by_key("ns/k")
    assert types(deltas) == [UPDATED, DELETED]
    assert deltas[-1].object.obj["metadata"]["resourceVersion"] == "2"


# ------------------------------------------------------------------------------------------ resync


def test_resync_queues_sync_for_known_keys_without_pending_deltas() -> None:
    known = Indexer()
    a, b = obj("a"), obj("b")
    known.add(a)
    known.add(b)
    fifo = DeltaFIFO(known_objects=known)
    fifo.update(obj("b", "2"))
    fifo.resync()
    assert fifo.get_by_key("ns/a") == [Delta(SYNC, a)]
    assert types(fifo.get_by_key("ns/b")) == [UPDATED]  # skipped: it has a pending delta
    fifo.resync()
    assert fifo.get_by_key("ns/a") == [Delta(SYNC, a)]  # still one: pending now


def test_resync_without_known_objects_is_a_noop() -> None:
    fifo = DeltaFIFO()
    fifo.add(obj("a"))
    fifo.resync()
    assert types(fifo.get_by_key("ns/a")) == [ADDED]


# ------------------------------------------------------------------------------------------ synced


async def test_has_synced_after_initial_items_processed() -> None:
    known = Indexer()
    known.add(obj("gone"))
    fifo = DeltaFIFO(known_objects=known)
    assert not fifo.has_synced()
    fifo.replace([obj("a"), obj("b")], "1")
    fifo.add(obj("late"))  # after the first replace: not part of the initial population
    seen: list[tuple[str, bool, bool]] = []

    def process(deltas: list[Delta], initial: bool) -> None:
        key = fifo.key_of(deltas[-1].object)
        seen.append((key, initial, fifo.has_synced()))

    for _ in range(4):
        await asyncio.wait_for(fifo.pop(process), WAIT)
    # the tombstone for "gone" counts towards the initial population; synced only after the last is processed
    assert seen == [("ns/a", True, False), ("ns/b", True, False), ("ns/gone", True, False), ("ns/late", False, True)]
    assert fifo.has_synced()


async def test_has_synced_waits_for_async_processing() -> None:
    fifo = DeltaFIFO()
    fifo.replace([obj("a")], "1")
    release = asyncio.Event()
    started = asyncio.Event()

    async def process(deltas: list[Delta], initial: bool) -> None:
        assert initial
        started.set()
        await release.wait()

    task = asyncio.create_task(fifo.pop(process))
    await asyncio.wait_for(started.wait(), WAIT)
    assert len(fifo) == 0 and not fifo.has_synced()  # popped but not processed
    release.set()
    await asyncio.wait_for(task, WAIT)
    assert fifo.has_synced()


def test_synced_at_once_when_first_operation_is_not_replace_or_list_is_empty() -> None:
    fifo = DeltaFIFO()
    fifo.add(obj("a"))
    assert fifo.has_synced()
    fifo2 = DeltaFIFO()
    fifo2.replace([], "1")
    assert fifo2.has_synced()
    fifo3 = DeltaFIFO()
    fifo3.replace([obj("a")], "1")
    fifo3.replace([], "2")  # only the first replace sets the initial population
    assert not fifo3.has_synced()


async def test_process_error_propagates_without_requeue_and_counts_as_processed() -> None:
    fifo = DeltaFIFO()
    fifo.replace([obj("a")], "1")

    def boom(deltas: list[Delta], initial: bool) -> None:
        raise RuntimeError("handler failed")

    with pytest.raises(RuntimeError, match="handler failed"):
        await asyncio.wait_for(fifo.pop(boom), WAIT)
    assert len(fifo) == 0
    assert fifo.has_synced()


# ------------------------------------------------------------------------------------------ waiting


async def test_pop_waits_for_add() -> None:
    fifo = DeltaFIFO()
    task = asyncio.create_task(pop(fifo))
    await asyncio.sleep(0)
    assert not task.done()
    fifo.add(obj("a"))
    assert types(await asyncio.wait_for(task, WAIT)) == [ADDED]


async def test_close_drains_then_raises() -> None:
    fifo = DeltaFIFO()
    waiter = asyncio.create_task(pop(fifo))
    await asyncio.sleep(0)
    fifo.close()
    with pytest.raises(FIFOClosed):
        await asyncio.wait_for(waiter, WAIT)
    assert fifo.is_closed

    fifo2 = DeltaFIFO()
    fifo2.add(obj("a"))
    fifo2.close()
    assert types(await pop(fifo2)) == [ADDED]
    with pytest.raises(FIFOClosed):
        await pop(fifo2)


async def test_cancelling_one_waiter_leaves_the_other_waiting() -> None:
    fifo = DeltaFIFO()
    first = asyncio.create_task(pop(fifo))
    second = asyncio.create_task(pop(fifo))
    await asyncio.sleep(0)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    fifo.add(obj("a"))
    assert types(await asyncio.wait_for(second, WAIT)) == [ADDED]


async def test_long_backlog_does_not_starve_other_tasks() -> None:
    fifo = DeltaFIFO()
    for i in range(YIELD_EVERY * 4):
        fifo.add(obj(f"o{i}"))
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = ticks
    while len(fifo):
        await fifo.pop(lambda deltas, initial: None)
    task.cancel()
    assert ticks - before >= 3


# ------------------------------------------------------------------------------------------ in flight


async def test_replace_while_processing_sees_the_in_flight_object() -> None:
    """An add being processed (not yet in the cache) still gets a tombstone if a relist lacks it."""
    known = Indexer()
    fifo = DeltaFIFO(known_objects=known)
    added = obj("a")
    fifo.add(added)
    slow = HeldProcess(known)
    task = asyncio.create_task(fifo.pop(slow))
    await asyncio.wait_for(slow.entered.wait(), WAIT)
    fifo.replace([], "9")
    assert fifo.get_by_key("ns/a") == [Delta(DELETED, DeletedFinalStateUnknown("ns/a", added))]
    slow.release.set()
    await asyncio.wait_for(task, WAIT)
    await asyncio.wait_for(fifo.pop(apply_to(known)), WAIT)
    assert len(known) == 0

    # a watch deletion arriving while the add is processed is queued, not dropped as unknown
    fifo.add(added)
    slow.entered.clear()
    slow.release.clear()
    task = asyncio.create_task(fifo.pop(slow))
    await asyncio.wait_for(slow.entered.wait(), WAIT)
    deleted = obj("a", "2")
    fifo.delete(deleted)
    assert fifo.get_by_key("ns/a") == [Delta(DELETED, deleted)]
    slow.release.set()
    await asyncio.wait_for(task, WAIT)
    await asyncio.wait_for(fifo.pop(apply_to(known)), WAIT)
    assert len(known) == 0


async def test_no_tombstone_for_key_whose_deletion_is_in_flight() -> None:
    known = Indexer()
    known.add(obj("a"))
    fifo = DeltaFIFO(known_objects=known)
    fifo.delete(obj("a"))
    slow = HeldProcess(known)
    task = asyncio.create_task(fifo.pop(slow))
    await asyncio.wait_for(slow.entered.wait(), WAIT)
    fifo.replace([], "9")
    fifo.resync()
    fifo.delete(obj("a"))
    assert len(fifo) == 0
    slow.release.set()
    await asyncio.wait_for(task, WAIT)
    assert len(known) == 0


async def test_end_to_end_with_indexer() -> None:
    known = Indexer()
    fifo = DeltaFIFO(known_objects=known)
    fifo.replace([obj("a"), obj("b")], "1")
    while len(fifo):
        await asyncio.wait_for(fifo.pop(apply_to(known)), WAIT)
    assert fifo.has_synced() and sorted(known.list_keys()) == ["ns/a", "ns/b"]
    fifo.update(obj("a", "2"))
    fifo.delete(obj("b"))
    fifo.replace([obj("a", "3"), obj("c")], "5")  # b already deleted in queue: merged; c new
    assert types(fifo.get_by_key("ns/a")) == [UPDATED, REPLACED]
    assert types(fifo.get_by_key("ns/b")) == [DELETED]
    while len(fifo):
        await asyncio.wait_for(fifo.pop(apply_to(known)), WAIT)
    assert sorted(known.list_keys()) == ["ns/a", "ns/c"]
    assert known.get_by_key("ns/a")["metadata"]["resourceVersion"] == "3"


# ------------------------------------------------------------------------------------------ property

fifo_ops = st.lists(st.tuples(
    st.sampled_from(["put", "remove", "put_missed", "remove_missed", "relist", "resync", "pop"]),
    st.sampled_from(["a", "b", "c", "d"]),
), max_size=40)


@pytest.mark.parametrize("fifo_class", ["delta", "real"])
@settings(max_examples=150, deadline=None)
@given(ops=fifo_ops)
async def test_cache_converges_to_source_after_relist(fifo_class: str, ops: list[tuple[str, str]]) -> None:
    """Whatever watch events were missed, a relist plus a drain makes the cache equal the source."""
    known = Indexer()
    fifo = DeltaFIFO(known_objects=known) if fifo_class == "delta" else RealFIFO(known_objects=known)
    source: dict[str, dict[str, Any]] = {}
    version = 0
    deleted_unknown: list[str] = []

    def process(deltas: list[Delta], _initial: bool) -> None:
        for d in deltas:
            if d.type is DELETED:
                if known.delete(d.object) is None and fifo_class == "delta":
                    deleted_unknown.append(fifo.key_of(d.object))
            else:
                known.update(d.object)

    for op, name in ops:
        version += 1
        key = f"ns/{name}"
        if op in ("put", "put_missed"):
            new = obj(name, str(version))
            existed = key in source
            source[key] = new
            if op == "put":
                (fifo.update if existed else fifo.add)(new)
        elif op in ("remove", "remove_missed") and key in source:
            gone = source.pop(key)
            if op == "remove":
                fifo.delete(gone)
        elif op == "relist":
            fifo.replace(list(source.values()), str(version))
        elif op == "resync":
            fifo.resync()
        elif op == "pop" and len(fifo):
            await asyncio.wait_for(fifo.pop(process), WAIT)
    fifo.replace(list(source.values()), "final")
    while len(fifo):
        await asyncio.wait_for(fifo.pop(process), WAIT)
    assert {k: known.get_by_key(k) for k in known.list_keys()} == source
    assert fifo.has_synced()
    assert deleted_unknown == []  # DeltaFIFO never reports a deletion the cache did not hold
