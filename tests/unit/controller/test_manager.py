"""Manager: readiness, running the controllers, leader election wiring."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from kinformer.controller.manager import Manager
from kinformer.listwatch import ListOptions, ListResult, WatchEvent


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
    mgr.informer("configmaps")
    try:
        await asyncio.wait_for(mgr.run(), 10)
    except Exception:
        pass  # ending run() with a sync-timeout error is an acceptable fix too
    assert not mgr.ready()
