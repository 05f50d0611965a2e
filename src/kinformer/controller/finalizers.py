"""Adding and removing one finalizer without disturbing anyone else's (controller-runtime ``controllerutil``).

Each change is a merge patch of the whole ``metadata.finalizers`` list *with* the ``resourceVersion`` it
was computed from, so the API server applies it only to that exact version (a stale one answers 409
Conflict). On Conflict the latest object is read from the server (``client.api_client`` when ``client``
is the Manager's cache-reading client) and the change recomputed, up to ``steps`` times. A
finalizer another controller added meanwhile is therefore never dropped, and nothing else is written.

A finalizer is not added to an object that is being deleted (the API server forbids new finalizers then):
the reconciler should run its cleanup and :func:`remove_finalizer` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kinformer.controller.retry import DEFAULT_RETRY_STEPS, retry_on_conflict
from kinformer.errors import NotFound

__all__ = ["ensure_finalizer", "has_finalizer", "remove_finalizer"]

Obj = Mapping[str, Any]


def has_finalizer(obj: Obj, name: str) -> bool:
    return name in ((obj.get("metadata") or {}).get("finalizers") or ())


def _key(obj: Obj) -> tuple[str, str | None]:
    meta = obj.get("metadata") or {}
    if not meta.get("name"):
        raise ValueError("the object has no metadata.name")
    return meta["name"], meta.get("namespace") or None


async def _change(client: Any, resource: str, obj: Obj, compute: Callable[[Obj], list[str] | None],
                  steps: int) -> bool:
    """Patch ``compute(latest)`` as the finalizer list, compare-and-swapped on the resourceVersion."""
    name, namespace = _key(obj)
    current: list[Obj] = [obj]

    async def attempt() -> bool:
        latest = current[0]
        rv = (latest.get("metadata") or {}).get("resourceVersion")
        if not rv:  # a retry: read the server, not a cache that may not have the conflicting write yet
            latest = current[0] = await getattr(client, "api_client", client).get(resource, name, namespace)
            rv = latest["metadata"]["resourceVersion"]
        finalizers = compute(latest)
        if finalizers is None:
            return False
        patch = {"metadata": {"resourceVersion": rv, "finalizers": finalizers}}
        try:
            await client.patch(resource, name, patch, "merge", namespace)
        except BaseException:
            current[0] = {"metadata": {"name": name, "namespace": namespace}}  # re-read before retrying
            raise
        return True

    return await retry_on_conflict(attempt, steps=steps)


async def ensure_finalizer(client: Any, resource: str, obj: Obj, name: str, *,
                           steps: int = DEFAULT_RETRY_STEPS) -> bool:
    """Add finalizer ``name`` to the object unless it is there (or the object is being deleted).

    Returns True if this call added it. Raises NotFound if the object is gone, Conflict after ``steps``
    conflicting attempts.
    """

    def add(latest: Obj) -> list[str] | None:
        meta = latest.get("metadata") or {}
        finalizers = list(meta.get("finalizers") or ())
        if name in finalizers or meta.get("deletionTimestamp"):
            return None
        return [*finalizers, name]

    return await _change(client, resource, obj, add, steps)


async def remove_finalizer(client: Any, resource: str, obj: Obj, name: str, *,
                           steps: int = DEFAULT_RETRY_STEPS) -> bool:
    """Remove finalizer ``name``, keeping every other one. Returns True if this call removed it (False if it
    was not there or the object is already gone)."""

    def drop(latest: Obj) -> list[str] | None:
        finalizers = list((latest.get("metadata") or {}).get("finalizers") or ())
        if name not in finalizers:
            return None
        return [f for f in finalizers if f != name]

    if not has_finalizer(obj, name):
        return False
    try:
        return await _change(client, resource, obj, drop, steps)
    except NotFound:
        return False
