"""Blocking shared informers: the async informers run on a sync Client's loop; callers only configure and read.

Nothing of an informer's hot path leaves the loop: the reflector, the queue and the cache run there as in the
async API, and a plain handler added here runs in its listener's own worker thread exactly as a plain handler
added to the async informer does. The cache (:class:`~kinformer.cache.store.Indexer`) and its listers are
thread-safe, so they are read directly from the caller's thread, with no trip through the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kinformer.cache.factory import SharedInformerFactory as AsyncFactory
from kinformer.cache.lister import Lister
from kinformer.cache.processor_listener import ResourceEventHandlerRegistration as AsyncRegistration
from kinformer.cache.shared_informer import SharedIndexInformer as AsyncInformer
from kinformer.cache.store import Indexer, IndexFunc
from kinformer.sync.client import Client
from kinformer.sync.loop import LoopThread

__all__ = ["ResourceEventHandlerRegistration", "SharedIndexInformer", "SharedInformerFactory"]


class ResourceEventHandlerRegistration:
    """The handle :meth:`SharedIndexInformer.add_event_handler` returns. Thread safety: any thread."""

    def __init__(self, loop: LoopThread, registration: AsyncRegistration) -> None:
        self._loop = loop
        self.aio = registration

    def has_synced(self) -> bool:
        """True once the informer synced and this handler processed its initial-list notifications."""
        return self.aio.has_synced()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Block until :meth:`has_synced`, at most ``timeout`` seconds; False on timeout or stop."""
        try:
            return self._loop.run(self.aio.wait_for_sync(), timeout)
        except TimeoutError:
            return self.aio.has_synced()

    def remove(self) -> None:
        """Stop delivering to this handler (idempotent)."""
        self._loop.call(self.aio.remove)

    @property
    def pending(self) -> int:
        """Notifications queued or being processed for this handler (its lag)."""
        return self.aio.pending

    @property
    def errors(self) -> int:
        """Exceptions the handler's callbacks raised (each logged)."""
        return self.aio.errors

    @property
    def processed(self) -> int:
        return self.aio.processed


class SharedIndexInformer:
    """One shared informer of a :class:`SharedInformerFactory`.

    Thread safety: any thread. Configuration (:meth:`add_event_handler`, :meth:`add_indexers`) runs on the loop;
    reads (:attr:`indexer`, :meth:`lister`, :meth:`has_synced`) read the thread-safe cache directly. Cached objects
    are shared and read-only, as in the async API.
    """

    def __init__(self, loop: LoopThread, informer: AsyncInformer) -> None:
        self._loop = loop
        self.aio = informer

    @property
    def name(self) -> str:
        return self.aio.name

    @property
    def indexer(self) -> Indexer:
        """The cache (thread-safe; read-only objects)."""
        return self.aio.indexer

    def lister(self) -> Lister:
        """A :class:`~kinformer.cache.lister.Lister` over the cache (thread-safe)."""
        return self.aio.lister()

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add indices (before or after start; cached objects are indexed at once)."""
        self._loop.call(self.aio.add_indexers, indexers)

    def add_event_handler(self, handler: Any = None, *, on_add: Callable[..., Any] | None = None,
                          on_update: Callable[..., Any] | None = None, on_delete: Callable[..., Any] | None = None,
                          resync: float | None = None,
                          accepts: Callable[[Any], bool] | None = None) -> ResourceEventHandlerRegistration:
        """Register callbacks as :meth:`kinformer.SharedIndexInformer.add_event_handler` does (``accepts`` is
        called on the client's loop thread, before buffering). Plain callables run
        in a worker thread of their own, one notification at a time and in order (a slow one delays only
        itself); an exception is logged and counted, never stops the informer."""
        registration = self._loop.call(self.aio.add_event_handler, handler, on_add=on_add, on_update=on_update,
                                       on_delete=on_delete, resync=resync, accepts=accepts)
        return ResourceEventHandlerRegistration(self._loop, registration)

    def has_synced(self) -> bool:
        """True once every object of the first list has been processed."""
        return self.aio.has_synced()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Block until :meth:`has_synced`, at most ``timeout`` seconds; False on timeout or stop."""
        return self._loop.run(self.aio.wait_for_sync(timeout))

    def __repr__(self) -> str:
        return f"<kinformer.sync.SharedIndexInformer {self.name}>"


class SharedInformerFactory:
    """Shared informers over a blocking :class:`~kinformer.sync.Client` (:class:`kinformer.SharedInformerFactory`'s
    options, passed through).

    ``start()`` starts the informers on the client's loop and returns at once; ``wait_for_cache_sync(timeout)``
    blocks until they synced; ``shutdown()`` (also on leaving ``with``, and when the client closes) stops them
    and waits. Thread safety: any thread.
    """

    def __init__(self, client: Client, resync: float = 0.0, namespace: str | None = None, **options: Any) -> None:
        self._loop = client.loop
        self.aio = AsyncFactory(client.aio, resync=resync, namespace=namespace, **options)
        self._informers: dict[int, SharedIndexInformer] = {}
        client.on_close(self.aio.shutdown)

    def informer(self, resource: str, **options: Any) -> SharedIndexInformer:
        """The shared informer for ``resource`` (options as :meth:`kinformer.SharedInformerFactory.informer`)."""
        informer = self._loop.call(lambda: self.aio.informer(resource, **options))
        return self._wrap(informer)

    def _wrap(self, informer: AsyncInformer) -> SharedIndexInformer:
        wrapped = self._informers.get(id(informer))
        if wrapped is None or wrapped.aio is not informer:
            wrapped = self._informers[id(informer)] = SharedIndexInformer(self._loop, informer)
        return wrapped

    @property
    def informers(self) -> dict[str, SharedIndexInformer]:
        """Every informer by name."""
        found: Iterable[AsyncInformer] = self._loop.call(lambda: list(self.aio.informers.values()))
        return {informer.name: self._wrap(informer) for informer in found}

    def start(self) -> None:
        """Start every informer not started yet; returns at once."""
        self._loop.call(self.aio.start)

    def wait_for_cache_sync(self, timeout: float | None = None) -> dict[str, bool]:
        """Block until every started informer has synced, at most ``timeout`` seconds in total;
        ``{informer name: synced}``."""
        return self._loop.run(self.aio.wait_for_cache_sync(timeout))

    def shutdown(self) -> None:
        """Stop every informer and wait for them (idempotent; nothing to do once the client is closed)."""
        if not self._loop.closed:
            self._loop.run(self.aio.shutdown())

    def __enter__(self) -> SharedInformerFactory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
