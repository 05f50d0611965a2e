"""The controller builder: ``mgr.controller(r).for_(...).owns(...).watches(...).workers(n)``.

``for_``, ``owns`` and ``watches`` create (or reuse) the Manager's shared informer at once, so an informer
is declared in one place; the Manager builds the Controller when it runs, once the resources have been
resolved through discovery (the owner kind for ``owns`` comes from the ``for_`` resource). Options:
``.workers(n)``, ``.reconcile_timeout(s)``, ``.priority_queue(max_wait=...)``, ``.every(s)``,
``.source(async_iterable)``, ``.with_rate_limiter(...)``, ``.with_event_filter(...)``, ``.named(...)``.

What the controller writes is declared with ``.writes_status()``, ``.finalizer()`` and ``.writes(resource, verbs)``;
:meth:`Builder.access` lists every access the controller needs (``kinformer rbac`` turns it into RBAC rules).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kinformer.controller import metrics
from kinformer.controller.controller import Controller
from kinformer.controller.handlers import EVENTS, Accepts, MapFunc, owned_by, owner_mapper, request_for_object
from kinformer.controller.predicates import Predicate
from kinformer.controller.reconcile import ObjectReconciler, ReconcilerLike, Request
from kinformer.meta import Object
from kinformer.typed_resources import resource_spec
from kinformer.workqueue.priority_queue import DEFAULT_MAX_WAIT, PriorityQueue

if TYPE_CHECKING:
    from kinformer.cache.shared_informer import SharedIndexInformer
    from kinformer.controller.manager import Manager
    from kinformer.workqueue.rate_limiters import RateLimiter


READ_VERBS = ("get", "list", "watch")
WRITE_VERBS = ("create", "update", "patch", "delete")


@dataclass(frozen=True)
class Access:
    """One permission a controller needs: ``verbs`` on ``resource`` (spelled as the builder was given it),
    or on its ``subresource``."""

    resource: str
    verbs: tuple[str, ...]
    subresource: str | None = None


def _spelled(resource: str | type) -> str:
    """A resource name, or the name a class stands for (:mod:`kinformer.typed_resources`)."""
    return resource_spec(resource) if isinstance(resource, type) else resource


@dataclass
class _Watch:
    resource: str
    mapper: MapFunc | None  # None: owner mapping, filled in at build time
    predicates: tuple[Predicate, ...]
    controller_only: bool = True
    options: dict[str, Any] = field(default_factory=dict)
    informer: SharedIndexInformer | None = None
    accepts: Accepts | None = None  # the handler's filter before buffering (owns: its owner's kind, at build)
    events: Collection[str] = EVENTS  # the informer events handled


class Builder:
    """Records a controller's watches; :meth:`build` turns them into a running :class:`Controller`."""

    def __init__(self, manager: Manager, reconciler: ReconcilerLike | ObjectReconciler,
                 name: str | None = None) -> None:
        self._manager = manager
        self._reconciler = reconciler
        self._name = name
        self._for: _Watch | None = None
        self._watches: list[_Watch] = []
        self._filters: list[Predicate] = []
        self._workers = 1
        self._rate_limiter: RateLimiter | None = None
        self._reconcile_timeout: float | None = None
        self._every: float | None = None
        self._priority: float | bool | None = False  # False: a plain queue; else the PriorityQueue's max_wait
        self._sources: list[AsyncIterable[Request | Object]] = []
        self._writes: list[Access] = []
        self.controller: Controller | None = None

    def _watch(self, watch: _Watch) -> _Watch:
        watch.informer = self._manager.informer(watch.resource, **watch.options)
        return watch

    def for_(self, resource: str | type, *predicates: Predicate, accepts: Accepts | None = None,
             **informer_options: Any) -> Builder:
        """The primary resource: its events enqueue the object itself. ``accepts(obj)``, if given, keeps the
        objects it rejects from this controller's handler before they are buffered (``add_event_handler``'s
        ``accepts``: an update is delivered if the old or the new object is accepted); predicates then judge
        what is delivered."""
        if self._for is not None:
            raise ValueError("for_() may be called only once")
        self._for = self._watch(_Watch(_spelled(resource), request_for_object, predicates, options=informer_options,
                                       accepts=accepts))
        return self

    def owns(self, resource: str | type, *predicates: Predicate, controller_only: bool = True,
             **informer_options: Any) -> Builder:
        """Objects owned by the primary resource: their events enqueue the owner. Only objects with an
        ownerReference of the owner's kind (the controller one, unless ``controller_only=False``) are handed to
        this controller: the others would enqueue nothing."""
        watch = _Watch(_spelled(resource), None, predicates, controller_only, informer_options)
        self._watches.append(self._watch(watch))
        return self

    def watches(self, resource: str | type, *predicates: Predicate, mapper: MapFunc | None = None,
                accepts: Accepts | None = None, events: Collection[str] = EVENTS, **informer_options: Any) -> Builder:
        """Any resource, mapped to Requests by ``mapper`` (keyword-only; default: the object itself).
        ``accepts`` as for :meth:`for_`: it must accept every object ``mapper`` maps to something
        (:func:`~kinformer.controller.handlers.maps_any` makes one of the mapper itself). ``events``: the
        informer events handled (of ``add``, ``update``, ``delete``: client-go's handler funcs given, e.g.
        ``("delete",)`` for a DeleteFunc alone); the others are dropped before ``accepts`` judges them."""
        if not set(events) <= set(EVENTS):
            raise ValueError(f"events must be among {EVENTS}, not {tuple(events)}")
        self._watches.append(self._watch(_Watch(_spelled(resource), mapper or request_for_object, predicates,
                                                options=informer_options, accepts=accepts, events=events)))
        return self

    def writes_status(self) -> Builder:
        """Declare that the reconciler writes the primary resource's status subresource."""
        self._writes.append(Access(self._primary("writes_status"), ("get", "update", "patch"), "status"))
        return self

    def finalizer(self) -> Builder:
        """Declare that the reconciler adds and removes finalizers on the primary objects."""
        primary = self._primary("finalizer")
        self._writes += [Access(primary, ("update", "patch")), Access(primary, ("update",), "finalizers")]
        return self

    def writes(self, resource: str | type, verbs: tuple[str, ...] = WRITE_VERBS) -> Builder:
        """Declare that the reconciler uses ``verbs`` on ``resource`` (one it need not watch)."""
        unknown = set(verbs) - {*READ_VERBS, *WRITE_VERBS, "deletecollection"}
        if not verbs or unknown:
            raise ValueError(f"writes() takes verbs among {READ_VERBS + WRITE_VERBS}, got {verbs}")
        self._writes.append(Access(_spelled(resource), tuple(verbs)))
        return self

    def _primary(self, method: str) -> str:
        if self._for is None:
            raise ValueError(f"{method}() needs for_() first")
        return self._for.resource

    def access(self) -> list[Access]:
        """Every access the controller needs: reads of what it watches, writes of what it owns or declared."""
        watched = [] if self._for is None else [Access(self._for.resource, READ_VERBS)]
        owns = [w.resource for w in self._watches if w.mapper is None]
        watched += [Access(w.resource, READ_VERBS) for w in self._watches if w.mapper is not None]
        watched += [Access(resource, READ_VERBS + WRITE_VERBS) for resource in owns]
        if owns and self._for is not None:
            # a controller reference blocks the owner's deletion: kube's OwnerReferencesPermissionEnforcement
            # asks for update on the owner's finalizers subresource
            watched.append(Access(self._for.resource, ("update",), "finalizers"))
        return watched + self._writes

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

    def with_rate_limiter(self, rate_limiter: RateLimiter) -> Builder:
        self._rate_limiter = rate_limiter
        return self

    def reconcile_timeout(self, seconds: float) -> Builder:
        """Cancel a reconcile running longer than ``seconds``; it is counted and retried with backoff."""
        if seconds <= 0:
            raise ValueError(f"reconcile_timeout must be > 0, got {seconds}")
        self._reconcile_timeout = seconds
        return self

    def priority_queue(self, max_wait: float | None = DEFAULT_MAX_WAIT) -> Builder:
        """Serve live events before initial-list items and resyncs; nothing waits longer than ``max_wait``
        behind newer items (see :mod:`kinformer.workqueue.priority_queue`)."""
        self._priority = max_wait
        return self

    def every(self, seconds: float) -> Builder:
        """Reconcile each primary object again ``seconds`` after its last successful reconcile."""
        if seconds <= 0:
            raise ValueError(f"every must be > 0, got {seconds}")
        self._every = seconds
        return self

    def source(self, requests: AsyncIterable[Request | Object]) -> Builder:
        """Also reconcile what ``requests`` yields (Requests or objects) while the controller runs."""
        if not hasattr(requests, "__aiter__"):
            raise TypeError("source() takes an async iterable of Requests or objects")
        self._sources.append(requests)
        return self

    def _queue(self, name: str) -> PriorityQueue[Request] | None:
        if self._priority is False:
            return None
        mgr = self._manager
        return PriorityQueue(self._rate_limiter, name, clock=mgr.clock, metrics=metrics.queue_metrics_provider(),
                             max_wait=self._priority)

    async def build(self) -> Controller:
        """Resolve resources, create the Controller and register its informer handlers."""
        if self._for is None:
            raise ValueError("a controller needs for_(resource)")
        mgr = self._manager
        primary = await mgr.resolve(self._for.resource)
        name = self._name or primary.kind.lower()
        if isinstance(self._reconciler, ObjectReconciler):
            if self._reconciler.client is None:
                self._reconciler.client = mgr.client
            self._reconciler.manager = mgr
        ctrl = Controller(name, self._reconciler, workers=self._workers, rate_limiter=self._rate_limiter,
                          clock=mgr.clock, cache_sync_timeout=mgr.cache_sync_timeout,
                          shutdown_timeout=mgr.graceful_shutdown_timeout, queue=self._queue(name),
                          reconcile_timeout=self._reconcile_timeout, every=self._every,
                          ryow_timeout=mgr.ryow_timeout, resource=str(primary),
                          leader_elected=mgr.leader_election is not None, sources=self._sources)
        for w in [self._for, *self._watches]:
            mapper, accepts = w.mapper, w.accepts
            if mapper is None:
                mapper = owner_mapper(primary.group, primary.kind, owner_namespaced=primary.namespaced,
                                      controller_only=w.controller_only)
                accepts = owned_by(primary.group, primary.kind, controller_only=w.controller_only)
            assert w.informer is not None  # set by _watch when the watch was declared
            ctrl.watch(w.informer, mapper, (*self._filters, *w.predicates), primary=w is self._for, accepts=accepts,
                       events=w.events)
        self.controller = ctrl
        return ctrl
