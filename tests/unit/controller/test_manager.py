"""Manager: readiness, running the controllers, leader election wiring."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from kinformer.cache.factory import SharedInformerFactory
from kinformer.cache.fake import FakeSource
from kinformer.client import Resource
from kinformer.clock import FakeClock
from kinformer.controller.manager import Manager
from kinformer.listwatch import ListOptions, ListResult, WatchEvent
from testlib import wait_until


class _HangingListerWatcher:
    """A ListerWatcher whose list never answers (an API server that accepts but never replies)."""

    async def list(self, options: ListOptions) -> ListResult:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def watch(self, options: ListOptions) -> AsyncIterator[WatchEvent]:
        await asyncio.Event().wait()
        yield WatchEvent("BOOKMARK", {})


class _HangingClient:
    def lister_watcher(self, resource: str, **_: Any) -> _HangingListerWatcher:
        return _HangingListerWatcher()


async def test_manager_is_not_ready_when_the_cache_sync_timed_out() -> None:
    mgr = Manager(_HangingClient(), cache_sync_timeout=0.1)
    informer = mgr.informer("configmaps")
    assert not mgr.informers_started.is_set()
    run = asyncio.create_task(mgr.run())
    # told once run() started the informers (so a wait for their sync waits for them), not before
    await asyncio.wait_for(mgr.informers_started.wait(), 10)
    assert informer.is_started
    try:
        await asyncio.wait_for(run, 10)
    except Exception:
        pass  # ending run() with a sync-timeout error is an acceptable fix too
    assert not mgr.ready()


class _SilentServer(FakeSource):
    """An API server whose watches stay open and say nothing until told (a FakeSource that knows configmaps)."""

    async def resolve(self, resource: str) -> Resource:
        return Resource("", "v1", "configmaps", "ConfigMap")


async def test_readyz_fails_when_every_reopened_watch_stays_silent() -> None:
    """A server that accepts every watch and sends nothing (no event, no bookmark): each idle reopen (1 s) is
    no news, so the staleness counted since the list grows past ``stale_after`` (3 s) and /readyz fails."""
    src = _SilentServer()
    clock = FakeClock()
    factory = SharedInformerFactory(src, clock=clock, watch_idle_timeout=1.0)
    mgr = Manager(src, factory=factory, clock=clock, stale_after=3.0, health_bind="127.0.0.1:0")
    mgr.controller(lambda request: None, name="silent").for_("configmaps")
    informer = mgr.informer("configmaps")
    task = asyncio.create_task(mgr.run())
    try:
        await wait_until(mgr.ready, what="ready")
        listed_at = clock.now()
        for _ in range(400):  # the fake clock in small steps, each idle watch closed and reopened in turn
            if len(src.watch_requests) >= 5:
                break
            clock.step(0.25)
            await asyncio.sleep(0.005)
        assert len(src.watch_requests) >= 5 and len(src.list_requests) == 1
        staleness = informer.seconds_since_last_event()
        assert staleness == clock.now() - listed_at and staleness > 3.0
        assert mgr.stale_informers() == {"configmaps": staleness}
        async with aiohttp.ClientSession() as http, http.get(f"{mgr.health_url}/readyz") as resp:
            assert resp.status == 503 and "configmaps: nothing for" in await resp.text()
        src.bookmark()  # news at last
        await wait_until(lambda: not mgr.stale_informers(), what="fresh again")
    finally:
        mgr.stop()
        await asyncio.wait_for(task, 10)
