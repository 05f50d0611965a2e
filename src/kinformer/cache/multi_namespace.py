"""Multi-namespace informers: one informer over a set of namespaces, one watch each, one merged cache.

For an operator allowed to read only some namespaces (RBAC per namespace), a cluster-wide watch is refused
and one informer per namespace means one cache per namespace. A :class:`MultiNamespaceListerWatcher` holds
one ListerWatcher per namespace; a :class:`~kinformer.cache.shared_informer.SharedIndexInformer` given one
runs one reflector per namespace into its single queue and cache.

Invariants: each namespace's relist (a Replace) only ever tombstones keys of its own namespace
(:class:`NamespaceScopedStore`); the informer has synced once every namespace's first list has been
processed; resyncs run once for the whole cache.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

from kinformer.listwatch import ListerWatcher, ListOptions, ListResult, WatchEvent

__all__ = ["MultiNamespaceListerWatcher", "NamespaceScopedStore"]


class MultiNamespaceListerWatcher:
    """One ListerWatcher per namespace (at least two namespaces). It is not itself listed or watched: the
    informer opens one reflector per entry of :attr:`by_namespace`."""

    __slots__ = ("by_namespace",)

    def __init__(self, by_namespace: Mapping[str, ListerWatcher]) -> None:
        if len(by_namespace) < 2:
            raise ValueError("a multi-namespace informer needs at least two namespaces")
        if any(not ns for ns in by_namespace):
            raise ValueError("namespaces of a multi-namespace informer must be non-empty")
        self.by_namespace = dict(sorted(by_namespace.items()))

    async def list(self, options: ListOptions) -> ListResult:
        raise TypeError("a MultiNamespaceListerWatcher is listed per namespace (see by_namespace)")

    def watch(self, options: ListOptions) -> AsyncIterator[WatchEvent]:
        raise TypeError("a MultiNamespaceListerWatcher is watched per namespace (see by_namespace)")

    def __repr__(self) -> str:
        return f"<MultiNamespaceListerWatcher {', '.join(self.by_namespace)}>"


class _ScopedReplace(Protocol):
    def add(self, obj: Any) -> None: ...
    def update(self, obj: Any) -> None: ...
    def delete(self, obj: Any) -> None: ...
    def replace(self, objs: list[Any], resource_version: str = "", *, scope: str | None = None) -> None: ...
    def resync(self) -> None: ...


class NamespaceScopedStore:
    """The informer's queue as one namespace's reflector sees it: its Replace concerns that namespace only.

    Its ``add``/``update``/``delete`` are the queue's own, and so is ``add_watch_deltas`` when the queue has
    one (a RealFIFO: the reflector then hands over a watch batch in one call, as to an informer of one
    namespace); over a queue without it the attribute is absent and the reflector hands over each delta."""

    __slots__ = ("_fifo", "_scope", "add", "add_watch_deltas", "delete", "update")

    def __init__(self, fifo: _ScopedReplace, namespace: str) -> None:
        self._fifo = fifo
        self._scope = f"{namespace}/"
        self.add = fifo.add
        self.update = fifo.update
        self.delete = fifo.delete
        add_all = getattr(fifo, "add_watch_deltas", None)
        if add_all is not None:
            self.add_watch_deltas = add_all

    def replace(self, objs: list[Any], resource_version: str) -> None:
        self._fifo.replace(objs, resource_version, scope=self._scope)

    def resync(self) -> None:
        self._fifo.resync()
