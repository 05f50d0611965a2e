"""mgr.client: reads from the informer caches (selectors, indexes), writes to the server, reads its own writes."""

from __future__ import annotations

import asyncio

import pytest

import kinformer as ki
from kinformer.cache.factory import SharedInformerFactory
from kinformer.controller import metrics
from kinformer.testing.faultproxy import FaultProxy
from testlib import configmap, running, wait_until

NS = "default"


def _labelled(name: str, app: str, **data: str) -> dict:
    body = configmap(name, **data)
    body["metadata"]["labels"] = {"app": app}
    return body


async def test_reads_come_from_the_cache(kube_client) -> None:
    for name, app in (("a", "web"), ("b", "web"), ("c", "db")):
        await kube_client.create("configmaps", _labelled(name, app, owner=f"team-{app}"), namespace=NS)
    await kube_client.create("configmaps", configmap("elsewhere", ns="kube-system"), namespace="kube-system")
    mgr = ki.Manager(kube_client)
    mgr.add_index("configmaps", "data.owner", lambda cm: [(cm.get("data") or {}).get("owner", "")])
    try:
        obj = await mgr.client.get("configmaps", "a", NS)  # starts the informer and waits for its sync
        informer = mgr.informer("configmaps")
        assert informer.has_synced() and obj is informer.indexer.get_by_key("default/a")
        with pytest.raises(ki.NotFound, match='configmaps "nope" not found'):
            await mgr.client.get("configmaps", "nope", NS)
        names = lambda result: sorted(o["metadata"]["name"] for o in result.items)  # noqa: E731
        assert names(await mgr.client.list("configmaps", NS, label_selector="app=web")) == ["a", "b"]
        in_system = names(await mgr.client.list("configmaps", field_selector="metadata.namespace=kube-system"))
        assert "elsewhere" in in_system and "a" not in in_system
        assert names(await mgr.client.list("configmaps", NS, field_selector="data.owner=team-db")) == ["c"]
        web = await mgr.client.list("configmaps", NS, field_selector="data.owner!=team-db,metadata.name!=b")
        assert [n for n in names(web) if n in "abc"] == ["a"]
        # writes go to the server; the cache follows
        created = await mgr.client.create("configmaps", configmap("d"), namespace=NS)
        assert created["metadata"]["resourceVersion"]
        await wait_until(lambda: informer.indexer.get_by_key("default/d") is not None, what="cache has d")
        # every other verb is the API client's
        assert (await mgr.client.resolve("cm")).plural == "configmaps"
    finally:
        await mgr.factory.shutdown()


