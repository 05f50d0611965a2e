"""Multi-namespace informers: one watch per namespace, one merged cache, relists scoped to their namespace,
synced once every namespace listed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

import kinformer
from kinformer import errors
from kinformer.cache.fake import FakeClient
from kinformer.cache.multi_namespace import MultiNamespaceListerWatcher, NamespaceScopedStore
from kinformer.cache.real_fifo import RealFIFO
from kinformer.clock import FakeClock
from kinformer.listwatch import ListOptions, ListResult, WatchEvent
from testlib import cm, direct_batches, wait_until


async def test_one_informer_over_two_namespaces_merges_their_objects() -> None:
    client = FakeClient()
    src = client.source("configmaps")
    for ns in ("a", "b", "c"):
        src.create(cm(f"x-{ns}", ns=ns, app="web"))
    factory = kinformer.SharedInformerFactory(client, watch_idle_timeout=None)
    inf = factory.informer("configmaps", namespaces=["b", "a", "a"])
    assert factory.informer("configmaps", namespaces={"a", "b"}) is inf
    assert inf.name == "configmaps[namespaces=a,b]"
    assert sorted(call[1] for call in client.calls) == ["a", "b"]
    seen: list[str] = []
    inf.add_event_handler(on_add=lambda o: seen.append(o["metadata"]["name"]))
    async with factory.running():
        assert await inf.wait_for_sync(5)
        assert sorted(inf.indexer.list_keys()) == ["a/x-a", "b/x-b"]
        src.create(cm("y-b", ns="b"))
        src.create(cm("y-c", ns="c"))
        src.create(cm("y-a", ns="a"))
        await wait_until(lambda: sorted(seen) == ["x-a", "x-b", "y-a", "y-b"])
        assert sorted(o["metadata"]["name"] for o in inf.lister().list(namespace="b")) == ["x-b", "y-b"]
        assert sorted(o["metadata"]["name"] for o in inf.lister().list(label_selector="app=web")) == ["x-a", "x-b"]
        # each namespace's watch saw its own events only: the cache has reached the lower of their RVs
        assert inf.stats.reflector.lists == 2 and inf.cache_resource_version == "4"


async def test_a_namespace_relist_tombstones_only_its_own_keys_and_sync_waits_for_every_namespace() -> None:
    client = FakeClient()
    src = client.source("configmaps")
    src.create(cm("keep-b", ns="b"))
    src.create(cm("gone-a", ns="a"))
    clock = FakeClock()
    lw = MultiNamespaceListerWatcher({ns: client.lister_watcher("configmaps", namespace=ns) for ns in ("a", "b")})
    src.fail_next_list(errors.ServerError("down"))  # the first namespace's first list fails
    inf = kinformer.SharedIndexInformer(lw, clock=clock, watch_idle_timeout=None)
    deleted: list[str] = []
    inf.add_event_handler(on_delete=lambda o: deleted.append(o.key))
    inf.start()
    try:
        await wait_until(lambda: inf.stats.reflector.lists == 2)
        assert not inf.has_synced() and not await inf.wait_for_sync(0.1)  # b listed, a not yet
        await clock.wait_for_waiters(1)
        clock.step(2)  # a's backoff
        assert await inf.wait_for_sync(5)
        assert sorted(inf.indexer.list_keys()) == ["a/gone-a", "b/keep-b"]
        src.delete("gone-a", "a")
        src.compact()
        src.break_watches()  # both re-watch from an RV now compacted: 410, both relist after a backoff
        for _ in range(4):  # a backoff before the re-watch (410) and one before the relist
            await wait_until(lambda: inf.stats.reflector.relists == 2 or clock.waiters >= 2)
            if inf.stats.reflector.relists == 2:
                break
            clock.step(70)
        await wait_until(lambda: inf.stats.reflector.relists == 2, what="both namespaces relisted")
        await wait_until(lambda: sorted(inf.indexer.list_keys()) == ["b/keep-b"])
        await wait_until(lambda: deleted == ["a/gone-a"], what="the handler (it lags the cache)")
    finally:
        await inf.stop()


def test_multi_namespace_lister_watcher_needs_two_namespaces() -> None:
    with pytest.raises(ValueError):
        MultiNamespaceListerWatcher({"a": FakeClient().lister_watcher("configmaps", namespace="a")})
    with pytest.raises(ValueError):
        kinformer.SharedInformerFactory(FakeClient()).informer("configmaps", namespaces=[])


class BatchLW:
    """One namespace's source: lists nothing at RV 10; its watch delivers the batches given to :meth:`push`."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.batches: asyncio.Queue[list[WatchEvent]] = asyncio.Queue()
        self.rv = 10

    def push(self, *names: str) -> None:
        batch = []
        for name in names:
            self.rv += 1
            obj = cm(name, ns=self.namespace)
            obj["metadata"]["resourceVersion"] = str(self.rv)
            batch.append(WatchEvent("ADDED", obj))
        self.batches.put_nowait(batch)

    async def list(self, options: ListOptions) -> ListResult:
        return ListResult([], "10")

    async def watch(self, options: ListOptions) -> AsyncIterator[WatchEvent]:
        raise AssertionError("watch() used although watch_batches() is offered")
        yield  # pragma: no cover

    async def watch_batches(self, options: ListOptions) -> AsyncIterator[list[WatchEvent]]:
        while True:
            yield await self.batches.get()


async def test_each_namespace_watch_batch_reaches_the_informer_in_one_call() -> None:
    sources = {ns: BatchLW(ns) for ns in ("a", "b")}
    inf = kinformer.SharedIndexInformer(MultiNamespaceListerWatcher(sources), clock=FakeClock(),
                                        watch_idle_timeout=None)
    direct_calls = direct_batches(inf)
    seen: list[str] = []
    inf.add_event_handler(on_add=lambda o: seen.append(o["metadata"]["name"]))
    inf.start()
    try:
        assert await inf.wait_for_sync(5)
        sources["a"].push("x", "y", "z")
        await wait_until(lambda: len(seen) == 3)
        sources["b"].push("u", "v")
        await wait_until(lambda: len(seen) == 5)
        assert direct_calls == [3, 2] and seen == ["x", "y", "z", "u", "v"]  # one call per batch, in order
        assert sorted(inf.indexer.list_keys()) == ["a/x", "a/y", "a/z", "b/u", "b/v"]
        assert inf.cache_resource_version == "12"  # the lower of the two watches' RVs
    finally:
        await inf.stop()


def test_a_scoped_store_offers_the_batch_call_only_when_its_queue_has_one() -> None:
    fifo = RealFIFO()
    assert NamespaceScopedStore(fifo, "a").add_watch_deltas == fifo.add_watch_deltas
    delta_fifo = kinformer.SharedIndexInformer(FakeClient().lister_watcher("configmaps"), use_delta_fifo=True)._fifo
    assert getattr(NamespaceScopedStore(delta_fifo, "a"), "add_watch_deltas", None) is None  # one call per delta
