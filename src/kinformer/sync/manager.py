"""The blocking Manager: :class:`kinformer.Manager` run on a sync Client's loop, ``run()`` blocking its caller."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

from kinformer.cache.store import IndexFunc
from kinformer.controller.builder import Builder
from kinformer.controller.events import EventRecorder
from kinformer.controller.legacyevents import LegacyEventRecorder
from kinformer.controller.manager import Manager as AsyncManager
from kinformer.controller.reconcile import ObjectReconciler, ReconcilerLike
from kinformer.sync.client import Client
from kinformer.sync.informers import SharedIndexInformer

__all__ = ["Manager"]

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Manager:
    """Controllers, shared caches, leader election, health and metrics as :class:`kinformer.Manager` (its
    keyword options, passed through), driven from blocking code.

    Reconcilers are plain functions of a :class:`kinformer.Request` (or objects with such a ``reconcile``
    method): they run in worker threads, where the blocking :class:`~kinformer.sync.Client` is the way to write.
    ``run()`` blocks until :meth:`stop` (from any thread), SIGTERM or SIGINT (when called from the main thread,
    which is where Python delivers signals), or a failure such as lost leadership, which it raises.

    Thread safety: configure (:meth:`controller`, the builder's methods, :meth:`informer`, :meth:`add_index`)
    from one thread before :meth:`run`; :meth:`stop` and :meth:`ready` from any thread.
    """

    def __init__(self, client: Client, **options: Any) -> None:
        self._loop = client.loop
        options.pop("handle_signals", None)  # signals reach only the main thread: run() installs its own handlers
        self.aio: AsyncManager = self._loop.call(AsyncManager, client.aio, **options)
        self._task: asyncio.Task[None] | None = None
        client.on_close(self._stop_and_wait)

    def controller(self, reconciler: ReconcilerLike | ObjectReconciler, name: str | None = None) -> Builder:
        """Describe a controller (``.for_(...).owns(...).workers(n)``): built and run by :meth:`run`."""
        return self._loop.call(self.aio.controller, reconciler, name)

    def informer(self, resource: str, **options: Any) -> SharedIndexInformer:
        """The Manager's shared informer for ``resource``."""
        return SharedIndexInformer(self._loop, self._loop.call(lambda: self.aio.informer(resource, **options)))

    def add_index(self, resource: str, name: str, fn: IndexFunc) -> None:
        """Index the cache of ``resource`` by ``fn(obj)``."""
        self._loop.call(self.aio.add_index, resource, name, fn)

    def event_recorder(self, component: str, *, legacy: bool = False,
                       **options: Any) -> EventRecorder | LegacyEventRecorder:
        """An event recorder bound to the client's loop: ``event()`` returns at once from any thread (a plain
        reconciler's worker thread included); the Manager flushes it when ``run()`` ends. ``legacy=True``:
        core/v1 Events, as kube-controller-manager records them."""
        return self._loop.call(lambda: self.aio.event_recorder(component, legacy=legacy, **options))

    @property
    def health_url(self) -> str | None:
        """Where ``/healthz``, ``/readyz`` and ``/metrics`` are served once running (with ``health_bind``)."""
        return self.aio.health_url

    def ready(self) -> bool:
        """True once every cache has synced and the controllers run."""
        return self.aio.ready()

    def run(self) -> None:
        """Run until :meth:`stop`, SIGTERM/SIGINT, or a failure (raised here)."""
        with self._signals_stop():
            self._loop.run(self._run())

    async def _run(self) -> None:
        self._task = asyncio.current_task()
        try:
            await self.aio.run()
        finally:
            self._task = None

    def stop(self) -> None:
        """Ask :meth:`run` to shut down gracefully (controllers drained); returns at once. Any thread."""
        self._loop.call_soon(self.aio.stop)

    async def _stop_and_wait(self) -> None:
        """On the client's close: a running Manager stops gracefully (its own timeouts bound the wait)."""
        task = self._task
        self.aio.stop()
        if task is not None:
            await asyncio.wait([task])

    @contextlib.contextmanager
    def _signals_stop(self) -> Iterator[None]:
        """SIGTERM and SIGINT stop the Manager while ``run()`` blocks, if it runs in the main thread."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum: int, frame: FrameType | None) -> None:
            self.stop()

        previous = [(sig, signal.signal(sig, handler)) for sig in _SIGNALS]
        try:
            yield
        finally:
            for sig, old in previous:
                signal.signal(sig, old if old is not None else signal.SIG_DFL)

