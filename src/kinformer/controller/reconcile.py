"""The reconcile contract: Request in, Result out (controller-runtime's reconcile package).

A reconciler is level-driven: the Request only names an object; the reconciler reads the latest
state (from an informer's cache) and acts. The Result tells the controller what to do with the key:

* an exception -> rate-limited requeue (the Result is ignored); :class:`TerminalError` -> no requeue;
* ``requeue_after`` > 0 -> forget the failure history and requeue after that delay;
* ``requeue`` -> rate-limited requeue;
* otherwise -> forget (success).

``priority`` (with a controller built with ``.priority_queue()``) is the priority of the requeue.

An :class:`ObjectReconciler` is handed the cached object instead of the Request: the controller looks the
key up in its primary informer; an object being deleted (``deletionTimestamp`` set, finalizers pending) is
still reconciled, an object no longer in the cache is not.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, runtime_checkable

from kinformer.meta import Object, object_key
from kinformer.typed_resources import ObjT

if TYPE_CHECKING:
    from kinformer.client import Client
    from kinformer.controller.cached_client import CachedClient
    from kinformer.controller.manager import Manager


@dataclass(frozen=True, slots=True, order=True)
class Request:
    """Names the object to reconcile. ``namespace`` is "" for cluster-scoped objects."""

    namespace: str
    name: str

    @classmethod
    def for_object(cls, obj: Object) -> Request:
        meta = obj["metadata"]
        return cls(meta.get("namespace") or "", meta["name"])

    @property
    def key(self) -> str:
        """The cache key of the object (``namespace/name`` or ``name``)."""
        return object_key(self.namespace, self.name)

    def __str__(self) -> str:
        return self.key


@dataclass(frozen=True, slots=True)
class Result:
    """What to do with the Request after a successful reconcile."""

    requeue: bool = False
    requeue_after: float | None = None
    priority: int | None = None

    def __post_init__(self) -> None:
        if self.requeue_after is not None and self.requeue_after < 0:
            raise ValueError(f"requeue_after must be >= 0, got {self.requeue_after}")


class ObjectReconciler(Generic[ObjT]):
    """Subclass and define ``async def reconcile(self, obj) -> Result`` (``obj``: the cached, read-only object).

    ``ObjectReconciler[Deployment]`` types ``obj`` for type checkers (a :mod:`kinformer.kinds` TypedDict or the
    user's own); at run time the object is the cache's, whatever the parameter. When the Manager builds the
    controller it sets :attr:`client` (the Manager's cache-reading client, unless the subclass set its own) and
    :attr:`manager`.
    """

    if TYPE_CHECKING:
        client: CachedClient | Client
        manager: Manager
    else:
        client = None
        manager = None

    async def reconcile(self, obj: ObjT) -> Result | None:
        raise NotImplementedError


class TerminalError(Exception):
    """An error that retrying cannot fix: it is logged and counted, and the key is not requeued."""


@runtime_checkable
class Reconciler(Protocol):
    """Anything with ``reconcile(request) -> Result | None`` (coroutine or plain method)."""

    def reconcile(self, request: Request) -> Awaitable[Result | None] | Result | None: ...


ReconcileFunc = Callable[[Request], Awaitable[Result | None]]
#: What ``mgr.controller(...)`` and :class:`~kinformer.controller.Controller` accept: a Reconciler, or a
#: function of a Request (plain or async) returning a Result or None.
ReconcilerLike = Reconciler | Callable[[Request], Awaitable[Result | None] | Result | None]


def as_reconcile_func(reconciler: ReconcilerLike) -> ReconcileFunc:
    """Normalise a reconciler object or a plain/async function into an async function.

    Plain (non-coroutine) callables run in a worker thread so they never block the event loop.
    """
    fn = reconciler.reconcile if isinstance(reconciler, Reconciler) else reconciler
    if not callable(fn):
        raise TypeError(f"{reconciler!r} is neither a Reconciler nor a callable")
    if inspect.iscoroutinefunction(fn):
        return fn

    async def call(request: Request) -> Result | None:
        value = await asyncio.to_thread(fn, request)
        if inspect.isawaitable(value):
            value = await value
        return value

    return call
