"""SharedInformerFactory: one shared informer per (resource, namespace, selectors), as client-go's factory.

The factory asks its ``client`` for a ListerWatcher with ``client.lister_watcher(resource, namespace=...,
label_selector=..., field_selector=...)`` (:class:`kinformer.Client` and
:class:`kinformer.cache.fake.FakeClient` both offer it), applies ``tweak_list_options`` to every request, and
hands out the same :class:`SharedIndexInformer` for the same key. ``start()`` starts the informers not yet
started and may be called again after more informers were requested.

Ownership: the factory owns the task of every informer it started; :meth:`SharedInformerFactory.shutdown`
(also run on leaving ``async with factory:`` or ``async with factory.running():``) stops and awaits them all.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from types import TracebackType
from typing import Any, NamedTuple, Protocol, overload

from kinformer.cache.backoff import Backoff
from kinformer.cache.multi_namespace import MultiNamespaceListerWatcher
from kinformer.cache.shared_informer import DEFAULT_WATCH_IDLE_TIMEOUT, SharedIndexInformer
from kinformer.cache.transforms import DEFAULT_TRANSFORM, Transform
from kinformer.clock import REAL_CLOCK, Clock
from kinformer.listwatch import ListerWatcher, ListOptions, TweakedListerWatcher
from kinformer.typed_resources import ObjT, resource_spec

__all__ = ["InformerKey", "ListerWatcherSource", "SharedInformerFactory"]

_DEFAULT: Any = ...


class ListerWatcherSource(Protocol):
    """What the factory needs from a client."""

    def lister_watcher(self, resource: str, *, namespace: str | None = None, label_selector: str | None = None,
                       field_selector: str | None = None) -> ListerWatcher:
        """Also called with ``metadata_only=True`` for metadata-only informers (only then)."""
        ...


class InformerKey(NamedTuple):
    """What makes an informer distinct: the factory hands out one informer per key."""

    resource: str                #: as the informer was asked for ("configmaps", "apps/v1/deployments")
    namespace: str | None        #: None: all namespaces; several are joined by "," (sorted)
    label_selector: str | None   #: the filter the server applies to the list and the watch (None: none)
    field_selector: str | None
    metadata_only: bool          #: the cache holds PartialObjectMetadata

    def covers_namespace(self, namespace: str | None) -> bool:
        """Whether an object of ``namespace`` (None: cluster-scoped or unknown) can be in this informer."""
        return self.namespace is None or namespace is None or namespace in self.namespace.split(",")


def _informer_name(key: InformerKey) -> str:
    resource, namespace, labels, fields, metadata_only = key
    scope = "namespaces" if namespace and "," in namespace else "namespace"
    extras = [f"{k}={v}" for k, v in ((scope, namespace), ("labels", labels), ("fields", fields)) if v]
    if metadata_only:
        extras.append("metadata")
    return f"{resource}[{','.join(extras)}]" if extras else resource


class SharedInformerFactory:
    """Creates and owns shared informers. Use from one event loop; ``async with factory:`` starts nothing but
    guarantees :meth:`shutdown` on exit; ``async with factory.running():`` also starts the informers.

    ``backoff`` (a zero-argument callable returning a :class:`~kinformer.cache.backoff.Backoff`),
    ``use_streaming_list``, ``watch_idle_timeout`` (dead-watch detection, clock seconds; None: off) and
    ``use_delta_fifo`` (DeltaFIFO instead of the in-order RealFIFO) and ``gc_freeze`` (keep big caches out of
    the cyclic garbage collector) are passed to every informer.
    """

    def __init__(self, client: ListerWatcherSource, resync: float = 0.0, namespace: str | None = None,
                 tweak_list_options: Callable[[ListOptions], None] | None = None,
                 transform: Transform | None = DEFAULT_TRANSFORM, clock: Clock = REAL_CLOCK,
                 backoff: Callable[[], Backoff] | None = None, use_streaming_list: bool = False,
                 watch_idle_timeout: float | None = DEFAULT_WATCH_IDLE_TIMEOUT, use_delta_fifo: bool = False,
                 gc_freeze: bool = False) -> None:
        self.client = client
        self.resync = resync
        self.namespace = namespace
        self.tweak_list_options = tweak_list_options
        self.transform = transform
        self.clock = clock
        self.backoff = backoff
        self.use_streaming_list = use_streaming_list
        self.watch_idle_timeout = watch_idle_timeout
        self.use_delta_fifo = use_delta_fifo
        self.gc_freeze = gc_freeze
        self._informers: dict[InformerKey, SharedIndexInformer] = {}
        self._started: set[InformerKey] = set()
        self._shutting_down = False

    @overload
    def informer(self, resource: type[ObjT], *, namespace: str | None = _DEFAULT, resync: float | None = None,
                 label_selector: str | None = None, field_selector: str | None = None,
                 watch_idle_timeout: float | None = _DEFAULT, metadata_only: bool = False,
                 transform: Transform | None = _DEFAULT,
                 namespaces: Iterable[str] | None = None) -> SharedIndexInformer[ObjT]: ...

    @overload
    def informer(self, resource: str, *, namespace: str | None = _DEFAULT, resync: float | None = None,
                 label_selector: str | None = None, field_selector: str | None = None,
                 watch_idle_timeout: float | None = _DEFAULT, metadata_only: bool = False,
                 transform: Transform | None = _DEFAULT,
                 namespaces: Iterable[str] | None = None) -> SharedIndexInformer[Any]: ...

    def informer(self, resource: str | type, *, namespace: str | None = _DEFAULT, resync: float | None = None,
                 label_selector: str | None = None, field_selector: str | None = None,
                 watch_idle_timeout: float | None = _DEFAULT, metadata_only: bool = False,
                 transform: Transform | None = _DEFAULT,
                 namespaces: Iterable[str] | None = None) -> SharedIndexInformer[Any]:
        """The shared informer for ``resource`` (created on first request). ``namespace`` defaults to the
        factory's (None: all namespaces); ``resync``, ``watch_idle_timeout`` and ``transform`` (first request
        only) default to the factory's. ``metadata_only`` caches ``meta.k8s.io/v1`` PartialObjectMetadata
        (kind, apiVersion, metadata) instead of whole objects: a separate informer from the full one.
        ``namespaces`` (instead of ``namespace``): one informer over those namespaces, one watch each and
        one merged cache (:mod:`kinformer.cache.multi_namespace`). ``resource`` may be a class standing for
        the resource (:mod:`kinformer.typed_resources`): the informer is then typed by it (and, as for every
        spelling, keyed by the name the class stands for: ``ConfigMap`` is ``"v1/ConfigMap"``, not ``"configmaps"``)."""
        if isinstance(resource, type):
            resource = resource_spec(resource)
        if namespaces is not None:
            chosen = sorted(set(namespaces))
            if not chosen or not all(chosen):
                raise ValueError("namespaces must name at least one non-empty namespace")
            namespace = ",".join(chosen)
        elif namespace is _DEFAULT:
            namespace = self.namespace
        key = InformerKey(resource, namespace or None, label_selector or None, field_selector or None,
                          metadata_only)
        informer = self._informers.get(key)
        if informer is not None:
            return informer
        if self._shutting_down:
            raise RuntimeError("SharedInformerFactory is shut down")
        names = key[1].split(",") if key[1] else [None]
        lws = {ns: self._lister_watcher(key, ns) for ns in names}
        lw = lws[names[0]] if len(names) == 1 else MultiNamespaceListerWatcher(lws)  # type: ignore[arg-type]
        informer = SharedIndexInformer(lw, resync=self.resync if resync is None else resync, clock=self.clock,
                                       transform=self.transform if transform is _DEFAULT else transform,
                                       name=_informer_name(key), resource=resource,
                                       backoff=self.backoff, use_streaming_list=self.use_streaming_list,
                                       watch_idle_timeout=(self.watch_idle_timeout if watch_idle_timeout is _DEFAULT
                                                           else watch_idle_timeout),
                                       use_delta_fifo=self.use_delta_fifo, gc_freeze=self.gc_freeze)
        self._informers[key] = informer
        return informer

    def _lister_watcher(self, key: InformerKey, namespace: str | None) -> ListerWatcher:
        resource, _, labels, fields, metadata_only = key
        extra: dict[str, Any] = {"metadata_only": True} if metadata_only else {}
        lw: ListerWatcher = self.client.lister_watcher(resource, namespace=namespace, label_selector=labels,
                                                       field_selector=fields, **extra)
        if self.tweak_list_options is not None:
            lw = TweakedListerWatcher(lw, self.tweak_list_options)
        return lw

    @property
    def informers(self) -> dict[str, SharedIndexInformer]:
        """Every informer by name (resource, plus namespace/selectors when set)."""
        return {inf.name: inf for inf in self._informers.values()}

    @property
    def informer_count(self) -> int:
        """How many informers the factory made: it never drops or replaces one, so while this number stays the
        same so does the set of :meth:`informers_by_key`."""
        return len(self._informers)

    def informers_by_key(self) -> dict[InformerKey, SharedIndexInformer]:
        """Every informer by its :class:`InformerKey` (a copy: the resource and filter each one watches)."""
        return dict(self._informers)

    def stale_informers(self, threshold: float) -> dict[str, float]:
        """Started informers that heard nothing (no list, event or bookmark) for more than ``threshold``
        clock seconds: ``{name: seconds since the last one}``."""
        stale: dict[str, float] = {}
        for key, informer in self._informers.items():
            since = informer.seconds_since_last_event() if key in self._started else None
            if since is not None and since > threshold:
                stale[informer.name] = since
        return stale

    def start(self) -> None:
        """Start every informer not started yet (call from the event loop)."""
        if self._shutting_down:
            raise RuntimeError("SharedInformerFactory is shut down")
        for key, informer in self._informers.items():
            if key not in self._started:
                informer.start()
                self._started.add(key)

    async def wait_for_cache_sync(self, timeout: float | None = None) -> dict[str, bool]:
        """Wait until every started informer has synced, at most ``timeout`` seconds (real time) in total.
        Returns ``{informer name: synced}``."""
        started = [inf for key, inf in self._informers.items() if key in self._started]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout), asyncio.TaskGroup() as tg:
                for inf in started:
                    tg.create_task(inf.wait_for_sync())
        return {inf.name: inf.has_synced() for inf in started}

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[SharedInformerFactory]:
        """Start the informers for the body of an ``async with``; shut them all down when it ends (also on
        an exception or cancellation)."""
        try:
            self.start()
            yield self
        finally:
            await self.shutdown()

    async def shutdown(self) -> None:
        """Stop every informer and wait for them (idempotent)."""
        self._shutting_down = True
        await asyncio.gather(*(inf.stop() for inf in self._informers.values()), return_exceptions=True)

    async def __aenter__(self) -> SharedInformerFactory:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.shutdown()
