"""Requests a component feeds its own controller (``Builder.source``): a controller's informer handlers that
lower expectations first (the replicaset controller), a scheduler retrying pods whose binding failed, a kubelet
waking the pods of a node started again.

Invariant: a key added again before it was taken waits once (as a work queue's dirty set), so what waits is
bounded by the number of distinct keys, however many events add them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from kinformer.controller.reconcile import Request

__all__ = ["Wakeups"]


class Wakeups:
    """An async iterable of Requests for ``Builder.source``: what informer handlers enqueue themselves.

    A key added again before it was taken is not queued twice (as a work queue's dirty set), so what waits
    is bounded by the number of distinct keys, however many events the informers deliver."""

    def __init__(self) -> None:
        self._pending: dict[Request, None] = {}
        self._ready = asyncio.Event()

    def add(self, namespace: str, name: str) -> None:
        self._pending[Request(namespace, name)] = None
        self._ready.set()

    def __len__(self) -> int:
        return len(self._pending)

    async def __aiter__(self) -> AsyncIterator[Request]:
        while True:
            await self._ready.wait()
            request = next(iter(self._pending))
            del self._pending[request]
            if not self._pending:
                self._ready.clear()
            yield request
