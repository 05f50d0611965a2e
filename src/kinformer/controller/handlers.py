"""Informer event handlers that turn events into reconcile Requests (controller-runtime's handler package).

Each handler maps an event's object to Requests and adds them to the controller's queue when every
predicate accepts the event. The callbacks are coroutine functions so they run on the event loop,
next to the queue. A resync arrives as ``on_update(obj, obj, is_resync=True)`` and enqueues like
any update (the change predicates let resyncs through). With a
:class:`~kinformer.workqueue.priority_queue.PriorityQueue`, initial-list adds and resyncs are queued at
``LOW_PRIORITY`` and live events at the normal priority.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from kinformer.controller.predicates import Predicate
from kinformer.controller.reconcile import Request
from kinformer.workqueue.priority_queue import LOW_PRIORITY, PriorityQueue

Obj = Mapping[str, Any]
MapFunc = Callable[[Obj], Iterable[Request]]
Accepts = Callable[[Any], bool]  # an informer handler's filter (``add_event_handler(accepts=...)``)
EVENTS = ("add", "update", "delete")  # the informer events a watch handles unless told fewer


class _Queue(Protocol):
    def add(self, item: Any) -> None: ...


def _unwrap(obj: Any) -> Obj | None:
    """The object inside a DeletedFinalStateUnknown tombstone, or the object itself."""
    return getattr(obj, "obj", obj) if not isinstance(obj, Mapping) else obj


def request_for_object(obj: Obj) -> list[Request]:
    """EnqueueRequestForObject: the object itself."""
    return [Request.for_object(obj)]


def group_of(api_version: str) -> str:
    """``apps/v1`` -> ``apps``; ``v1`` -> ``""``."""
    return api_version.rpartition("/")[0]


def owner_mapper(owner_group: str, owner_kind: str, *, owner_namespaced: bool = True,
                 controller_only: bool = True) -> MapFunc:
    """EnqueueRequestForOwner: the owners of the given group/kind named in ownerReferences.

    By default only the managing owner (``controller: true``) is enqueued, as controller-runtime's
    ``OnlyControllerOwner()``.
    """

    def map_owners(obj: Obj) -> list[Request]:
        meta = obj.get("metadata") or {}
        namespace = (meta.get("namespace") or "") if owner_namespaced else ""
        return [Request(namespace, ref["name"])
                for ref in _owner_refs(meta, owner_group, owner_kind, controller_only)]

    return map_owners


def _owner_refs(meta: Obj, owner_group: str, owner_kind: str, controller_only: bool) -> Iterator[Obj]:
    """The ownerReferences in ``meta`` to an owner of that group and kind (the controller's only, if asked)."""
    for ref in meta.get("ownerReferences") or ():
        if controller_only and not ref.get("controller"):
            continue
        if ref.get("kind") == owner_kind and group_of(ref.get("apiVersion", "")) == owner_group:
            yield ref


def owned_by(owner_group: str, owner_kind: str, *, controller_only: bool = True) -> Accepts:
    """An ``accepts`` for an informer handler: true exactly when :func:`owner_mapper` with the same arguments
    maps the object to an owner (an ownerReference of that kind; metadata only, no Request made)."""

    def accepts(obj: Obj) -> bool:
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():  # _owner_refs, without a generator
            if (ref.get("controller") or not controller_only) and ref.get("kind") == owner_kind \
                    and group_of(ref.get("apiVersion", "")) == owner_group:
                return True
        return False

    return accepts


def maps_any(mapper: MapFunc) -> Accepts:
    """An ``accepts`` for an informer handler: true when ``mapper`` maps the object to at least one Request,
    so a handler enqueueing ``mapper(obj)`` is not handed objects that enqueue nothing. ``mapper`` runs once
    more per change (here and in the handler): use it where it is cheap next to a delivery."""

    def accepts(obj: Obj) -> bool:
        requests = mapper(obj)
        if type(requests) is list:  # (the usual answer: its length says)
            return bool(requests)
        return next(iter(requests), None) is not None

    return accepts


class EnqueueHandler:
    """Informer callbacks that enqueue ``mapper(obj)`` for events the predicates accept.

    Updates enqueue the Requests of both the old and the new object, each once (an owner change
    reaches both owners).
    """

    def __init__(self, queue: _Queue, mapper: MapFunc = request_for_object,
                 predicates: Sequence[Predicate] = (), events: Counter[str] | None = None,
                 on_enqueue: Callable[[Request], None] | None = None) -> None:
        self.queue = queue
        self.on_enqueue = on_enqueue  # told of each Request before it is added (the controller's tracing)
        self.mapper = mapper
        self.predicates = tuple(predicates)
        self.events: Counter[str] = events if events is not None else Counter()  # by kind: add/update/resync/delete
        self.prioritised = isinstance(queue, PriorityQueue)

    def _enqueue(self, *objs: Obj | None, low: bool = False) -> None:
        """Add the Requests ``objs`` map to, each once (``objs``: one object, or an update's old and new, never
        None both)."""
        if self.mapper is request_for_object:  # as controller-runtime's EnqueueRequestForObject: the new object
            obj = objs[-1] if objs[-1] is not None else objs[0]
            requests: Iterable[Request] = (Request.for_object(obj),)  # type: ignore[arg-type]
        else:
            requests = dict.fromkeys(r for obj in objs if obj is not None for r in self.mapper(obj))
        if self.on_enqueue is not None:
            for request in requests:
                self.on_enqueue(request)
        if low and self.prioritised:
            for request in requests:
                self.queue.add(request, LOW_PRIORITY)  # type: ignore[call-arg]
            return
        for request in requests:
            self.queue.add(request)

    async def on_add(self, obj: Obj, is_in_initial_list: bool = False) -> None:
        self.events["add"] += 1
        if all(p.create(obj) for p in self.predicates):
            self._enqueue(obj, low=is_in_initial_list)

    async def on_update(self, old: Obj, new: Obj, is_resync: bool = False) -> None:
        is_resync = is_resync or old is new
        self.events["resync" if is_resync else "update"] += 1
        if all(p.update(old, new, is_resync) for p in self.predicates):
            self._enqueue(old, new, low=is_resync)

    async def on_delete(self, obj: Any) -> None:
        real = _unwrap(obj)
        self.events["delete"] += 1
        if real is not None and all(p.delete(real) for p in self.predicates):
            self._enqueue(real)
