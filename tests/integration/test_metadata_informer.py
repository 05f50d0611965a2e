"""Metadata-only informers against the embedded server: list, watch, relist and resync of PartialObjectMetadata,
listers, indexers and selectors over them, a controller on them, the last-applied transform, and the fallback
for a server that does not serve the metadata-only form."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web

import kinformer as ki
from kinformer.cache.transforms import LAST_APPLIED_ANNOTATION, strip_last_applied
from kinformer.client.discovery import Resource
from kinformer.client.objects import LazyObject
from kinformer.controller import Manager, Request
from testlib import configmap, wait_until


def partial(obj: Any) -> bool:
    return obj["kind"] == "PartialObjectMetadata" and obj["apiVersion"] == "meta.k8s.io/v1" and set(obj) == {
        "kind", "apiVersion", "metadata"}


async def test_metadata_informer_lists_watches_relists_and_resyncs(kube_client: ki.Client) -> None:
    for i in range(3):
        await kube_client.create("configmaps", configmap(f"c{i}", big="x" * 1000), namespace="default")
    factory = ki.SharedInformerFactory(kube_client, resync=1.0)
    meta = factory.informer("configmaps", metadata_only=True, namespace="default")
    full = factory.informer("configmaps", namespace="default")
    assert meta is not full and meta.name == "configmaps[namespace=default,metadata]"
    meta.add_indexers({"by_name": lambda o: [o["metadata"]["name"]]})
    seen: list[tuple[str, str, bool]] = []
    meta.add_event_handler(on_add=lambda o: seen.append(("add", o["metadata"]["name"], partial(o))),
                           on_update=lambda old, new, is_resync=False: seen.append(
                               ("resync" if is_resync else "update", new["metadata"]["name"], partial(new))))
    async with factory.running():
        assert all((await factory.wait_for_cache_sync(10)).values())
        mine = [o["metadata"]["name"] for o in meta.indexer.list() if o["metadata"]["name"].startswith("c")]
        assert all(partial(o) for o in meta.indexer.list()) and sorted(mine) == ["c0", "c1", "c2"]
        assert "data" in full.indexer.get_by_key("default/c0")
        cm = (await kube_client.get("configmaps", "c1", namespace="default")).to_dict()
        cm["metadata"]["labels"] = {"app": "web"}
        await kube_client.replace("configmaps", cm, namespace="default")
        await wait_until(lambda: ("update", "c1", True) in seen, what="a metadata-only update")
        assert [o["metadata"]["name"] for o in meta.lister().list(namespace="default", label_selector="app=web")] \
            == ["c1"]
        assert meta.indexer.by_index("by_name", "c2")[0]["metadata"]["name"] == "c2"
        await wait_until(lambda: any(kind == "resync" for kind, _, _ in seen), what="a resync")
        reflector = meta._reflector
        assert reflector is not None
        await kube_client.delete("configmaps", "c2", namespace="default")
        reflector._rv_unavailable = True  # force the next list to be a fresh one
        await reflector._list()  # a relist: a Replace of PartialObjectMetadata
        await wait_until(lambda: "default/c2" not in meta.indexer.list_keys() and "default/c1" in meta.indexer)
        assert all(partial(o) for o in meta.indexer.list())
        assert all(flag for kind, _, flag in seen)


async def test_controller_for_and_owns_metadata_only(kube_client: ki.Client) -> None:
    reconciled: list[str] = []
    mgr = Manager(kube_client)

    def reconcile(req: Request) -> None:
        obj = mgr.informer("configmaps", metadata_only=True).indexer.get_by_key(req.key)
        if obj is not None and partial(obj):
            reconciled.append(req.name)

    mgr.controller(reconcile, name="meta").for_("configmaps", metadata_only=True).owns("secrets",
                                                                                       metadata_only=True)
    owner = await kube_client.create("configmaps", configmap("owner"), namespace="default")
    task = asyncio.create_task(mgr.run())
    try:
        await wait_until(lambda: "owner" in reconciled, what="reconcile of the owner")
        reconciled.clear()
        ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"],
               "controller": True}
        await kube_client.create("secrets", {"metadata": {"name": "owned", "ownerReferences": [ref]},
                                             "stringData": {"k": "v"}}, namespace="default")
        await wait_until(lambda: "owner" in reconciled, what="the owned secret enqueues its owner")
        assert all(partial(o) for o in mgr.informer("secrets", metadata_only=True).indexer.list())
    finally:
        mgr.stop()
        await asyncio.wait_for(task, 20)


def test_strip_last_applied_drops_the_annotation_and_managed_fields() -> None:
    obj = {"kind": "PartialObjectMetadata", "metadata": {
        "name": "a", "annotations": {LAST_APPLIED_ANNOTATION: "{...}" * 100, "keep": "1"},
        "managedFields": [{"manager": "kubectl"}]}}
    for form in (obj, LazyObject(orjson.dumps(obj))):
        out = strip_last_applied(form)
        assert dict(out["metadata"]) == {"name": "a", "annotations": {"keep": "1"}}
    assert obj["metadata"]["managedFields"]  # the input is left alone
    plain = LazyObject(b'{"metadata":{"name":"b","annotations":{"keep":"1"}}}')
    assert strip_last_applied(plain) is plain
    only = strip_last_applied({"metadata": {"name": "c", "annotations": {LAST_APPLIED_ANNOTATION: "{}"}}})
    assert "annotations" not in only["metadata"]


@pytest.fixture
async def plain_server() -> AsyncIterator[str]:
    """A server that refuses the metadata-only form of lists (406) and ignores it on watches."""
    obj = {"kind": "ConfigMap", "apiVersion": "v1", "data": {"big": "x"},
           "metadata": {"name": "p", "namespace": "default", "resourceVersion": "7"}}

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") == "true":
            resp = web.StreamResponse()
            await resp.prepare(request)
            changed = {**obj, "metadata": {**obj["metadata"], "resourceVersion": "8"}}
            await resp.write(orjson.dumps({"type": "MODIFIED", "object": changed}) + b"\n")
            await asyncio.Event().wait()
        if "as=" in request.headers.get("Accept", ""):
            return web.json_response({"kind": "Status", "code": 406, "reason": "NotAcceptable",
                                      "message": "not acceptable"}, status=406)
        return web.json_response({"kind": "ConfigMapList", "apiVersion": "v1",
                                  "metadata": {"resourceVersion": "7"}, "items": [obj]})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/default/configmaps", handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    finally:
        await runner.cleanup()


async def test_server_without_the_metadata_form_is_cut_down_client_side(plain_server: str) -> None:
    async with ki.Client(plain_server) as client:
        lw = client.lister_watcher(Resource("", "v1", "configmaps", "ConfigMap"), namespace="default",
                                   metadata_only=True)
        inf = ki.SharedIndexInformer(lw, name="cms")
        inf.start()
        try:
            assert await inf.wait_for_sync(5)
            await wait_until(lambda: inf.cache_resource_version == "8", what="the watch event")
            [obj] = inf.indexer.list()
            assert partial(obj) and obj["metadata"]["name"] == "p"
        finally:
            await inf.stop()
