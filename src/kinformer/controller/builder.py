"""The controller builder: ``mgr.controller(r).for_(...).owns(...).watches(...).workers(n)``.

A builder only records what to watch; the Manager builds the Controller when it runs, once the
resources have been resolved through discovery (the owner kind for ``owns`` comes from the
``for_`` resource).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kinformer.controller.controller import Controller
from kinformer.controller.handlers import MapFunc, owner_mapper, request_for_object
from kinformer.controller.predicates import Predicate
from kinformer.controller.reconcile import Reconciler, Request

if TYPE_CHECKING:
    from kinformer.controller.manager import Manager


@dataclass
class _Watch:
    resource: str
    mapper: MapFunc | None  # None: owner mapping, filled in at build time
    predicates: tuple[Predicate, ...]
    controller_only: bool = True
    options: dict[str, Any] = field(default_factory=dict)


class Builder:
    """Records a controller's watches; :meth:`build` turns them into a running :class:`Controller`."""

    def __init__(self, manager: Manager, reconciler: Reconciler | Callable[[Request], Any],
                 name: str | None = None) -> None:
        self._manager = manager
        self._reconciler = reconciler
        self._name = name
        self._for: _Watch | None = None
        self._watches: list[_Watch] = []
        self._filters: list[Predicate] = []
        self._workers = 1
        self._rate_limiter: Any = None
        self.controller: Controller | None = None

    def for_(self, resource: str, *predicates: Predicate, **informer_options: Any) -> Builder:
        """The primary resource: its events enqueue the object itself."""
        if self._for is not None:
            raise ValueError("for_() may be called only once")
        self._for = _Watch(resource, request_for_object, predicates, options=informer_options)
        return self

    def owns(self, resource: str, *predicates: Predicate, controller_only: bool = True,
             **informer_options: Any) -> Builder:
        """Objects owned by the primary resource: their events enqueue the owner."""
        self._watches.append(_Watch(resource, None, predicates, controller_only, informer_options))
        return self

    def watches(self, resource: str, mapper: Callable[[Mapping[str, Any]], Iterable[Request]] | None = None,
                *predicates: Predicate, **informer_options: Any) -> Builder:
        """Any resource, mapped to Requests by ``mapper`` (default: the object itself)."""
        self._watches.append(_Watch(resource, mapper or request_for_object, predicates, options=informer_options))
        return self

    def with_event_filter(self, predicate: Predicate) -> Builder:
        """A predicate applied to every watch of this controller."""
        self._filters.append(predicate)
        return self

    def workers(self, n: int) -> Builder:
        if n < 1:
            raise ValueError(f"workers must be >= 1, got {n}")
        self._workers = n
        return self

    def named(self, name: str) -> Builder:
        self._name = name
        return self

    def with_rate_limiter(self, rate_limiter: Any) -> Builder:
        self._rate_limiter = rate_limiter
        return self

    async def build(self) -> Controller:
        """Resolve resources, create the Controller and register its informer handlers."""
        if self._for is None:
            raise ValueError("a controller needs for_(resource)")
        mgr = self._manager
        primary = await mgr.resolve(self._for.resource)
        name = self._name or primary.kind.lower()
        ctrl = Controller(name, self._reconciler, workers=self._workers, rate_limiter=self._rate_limiter,
                          clock=mgr.clock, cache_sync_timeout=mgr.cache_sync_timeout,
                          shutdown_timeout=mgr.graceful_shutdown_timeout)
        for w in [self._for, *self._watches]:
            mapper = w.mapper or owner_mapper(primary.group, primary.kind, owner_namespaced=primary.namespaced,
                                              controller_only=w.controller_only)
            informer = mgr.informer(w.resource, **w.options)
            ctrl.watch(informer, mapper, (*self._filters, *w.predicates))
        self.controller = ctrl
        return ctrl
