"""The loop of the server's own controllers: a pass over a resource whenever the watch cache changes it.

Invariants: a change of any object under the controller's storage prefix or one of the other prefixes it
watches (as :meth:`CacheController._on_event` decides), or a cache reload, marks it dirty, and a dirty
controller runs one :meth:`CacheController.sync` pass; changes during a pass trigger another. A failed pass
is logged and retried after ``retry`` seconds on the store's clock. :meth:`run` ends only by cancellation
(the API server owns the task).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from ..machinery import status as st
from ..registry.apply import update_managed_fields
from ..registry.objects import ObjectStore, timestamp
from ..registry.resources import ResourceInfo
from ..storage.watchcache import CachedEvent, WatchCache

log = logging.getLogger(__name__)

__all__ = ["CacheController", "create_as", "remove_finalizer"]


async def create_as(store: ObjectStore, info: ResourceInfo, namespace: str, obj: dict[str, Any],
                    manager: str) -> dict[str, Any] | None:
    """Create ``obj`` as a control-plane component named ``manager`` would through the API: prepared,
    validated, its managedFields recorded. None when an object of that name exists already."""
    obj = store.prepare_create(info, namespace, obj)
    store.validate(info, obj)
    obj = update_managed_fields(None, obj, manager=manager, info=info, now=timestamp(store.clock))
    try:
        return await store.create(info, namespace, obj)
    except st.StatusError as e:
        if e.reason == "AlreadyExists":
            return None
        raise


async def remove_finalizer(store: ObjectStore, info: ResourceInfo, namespace: str, name: str, finalizer: str) -> bool:
    """Remove ``finalizer`` from the object (which is deleted if it was terminating and had no other); whether
    this call removed it (False when the object or the finalizer was already gone)."""
    def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
        finalizers = cur["metadata"].get("finalizers") or []
        if finalizer not in finalizers:
            return None
        rest = [f for f in finalizers if f != finalizer]
        if rest:
            cur["metadata"]["finalizers"] = rest
        else:
            cur["metadata"].pop("finalizers", None)
        return cur

    try:
        return await store.mutate(info, namespace, name, fn, raw=True) is not None
    except st.StatusError as e:
        if e.code != 404:
            raise
        return False


class CacheController:
    """Subclasses set :attr:`what` and implement :meth:`sync` (one idempotent pass)."""

    what = "controller pass"

    def __init__(self, cache: WatchCache, store: ObjectStore, prefix: str, *, also: Iterable[str] = (),
                 retry: float = 1.0) -> None:
        """``prefix`` is the resource the controller keeps; while :meth:`run` runs, a write there or under a
        prefix of ``also`` calls :meth:`_on_event` (the watch cache calls it for no other write)."""
        self.cache = cache
        self.store = store
        self.retry = retry
        self._prefix = prefix
        self._prefixes = (prefix, *also)
        self._dirty = asyncio.Event()

    def _on_event(self, prefix: str, ev: CachedEvent) -> None:
        """A write under one of the watched prefixes: a pass is due (a subclass may look closer)."""
        self._dirty.set()

    async def sync(self) -> int:
        """One pass; returns how many objects it wrote."""
        raise NotImplementedError

    async def run(self) -> None:
        """Sync whenever an object under the prefix changes; never returns (cancel it). It listens to the watch
        cache only while it runs: a server started again runs a new controller, and no stopped one is called."""
        wake = self._dirty.set
        self.cache.add_listener(self._on_event, self._prefixes, on_reset=wake)
        try:
            wake()
            while True:
                await self._dirty.wait()
                self._dirty.clear()
                try:
                    await self.sync()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("%s failed; retrying in %.1fs", self.what, self.retry)
                    await self.store.clock.sleep(self.retry)
                    wake()
        finally:
            self.cache.remove_listener(self._on_event)
