"""RealFIFO (client-go 1.33 the_real_fifo.go): every delta delivered, in order."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kinformer.cache import DeletedFinalStateUnknown, Delta, DeltaType, FIFOClosed, Indexer
from kinformer.cache.real_fifo import RealFIFO

ADDED, UPDATED, DELETED, REPLACED, SYNC = (DeltaType.ADDED, DeltaType.UPDATED, DeltaType.DELETED,
                                          DeltaType.REPLACED, DeltaType.SYNC)
WAIT = 5.0


def obj(name: str, rv: str = "1") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}


async def drain(fifo: RealFIFO) -> list[tuple[DeltaType, str, bool]]:
    out: list[tuple[DeltaType, str, bool]] = []

    def process(deltas: list[Delta], initial: bool) -> None:
        assert len(deltas) == 1
        out.append((deltas[0].type, fifo.key_of(deltas[0].object), initial))

    while len(fifo):
        await asyncio.wait_for(fifo.pop(process), WAIT)
    return out


async def test_every_delta_in_arrival_order() -> None:
    fifo = RealFIFO()
    fifo.add(obj("a"))
    fifo.add(obj("b"))
    fifo.update(obj("a", "2"))
    fifo.delete(obj("a", "2"))
    fifo.delete(obj("a", "2"))  # not merged
    assert len(fifo) == 5
    assert fifo.list_keys() == ["ns/a", "ns/b"]
    assert [d.type for d in fifo.get_by_key("ns/a")] == [ADDED, UPDATED, DELETED, DELETED]
    assert [(t, k) for t, k, _ in await drain(fifo)] == [
        (ADDED, "ns/a"), (ADDED, "ns/b"), (UPDATED, "ns/a"), (DELETED, "ns/a"), (DELETED, "ns/a")]
    assert fifo.get_by_key("ns/a") is None


async def test_replace_tombstones_then_replaced_and_initial_population() -> None:
    known = Indexer()
    gone = obj("gone")
    known.add(gone)
    known.add(obj("stay"))
    fifo = RealFIFO(known_objects=known)
    fifo.replace([obj("stay", "2"), obj("new")], "5")
    assert fifo.get_by_key("ns/gone") == [Delta(DELETED, DeletedFinalStateUnknown("ns/gone", gone))]
    assert not fifo.has_synced()
    seen = await drain(fifo)
    assert seen == [(DELETED, "ns/gone", True), (REPLACED, "ns/stay", True), (REPLACED, "ns/new", True)]
    assert fifo.has_synced()


def test_replace_skips_keys_already_deleted_in_queue() -> None:
    fifo = RealFIFO(known_objects=Indexer())
    queued = obj("q", "3")
    fifo.add(obj("q"))
    fifo.update(queued)
    fifo.add(obj("d"))
    fifo.delete(obj("d"))
    fifo.replace([], "9")
    assert [d.type for d in fifo.get_by_key("ns/q")] == [ADDED, UPDATED, DELETED]
    assert fifo.get_by_key("ns/q")[-1].object == DeletedFinalStateUnknown("ns/q", queued)
    assert [d.type for d in fifo.get_by_key("ns/d")] == [ADDED, DELETED]


def test_resync_skips_queued_keys() -> None:
    known = Indexer()
    known.add(obj("a"))
    known.add(obj("b"))
    fifo = RealFIFO(known_objects=known)
    fifo.update(obj("b", "2"))
    fifo.resync()
    assert [d.type for d in fifo.get_by_key("ns/a")] == [SYNC]
    assert [d.type for d in fifo.get_by_key("ns/b")] == [UPDATED]


async def test_close_and_waiting() -> None:
    fifo = RealFIFO()
    task = asyncio.create_task(fifo.pop(lambda d, i: None))
    await asyncio.sleep(0)
    fifo.add(obj("a"))
    assert [d.type for d in await asyncio.wait_for(task, WAIT)] == [ADDED]
    fifo.close()
    with pytest.raises(FIFOClosed):
        await asyncio.wait_for(fifo.pop(lambda d, i: None), WAIT)


def test_pop_ready_processes_what_is_queued_as_pop_would_up_to_the_limit() -> None:
    fifo = RealFIFO()
    fifo.replace([obj("a"), obj("b")], "1")
    fifo.update(obj("a", "2"))
    seen: list[tuple[DeltaType, str, bool, bool]] = []

    def process(deltas: list[Delta], initial: bool) -> None:
        assert len(deltas) == 1
        key = fifo.key_of(deltas[0].object)
        seen.append((deltas[0].type, key, initial, fifo.has_synced()))
        if key == "ns/b" and deltas[0].type is UPDATED:
            raise RuntimeError("handler bug")

    assert fifo.pop_ready(process, 2) == 2 and len(fifo) == 1
    assert fifo.has_synced()  # the initial population was processed
    assert seen == [(REPLACED, "ns/a", True, False), (REPLACED, "ns/b", True, False)]
    assert fifo.pop_ready(process, 10) == 1 and seen[-1] == (UPDATED, "ns/a", False, True)
    assert fifo.pop_ready(process, 10) == 0
    fifo.update(obj("b", "3"))
    fifo.update(obj("a", "4"))
    with pytest.raises(RuntimeError):
        fifo.pop_ready(process, 10)
    assert fifo.list_keys() == ["ns/a"] and not fifo._in_flight  # the failed delta left flight; the next stays


async def test_an_idle_fifo_hands_deltas_to_its_direct_consumer_and_queues_behind_a_backlog() -> None:
    known: Indexer[Any] = Indexer()
    fifo = RealFIFO(known_objects=known)
    direct: list[tuple[DeltaType, str]] = []

    def consume(deltas: list[tuple[DeltaType, Any]]) -> None:  # as the informer: the cache first
        for kind, o in deltas:
            known.delete(o) if kind is DELETED else known.add(o)
            direct.append((kind, fifo.key_of(o)))

    fifo.set_direct(consume)
    fifo.replace([], "1")  # an empty first list: populated and synced at once
    fifo.add(obj("early"))
    assert direct == [(ADDED, "ns/early")] and len(fifo) == 0
    fifo.replace([obj("a"), obj("b")], "1")  # a relist queues; what follows must not overtake it
    fifo.update(obj("a", "2"))
    fifo.delete(obj("b"))
    assert len(direct) == 1 and len(fifo) == 5  # tombstone for ns/early, 2 Replaced, Updated, Deleted
    assert [(t, k) for t, k, _ in await drain(fifo)] == [
        (DELETED, "ns/early"), (REPLACED, "ns/a"), (REPLACED, "ns/b"), (UPDATED, "ns/a"), (DELETED, "ns/b")]
    fifo.update(obj("a", "3"))
    fifo.delete(obj("a", "3"))
    assert direct[1:] == [(UPDATED, "ns/a"), (DELETED, "ns/a")] and len(fifo) == 0
    fifo.set_direct(None)
    fifo.add(obj("c"))
    assert len(direct) == 3 and len(fifo) == 1


def test_a_fifo_before_its_initial_population_is_processed_queues_even_with_a_direct_consumer() -> None:
    fifo = RealFIFO()
    direct: list[Any] = []
    fifo.set_direct(direct.extend)
    fifo.replace([obj("a")], "1")
    fifo.update(obj("a", "2"))  # the initial list is not processed yet: has_synced must wait for it first
    assert not direct and len(fifo) == 2 and not fifo.has_synced()
    assert fifo.pop_ready(lambda d, i: None, 10) == 2 and fifo.has_synced()
    fifo.close()
    fifo.update(obj("a", "3"))  # closed: nothing more goes around the queue
    assert not direct


async def test_a_watch_batch_goes_to_the_direct_consumer_in_one_call_or_is_queued_in_order() -> None:
    fifo = RealFIFO()
    calls: list[list[tuple[DeltaType, Any]]] = []
    fifo.set_direct(calls.append)
    fifo.replace([obj("a")], "1")  # the initial list is queued: the batch must wait behind it
    batch = [(UPDATED, obj("a", "2")), (ADDED, obj("b", "3")), (DELETED, obj("a", "4"))]
    assert not fifo.add_watch_deltas(batch) and not calls
    assert await drain(fifo) == [(REPLACED, "ns/a", True), (UPDATED, "ns/a", False), (ADDED, "ns/b", False),
                                 (DELETED, "ns/a", False)]
    later = [(ADDED, obj("c", "5")), (UPDATED, obj("c", "6"))]
    assert not fifo.add_watch_deltas(later) and calls == [later] and len(fifo) == 0  # idle: one call


def test_a_keyless_object_in_a_queued_batch_is_rejected_and_the_rest_queued() -> None:
    fifo = RealFIFO()
    keyless = {"metadata": {"namespace": "ns"}}
    rejected = fifo.add_watch_deltas([(ADDED, obj("a")), (ADDED, keyless), (UPDATED, obj("a", "2"))])
    assert [(kind, type(exc)) for kind, exc in rejected] == [(ADDED, ValueError)]
    assert [d.type for d in fifo.get_by_key("ns/a") or []] == [ADDED, UPDATED] and len(fifo) == 2


def test_the_per_event_producers_raise_for_an_object_without_a_key() -> None:
    fifo = RealFIFO()
    with pytest.raises(ValueError):
        fifo.add({"metadata": {"namespace": "ns"}})
    fifo.update(obj("a"))
    assert fifo.list_keys() == ["ns/a"] and len(fifo) == 1
