"""An informer against a broken or hostile API server over loopback: a list response that never ends, a
garbage BOOKMARK, a watch that goes silent. The informer must never wedge: its cache converges."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web

import kinformer as ki
from kinformer.cache.resource_version import is_sane_resource_version
from kinformer.cache.shared_informer import SharedIndexInformer
from kinformer.client.discovery import Resource
from testlib import cm, wait_until

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")


class HostileServer:
    """Serves ConfigMaps in "default". The first list sends half a body then hangs; the first watch sends a
    BOOKMARK at resourceVersion "-5" and then nothing at all; later watches send what changed, then go
    silent too. Any request at a resourceVersion that is not a number is refused with 400, as kube does."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.rv = 0
        self.lists: list[str | None] = []
        self.watches: list[str | None] = []
        self.changed = asyncio.Event()

    def put(self, obj: dict[str, Any]) -> None:
        self.rv += 1
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.rv)}}
        self.objects[obj["metadata"]["name"]] = obj
        self.changed.set()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        rv = request.query.get("resourceVersion")
        if rv not in (None, "") and not rv.isdigit():
            status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 400,
                      "reason": "BadRequest", "message": f"invalid resource version {rv!r}"}
            return web.json_response(status, status=400)
        if request.query.get("watch") == "true":
            self.watches.append(rv)
            return await self._watch(request, int(rv or 0))
        self.lists.append(rv)
        if len(self.lists) == 1:
            resp = web.StreamResponse(headers={"Content-Type": "application/json"})
            await resp.prepare(request)
            await resp.write(b'{"kind":"ConfigMapList","apiVersion":"v1","metadata":{},"items":[')
            await asyncio.Event().wait()  # never ends
        body = {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": str(self.rv)},
                "items": list(self.objects.values())}
        return web.Response(body=orjson.dumps(body), content_type="application/json")

    async def _watch(self, request: web.Request, since: int) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        if len(self.watches) == 1:
            bookmark = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"resourceVersion": "-5"}}
            await resp.write(orjson.dumps({"type": "BOOKMARK", "object": bookmark}) + b"\n")
        while True:
            for obj in list(self.objects.values()):
                if int(obj["metadata"]["resourceVersion"]) > since:
                    await resp.write(orjson.dumps({"type": "ADDED", "object": obj}) + b"\n")
                    since = int(obj["metadata"]["resourceVersion"])
            if len(self.watches) == 1:
                await asyncio.Event().wait()  # the first watch goes silent for good
            self.changed.clear()
            await self.changed.wait()


@pytest.fixture
async def hostile() -> AsyncIterator[tuple[HostileServer, str]]:
    server = HostileServer()
    app = web.Application()
    app.router.add_get("/api/v1/namespaces/default/configmaps", server.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield server, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_informer_survives_a_hung_list_a_garbage_bookmark_and_a_silent_watch(
        hostile: tuple[HostileServer, str], caplog: pytest.LogCaptureFixture) -> None:
    server, url = hostile
    server.put(cm("a"))
    caplog.set_level(logging.WARNING, logger="kinformer")
    async with ki.Client(url, list_timeout=0.5) as client:
        inf = SharedIndexInformer(client.lister_watcher(CONFIGMAPS, namespace="default"), name="cms",
                                  watch_idle_timeout=0.5)
        inf.start()
        try:
            assert await inf.wait_for_sync(10)  # the hung first list timed out and was retried
            await wait_until(lambda: inf.stats.reflector.bad_resource_versions == 1)
            server.put(cm("b"))  # the first watch is silent: only a restarted watch can see this
            await wait_until(lambda: sorted(inf.indexer.list_keys()) == ["default/a", "default/b"])
            assert inf.stats.reflector.idle_watch_restarts >= 1
            assert inf.cache_resource_version == "2"
        finally:
            await inf.stop()
    sent = [rv for rv in server.lists + server.watches if rv]
    assert sent and all(is_sane_resource_version(rv) for rv in sent)
    messages = [r.getMessage() for r in caplog.records]
    assert any("no complete response within 0.5s (attempt 1 of 3); retrying" in m for m in messages)
    assert any("invalid resourceVersion '-5'" in m for m in messages)
    assert any("delivered nothing" in m for m in messages)
