"""The client against the embedded API server: verbs, typed errors, pagination, watch, informers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kinformer import errors
from kinformer.cache.factory import SharedInformerFactory
from kinformer.cache.transforms import strip_managed_fields
from kinformer.client import Client, LazyObject
from kinformer.listwatch import ListOptions
from kinformer.server import APIServer
from testlib import configmap, wait_until

# No default ServiceAccount / kube-root-ca.crt: these tests count the objects of a namespace.
BARE = {"namespace_defaults": False}


@pytest.fixture
async def client(server: APIServer) -> AsyncIterator[Client]:
    async with Client(server.url) as c:
        yield c


async def test_crud_and_patch_types(client: Client) -> None:
    created = await client.create("configmaps", configmap("a", x="1"))
    assert isinstance(created, LazyObject) and created["data"] == {"x": "1"} and created.resource_version
    got = await client.get("cm", "a")
    assert got == created
    body = got.to_dict()
    body["data"]["y"] = "2"
    replaced = await client.replace("configmaps", body)
    assert replaced["data"] == {"x": "1", "y": "2"}
    merged = await client.patch("configmaps", "a", {"data": {"z": "3"}})
    assert merged["data"] == {"x": "1", "y": "2", "z": "3"}
    jsonp = await client.patch("configmaps", "a", [{"op": "remove", "path": "/data/x"}], patch_type="json")
    assert jsonp["data"] == {"y": "2", "z": "3"}
    strategic = await client.patch("configmaps", "a", {"metadata": {"labels": {"app": "w"}}}, patch_type="strategic")
    assert strategic["metadata"]["labels"] == {"app": "w"}
    applied = await client.patch("configmaps", "b", configmap("b", k="v"), patch_type="apply", field_manager="test")
    assert applied["data"] == {"k": "v"}
    with pytest.raises(ValueError):
        await client.patch("configmaps", "b", {}, patch_type="apply")
    with pytest.raises(ValueError):
        await client.patch("configmaps", "b", {}, patch_type="bogus")
    rc = await client.resource("configmaps", "default")
    assert (await rc.get("b"))["data"] == {"k": "v"}
    await rc.delete("b", propagation_policy="Background")
    with pytest.raises(errors.NotFound):
        await client.get("configmaps", "b")


async def test_typed_errors(client: Client) -> None:
    await client.create("configmaps", configmap("a"))
    with pytest.raises(errors.NotFound) as nf:
        await client.get("configmaps", "missing")
    assert nf.value.code == 404 and "missing" in nf.value.message
    with pytest.raises(errors.AlreadyExists):
        await client.create("configmaps", configmap("a"))
    stale = (await client.get("configmaps", "a")).to_dict()
    await client.patch("configmaps", "a", {"data": {"n": "1"}})
    with pytest.raises(errors.Conflict):
        await client.replace("configmaps", stale)
    with pytest.raises(errors.Invalid) as inv:
        await client.create("configmaps", configmap("Not_A_Valid_Name"))
    assert inv.value.code == 422 and inv.value.causes and inv.value.causes[0].get("field")
    with pytest.raises(errors.Conflict):
        await client.delete("configmaps", "a", preconditions={"uid": "not-the-uid"})


async def test_pagination_status_and_selectors(client: Client) -> None:
    for i in range(23):
        await client.create("configmaps", {**configmap(f"cm-{i:02d}"), "metadata": {
            "name": f"cm-{i:02d}", "labels": {"parity": "even" if i % 2 == 0 else "odd"}}})
    result = await client.list("configmaps", "default", limit=5)
    assert [o.name for o in result.items] == [f"cm-{i:02d}" for i in range(23)]
    assert result.resource_version
    odd = await client.list("configmaps", "default", label_selector="parity=odd")
    assert len(odd.items) == 11
    names = await client.list("configmaps", field_selector="metadata.name=cm-03")
    assert [o.key for o in names.items] == ["default/cm-03"]
    assert len([o async for o in client.iter_list("configmaps", "default", limit=4)]) == 23
    page = await client.list_page("configmaps", ListOptions(limit=5), "default")
    assert page.continue_ and len(page.items) == 5


async def test_status_subresource(client: Client) -> None:
    await client.create("pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                 "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    updated = await client.patch_status("pods", "p", {"status": {"phase": "Running"}})
    assert updated["status"]["phase"] == "Running"
    got = await client.get_status("pods", "p")
    assert got["status"]["phase"] == "Running"
    body = got.to_dict()
    body["status"]["phase"] = "Succeeded"
    assert (await client.replace_status("pods", body))["status"]["phase"] == "Succeeded"


async def test_watch_from_resource_version(client: Client) -> None:
    start = await client.list("configmaps", "default")
    stream = client.watch("configmaps", "default", resource_version=start.resource_version, timeout_seconds=30)
    await client.create("configmaps", configmap("w1"))
    await client.patch("configmaps", "w1", {"data": {"a": "b"}})
    await client.delete("configmaps", "w1")
    seen = []
    async for ev in stream:
        seen.append((ev.type, ev.object.name))
        if len(seen) == 3:
            break
    await stream.aclose()
    assert seen == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]


async def test_unauthorized_with_token_server() -> None:
    async with APIServer(storage="memory", tokens=["good-token"], **BARE) as s:
        async with Client(s.url, token="wrong") as bad:
            with pytest.raises(errors.Unauthorized):
                await bad.list("configmaps")
        async with Client(s.url, token="good-token") as good:
            assert (await good.list("configmaps", "default")).items == []


async def test_informer_syncs_5000_objects(server: APIServer, client: Client) -> None:
    sem = asyncio.Semaphore(32)

    async def make(i: int) -> None:
        async with sem:
            await client.create("configmaps", configmap(f"obj-{i:04d}", v=str(i)))

    await asyncio.gather(*(make(i) for i in range(5000)))
    factory = SharedInformerFactory(client)
    informer = factory.informer("configmaps")
    adds: list[str] = []
    informer.add_event_handler(on_add=lambda obj: adds.append(obj["metadata"]["name"]))
    factory.start()
    try:
        assert all((await asyncio.wait_for(factory.wait_for_cache_sync(), 60)).values())
        assert len(informer.indexer.list()) == 5000
        obj = informer.indexer.get_by_key("default/obj-0042")
        assert obj["data"] == {"v": "42"} and "managedFields" not in obj["metadata"]
        # a live change reaches the cache
        await client.patch("configmaps", "obj-0042", {"data": {"v": "changed"}})
        deadline = asyncio.get_running_loop().time() + 20
        while informer.indexer.get_by_key("default/obj-0042")["data"]["v"] != "changed":
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.02)
        deadline = asyncio.get_running_loop().time() + 20
        while len(adds) < 5000:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.02)
    finally:
        await factory.shutdown()


@pytest.mark.parametrize("metadata_only", [False, True])
async def test_default_transform_done_while_decoding_caches_what_the_transform_would(
        client: Client, metadata_only: bool) -> None:
    await client.create("configmaps", configmap("listed", v="1"), field_manager="kubectl")
    seen: list[bool] = []

    def users(obj: Any) -> Any:  # a user transform takes the plain path: decoded with managedFields, then stripped
        seen.append("managedFields" in obj["metadata"])
        return strip_managed_fields(obj)

    factories = [SharedInformerFactory(client, namespace="default", transform=t)
                 for t in (strip_managed_fields, users)]
    cut, plain = (f.informer("configmaps", metadata_only=metadata_only) for f in factories)
    for factory in factories:
        factory.start()
    try:
        for factory in factories:
            assert all((await asyncio.wait_for(factory.wait_for_cache_sync(), 30)).values())
        await client.create("configmaps", configmap("watched", v="2"), field_manager="kubectl")
        last = await client.patch("configmaps", "listed", {"data": {"v": "3"}}, field_manager="other")
        await wait_until(lambda: cut.cache_resource_version == plain.cache_resource_version == last.resource_version,
                         what="both informers at the last write")
        assert sorted(cut.indexer.list_keys()) == sorted(plain.indexer.list_keys())
        for key in plain.indexer.list_keys():
            got, want = cut.indexer.get_by_key(key), plain.indexer.get_by_key(key)
            assert got.to_json() == want.to_json() and got == want and "managedFields" not in got["metadata"]
        assert all(seen) and len(seen) >= 3  # the server does send managedFields: there was something to cut
    finally:
        for factory in factories:
            await factory.shutdown()


async def test_too_old_resource_version_is_410() -> None:
    async with APIServer(storage="memory", watch_cache_size=10, compaction_keep=5, **BARE) as s, \
            Client(s.url) as client:
        first = await client.create("configmaps", configmap("old"))
        for i in range(40):
            await client.patch("configmaps", "old", {"data": {"i": str(i)}})
        await s.compact()
        lw = client.lister_watcher("configmaps", namespace="default")
        with pytest.raises(errors.Expired):
            await lw.list(ListOptions(resource_version=first.resource_version, resource_version_match="Exact"))
        stream = lw.watch(ListOptions(resource_version=first.resource_version))
        try:
            event = await asyncio.wait_for(stream.__anext__(), 10)
        except errors.Expired:
            pass  # refused at open
        else:
            assert event.type == "ERROR" and event.object["code"] == 410
            assert errors.is_expired(errors.from_status(event.object))
        finally:
            await stream.aclose()


async def test_streaming_list_through_the_lister_watcher(client: Client) -> None:
    for i in range(5):
        await client.create("configmaps", configmap(f"s-{i}"))
    lw = client.lister_watcher("configmaps", namespace="default")
    stream = lw.watch(ListOptions(send_initial_events=True, resource_version_match="NotOlderThan",
                                  allow_watch_bookmarks=True, timeout_seconds=30))
    added: list[str] = []
    try:
        async for ev in stream:
            if ev.type == "ADDED":
                added.append(ev.object.name)
            elif ev.type == "BOOKMARK":
                annotations = ev.object["metadata"].get("annotations") or {}
                if annotations.get("k8s.io/initial-events-end") == "true":
                    assert ev.object.resource_version
                    break
    finally:
        await stream.aclose()
    assert sorted(added) == [f"s-{i}" for i in range(5)]


async def test_create_posts_to_a_subresource_of_the_named_object(client: Client) -> None:
    """``create(..., subresource=)``: client-go's Bind and Evict (POST pods/<name>/binding and .../eviction)."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "i"}]}}
    await client.create("pods", pod, "default")
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "namespace": "default"},
               "target": {"kind": "Node", "name": "node-1"}}
    status = await client.create("pods", binding, "default", subresource="binding")
    assert status["status"] == "Success"
    assert (await client.get("pods", "p", "default"))["spec"]["nodeName"] == "node-1"
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "default"}}
    await client.create("pods", eviction, "default", subresource="eviction")
    with pytest.raises(errors.NotFound):
        await client.get("pods", "p", "default")