async def test_a_write_is_remembered_without_decoding_the_answer(kube_client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Telling a ``Status`` answer from an object reads only the answer's head: a controller creating hundreds of
    pods decodes none of the created pods it never reads."""
    from kinformer.client import objects
    from kinformer.controller.cached_client import track_writes

    mgr = ki.Manager(kube_client)
    informer = mgr.factory.informer("configmaps")
    mgr.factory.start()
    try:
        await mgr.factory.wait_for_cache_sync()
        decodes: list[object] = []
        loads = objects._loads
        monkeypatch.setattr(objects, "_loads", lambda raw: decodes.append(raw) or loads(raw))
        with track_writes() as writes:
            created = await mgr.client.create("configmaps", configmap("undecoded"), namespace=NS)
        assert decodes == []
        assert [(w.key, w.resource_version) for w in writes] == [(f"{NS}/undecoded",
                                                                  created["metadata"]["resourceVersion"])]
        assert writes[0].informer is informer
    finally:
        await mgr.factory.shutdown()


async def test_each_write_verb_has_one_writer_calling_the_api_clients_method_of_the_moment(
        kube_client, monkeypatch: pytest.MonkeyPatch) -> None:
    """``mgr.client.patch`` is the same writer at every access (made once per verb); it calls the API client's
    method as it is when called, so a replaced method is the one used."""
    mgr = ki.Manager(kube_client)
    try:
        writer = mgr.client.patch
        assert mgr.client.patch is writer and writer.__name__ == "patch"
        assert writer.__doc__ == kube_client.patch.__doc__ and mgr.client.create is not writer
        calls: list[tuple] = []

        async def fake_patch(resource, *args, **kwargs):
            calls.append((resource, args, kwargs))
            return {"kind": "Status"}

        monkeypatch.setattr(kube_client, "patch", fake_patch)
        assert await mgr.client.patch("configmaps", "a", {"data": {}}, namespace=NS) == {"kind": "Status"}
        assert calls == [("configmaps", ("a", {"data": {}}), {"namespace": NS})]
    finally:
        await mgr.factory.shutdown()


async def test_next_reconcile_waits_for_its_own_writes(kube_server, kube_client) -> None:
    """The cache lags the server by a delaying proxy; every reconcile still sees its previous write."""
    seen: list[tuple[int, int]] = []  # (count the reconcile saw, count it had written before)
    written = {"n": 0}

    class Counter(ki.ObjectReconciler):
        async def reconcile(self, obj) -> ki.Result:
            count = int(obj["data"]["count"])
            seen.append((count, written["n"]))
            if count >= 5:
                return ki.Result()
            await self.client.patch("configmaps", obj["metadata"]["name"], {"data": {"count": str(count + 1)}},
                                    namespace=NS)
            written["n"] = count + 1
            return ki.Result(requeue=True)  # reconciled again at once (5 ms), long before the watch delivers

    await kube_client.create("configmaps", configmap("cm", count="0"), namespace=NS)
    async with FaultProxy.for_url(kube_server.url) as proxy, ki.Client(proxy.url) as slow:
        factory = SharedInformerFactory(slow)
        mgr = ki.Manager(kube_client, factory=factory)
        builder = mgr.controller(Counter(), name="ryow").for_("configmaps")
        before = metrics.READ_YOUR_WRITES.labels("ryow", "waited")._value.get()
        async with running(mgr):
            proxy.delay = 0.2  # every watch event now reaches the cache 0.2 s after the write
            await wait_until(lambda: seen and seen[-1][0] == 5, what="count reaches 5")
        stats = builder.controller.stats
    assert all(count >= prior for count, prior in seen), seen
    assert stats.waited_for_writes >= 1
    assert metrics.READ_YOUR_WRITES.labels("ryow", "waited")._value.get() > before


async def test_a_filtered_for_waits_for_its_own_writes(kube_server, kube_client) -> None:
    """With a label selector on ``for_`` the next reconcile still sees its previous write (a write that keeps
    the object inside the filter), and a write that moves the object out of the filter is never followed by a
    reconcile of the state from before it."""
    seen: list[tuple[str, int, int]] = []  # (name, count the reconcile saw, count it had written before)
    written: dict[str, int] = {}

    class Counter(ki.ObjectReconciler):
        async def reconcile(self, obj) -> ki.Result:
            name, count = obj["metadata"]["name"], int(obj["data"]["count"])
            seen.append((name, count, written.get(name, 0)))
            # "stay" counts to 5 inside the filter; "leave" counts once and leaves it with the same write
            labels = {"app": "counter" if name == "stay" else "gone"}
            if count >= 5:
                return ki.Result()
            await self.client.patch("configmaps", name, {"metadata": {"labels": labels},
                                                         "data": {"count": str(count + 1)}}, namespace=NS)
            written[name] = count + 1
            return ki.Result(requeue=True)  # reconciled again at once (5 ms), long before the watch delivers

    for name in ("stay", "leave"):
        await kube_client.create("configmaps", _labelled(name, "counter", count="0"), namespace=NS)
    async with FaultProxy.for_url(kube_server.url) as proxy, ki.Client(proxy.url) as slow:
        mgr = ki.Manager(kube_client, factory=SharedInformerFactory(slow))
        builder = mgr.controller(Counter(), name="ryow-filtered").for_("configmaps", label_selector="app=counter")
        before = metrics.READ_YOUR_WRITES.labels("ryow-filtered", "waited")._value.get()
        async with running(mgr):
            proxy.delay = 0.2  # every watch event now reaches the cache 0.2 s after the write
            await wait_until(lambda: ("stay", 5, 5) in seen and builder.controller.stats.skipped_deleted,
                             what="stay counts to 5 and leave is gone from the cache")
        stats = builder.controller.stats
    assert all(count >= prior for _, count, prior in seen), seen
    assert [entry for entry in seen if entry[0] == "leave"] == [("leave", 0, 0)]  # never again after leaving
    assert stats.waited_for_writes >= 2
    assert metrics.READ_YOUR_WRITES.labels("ryow-filtered", "waited")._value.get() > before


async def test_the_next_reconcile_after_a_delete_waits_until_the_object_is_gone(kube_server, kube_client) -> None:
    """A delete that removes the object at once (the server answers a Status) is a write to wait for too."""
    seen: list[str] = []

    class Deleter(ki.Reconciler):
        async def reconcile(self, request: ki.Request) -> ki.Result:
            try:
                await mgr.client.get("configmaps", request.name, request.namespace)
            except ki.NotFound:
                seen.append("gone")
                return ki.Result()
            seen.append("present")
            await mgr.client.delete("configmaps", request.name, request.namespace)
            return ki.Result(requeue=True)  # reconciled again at once (5 ms), long before the watch delivers

    await kube_client.create("configmaps", configmap("doomed"), namespace=NS)
    async with FaultProxy.for_url(kube_server.url) as proxy, ki.Client(proxy.url) as slow:
        mgr = ki.Manager(kube_client, factory=SharedInformerFactory(slow))
        mgr.controller(Deleter(), name="ryow-delete").for_("configmaps", field_selector="metadata.name=doomed")
        async with running(mgr):
            proxy.delay = 0.2  # every watch event now reaches the cache 0.2 s after the write
            await wait_until(lambda: "gone" in seen, what="the reconcile that finds it gone")
    assert seen[:2] == ["present", "gone"] and seen.count("present") == 1, seen  # later: its delete event


async def test_waiting_for_writes_is_bounded(kube_client) -> None:
    from kinformer.controller.cached_client import PendingWrite, wait_for_writes

    informer = ki.SharedInformerFactory(kube_client).informer("configmaps")
    never = PendingWrite(informer, "default/none", "999999")
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert not await wait_for_writes([never], 0.1)
    assert loop.time() - start < 5


async def test_writes_are_awaited_only_where_an_informer_can_see_them(kube_client) -> None:
    from kinformer.controller.cached_client import track_writes

    mgr = ki.Manager(kube_client, namespace=NS)
    informer = mgr.informer("configmaps")  # watches "default" only
    web = mgr.informer("configmaps", label_selector="app=web")
    named = mgr.informer("v1/configmaps", field_selector="metadata.name=seen")
    try:
        with track_writes() as writes:
            await mgr.client.create("configmaps", _labelled("seen", "web"), namespace=NS)
            await mgr.client.create("configmaps", configmap("unseen", ns="kube-system"), namespace="kube-system")
            await mgr.client.create("secrets", {"metadata": {"name": "s", "namespace": NS}}, namespace=NS)
            await mgr.client.create("configmaps", configmap("plain"), namespace=NS)
            await mgr.client.create("configmaps", configmap("dry"), namespace=NS, dry_run=True)  # changes nothing
        # every informer of the resource in that namespace, filtered or not; no secrets informer
        assert {(w.informer, w.key, w.visible) for w in writes} == {
            (informer, "default/seen", True), (web, "default/seen", True), (named, "default/seen", True),
            (informer, "default/plain", True), (web, "default/plain", False), (named, "default/plain", False)}
    finally:
        await mgr.factory.shutdown()


async def test_a_write_that_leaves_a_filter_is_reached_when_the_object_is_dropped(kube_client) -> None:
    """Outside the filter the object never comes back with the write's version: its removal is the sign."""
    from kinformer.controller.cached_client import PendingWrite

    factory = SharedInformerFactory(kube_client, namespace=NS)
    web = factory.informer("configmaps", label_selector="app=web")
    await kube_client.create("configmaps", _labelled("moving", "web"), namespace=NS)
    async with factory.running():
        await factory.wait_for_cache_sync(timeout=15)
        assert web.indexer.get_by_key("default/moving") is not None
        moved = await kube_client.patch("configmaps", "moving", {"metadata": {"labels": {"app": "db"}}},
                                        namespace=NS)
        left = PendingWrite(web, "default/moving", moved["metadata"]["resourceVersion"], visible=False)
        await wait_until(lambda: web.indexer.get_by_key("default/moving") is None, what="moving dropped")
        assert left.reached()
        assert PendingWrite(web, "default/other", "999999999", visible=False).reached()  # never in the cache
        assert not PendingWrite(web, "default/other", "999999999").reached()  # visible: not there yet


async def test_reads_never_come_from_a_filtered_or_metadata_only_informer(kube_client) -> None:
    await kube_client.create("configmaps", _labelled("full", "db", key="value"), namespace=NS)
    mgr = ki.Manager(kube_client)
    web = mgr.informer("configmaps", label_selector="app=web")
    meta = mgr.informer("configmaps", metadata_only=True)
    try:
        obj = await mgr.client.get("configmaps", "full", NS)
        assert obj["data"] == {"key": "value"}
        assert await mgr.client.informer_for("configmaps") not in (web, meta)
    finally:
        await mgr.factory.shutdown()


async def test_a_write_after_a_new_informer_is_awaited_there_too(kube_client) -> None:
    """The informers a write is awaited in are looked up once per resource and namespace while the factory makes
    no new informer; one made later is counted from the next write on."""
    from kinformer.controller.cached_client import track_writes

    mgr = ki.Manager(kube_client, namespace=NS)
    informer = mgr.informer("configmaps")
    try:
        with track_writes() as writes:
            await mgr.client.create("configmaps", configmap("first"), namespace=NS)
            await mgr.client.create("configmaps", configmap("second"), namespace=NS)
            web = mgr.informer("configmaps", label_selector="app=web")
            await mgr.client.create("configmaps", _labelled("third", "web"), namespace=NS)
        assert mgr.factory.informer_count == 2
        assert [(w.informer, w.key) for w in writes] == [
            (informer, "default/first"), (informer, "default/second"), (informer, "default/third"),
            (web, "default/third")]
    finally:
        await mgr.factory.shutdown()


async def test_a_reconcile_whose_previous_writes_are_cached_counts_in_cache(kube_client) -> None:
    seen: list[str] = []

    class Once(ki.ObjectReconciler):
        async def reconcile(self, obj) -> ki.Result:
            if obj["metadata"]["name"] == "once" and obj["data"]["count"] == "0":
                await self.client.patch("configmaps", "once", {"data": {"count": "1"}}, namespace=NS)
            seen.append(obj["data"].get("count", ""))
            return ki.Result()

    await kube_client.create("configmaps", configmap("once", count="0"), namespace=NS)
    mgr = ki.Manager(kube_client, namespace=NS)
    mgr.controller(Once(), name="ryow-in-cache").for_("configmaps")
    child = metrics.READ_YOUR_WRITES.labels("ryow-in-cache", "in_cache")
    before = child._value.get()
    async with running(mgr):
        await wait_until(lambda: "1" in seen, what="the write reconciled")  # its event: in the cache first
    assert child._value.get() == before + 1
