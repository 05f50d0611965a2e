"""ensure_finalizer / remove_finalizer: resourceVersion-guarded patches that keep other controllers' finalizers."""

from __future__ import annotations

import kinformer as ki
from kinformer.errors import NotFound
from testlib import configmap

NS = "default"
MINE, THEIRS = "example.com/cleanup", "other.io/protect"


async def _finalizers(client, name: str = "cm") -> list[str]:
    return list((await client.get("configmaps", name, NS))["metadata"].get("finalizers") or [])


async def test_ensure_and_remove_keep_a_concurrently_added_finalizer(kube_client) -> None:
    stale = await kube_client.create("configmaps", configmap("cm"), namespace=NS)
    # another controller adds its finalizer after we read the object: our copy is stale
    await kube_client.patch("configmaps", "cm", {"metadata": {"finalizers": [THEIRS]}}, namespace=NS)
    assert await ki.ensure_finalizer(kube_client, "configmaps", stale, MINE)
    assert await _finalizers(kube_client) == [THEIRS, MINE]
    live = await kube_client.get("configmaps", "cm", NS)
    assert not await ki.ensure_finalizer(kube_client, "configmaps", live, MINE)  # already there: no write
    assert (await kube_client.get("configmaps", "cm", NS))["metadata"]["resourceVersion"] == \
        live["metadata"]["resourceVersion"]
    # they add a third one meanwhile; our removal (from the stale copy) keeps both of theirs
    await kube_client.patch("configmaps", "cm", {"metadata": {"finalizers": [THEIRS, MINE, "third.io/x"]}},
                            namespace=NS)
    assert await ki.remove_finalizer(kube_client, "configmaps", live, MINE)
    assert await _finalizers(kube_client) == [THEIRS, "third.io/x"]
    assert not await ki.remove_finalizer(kube_client, "configmaps", live, "absent.io/x")


async def test_removing_the_last_finalizer_of_a_deleting_object(kube_client) -> None:
    await kube_client.create("configmaps", configmap("cm"), namespace=NS)
    live = await kube_client.get("configmaps", "cm", NS)
    assert await ki.ensure_finalizer(kube_client, "configmaps", live, MINE)
    await kube_client.delete("configmaps", "cm", namespace=NS)
    deleting = await kube_client.get("configmaps", "cm", NS)
    assert deleting["metadata"].get("deletionTimestamp")
    # no new finalizers on an object being deleted
    assert not await ki.ensure_finalizer(kube_client, "configmaps", deleting, THEIRS)
    assert await ki.remove_finalizer(kube_client, "configmaps", deleting, MINE)
    try:
        await kube_client.get("configmaps", "cm", NS)
        raise AssertionError("the object should be gone once its last finalizer is removed")
    except NotFound:
        pass
    assert not await ki.remove_finalizer(kube_client, "configmaps", deleting, MINE)  # already gone


async def test_ensure_on_a_missing_object_raises(kube_client) -> None:
    try:
        await ki.ensure_finalizer(kube_client, "configmaps", configmap("nope"), MINE)
        raise AssertionError("expected NotFound")
    except NotFound:
        pass


async def test_conflict_retries_read_the_server_not_a_stale_cache(kube_server, kube_client) -> None:
    from kinformer.cache.factory import SharedInformerFactory
    from kinformer.testing.faultproxy import FaultProxy

    await kube_client.create("configmaps", configmap("cm"), namespace=NS)
    async with FaultProxy.for_url(kube_server.url) as proxy, ki.Client(proxy.url) as slow:
        mgr = ki.Manager(kube_client, factory=SharedInformerFactory(slow))
        try:
            cached = await mgr.client.get("configmaps", "cm", NS)
            proxy.stall()  # the cache sees nothing from now on
            await kube_client.patch("configmaps", "cm", {"metadata": {"finalizers": [THEIRS]}}, namespace=NS)
            assert await ki.ensure_finalizer(mgr.client, "configmaps", cached, MINE)
            op, _ = await ki.create_or_update(mgr.client, "configmaps", configmap("cm"),
                                              lambda cm: cm.setdefault("data", {}).update(v="2"))
            assert op == "updated"
        finally:
            proxy.resume()
            await mgr.factory.shutdown()
    assert await _finalizers(kube_client) == [THEIRS, MINE]
