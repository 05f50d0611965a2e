"""Helpers the replicaset and deployment controllers share (kube's pkg/controller/controller_utils.go,
controller_ref_manager.go and api/v1/pod utilities), as pure functions over plain object dicts.

Rules carried over from kube 1.32:

* a pod is *active* unless it is Succeeded, Failed or being deleted (``FilterActivePods``);
* a pod is *ready* when its Ready condition is True, and *available* once it has been ready for
  ``minReadySeconds`` (strictly longer: ``lastTransitionTime + minReadySeconds`` is before now);
* the ControllerRefManager's claim: an object controlled by someone else is left alone; one controlled by
  us that no longer matches is released (not while we are being deleted); an orphan that matches is adopted
  unless we or it are being deleted or it lives in another namespace. Adoption and release are strategic
  merge patches of ``ownerReferences`` carrying the object's uid as a precondition, as kube sends them.
* :class:`Expectations` is kube's UIDTrackingControllerExpectations: after asking for N creations (or the
  deletion of named pods) a controller does not act again on that key until the informer has observed them,
  or until ``ttl`` (kube's 5 minutes) has passed.
* :class:`Wakeups` lets a controller's own informer handlers enqueue keys (``Builder.source``), so expectations
  are lowered before the key they concern is reconciled.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kinformer.clock import Clock
from kinformer.cluster.podutil import is_being_deleted
from kinformer.controller.reconcile import Request
from kinformer.errors import NotFound

Obj = Mapping[str, Any]

#: kube's ExpectationsTimeout: expectations older than this are considered satisfied.
EXPECTATIONS_TTL = 300.0


def meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def controller_of(obj: Obj) -> Mapping[str, Any] | None:
    """The ownerReference with ``controller: true``, if any (``metav1.GetControllerOf``)."""
    for ref in meta(obj).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref
    return None


def controller_ref(owner: Obj, api_version: str, kind: str) -> dict[str, Any]:
    """``metav1.NewControllerRef``: controller and blockOwnerDeletion set."""
    m = meta(owner)
    return {"apiVersion": api_version, "kind": kind, "name": m["name"], "uid": m["uid"],
            "controller": True, "blockOwnerDeletion": True}


@dataclass
class _Expectation:
    adds: int = 0
    deletes: set[str] = field(default_factory=set)
    timestamp: float = 0.0

    def fulfilled(self) -> bool:
        return self.adds <= 0 and not self.deletes


class Expectations:
    """Creations and deletions a controller is waiting to observe, per controller key."""

    def __init__(self, clock: Clock, ttl: float = EXPECTATIONS_TTL) -> None:
        self.clock = clock
        self.ttl = ttl
        self._by_key: dict[str, _Expectation] = {}

    def satisfied(self, key: str) -> bool:
        """True when nothing is pending for ``key`` (or what is pending has expired)."""
        exp = self._by_key.get(key)
        return exp is None or exp.fulfilled() or self.clock.now() - exp.timestamp > self.ttl

    def expect_creations(self, key: str, count: int) -> None:
        self._by_key[key] = _Expectation(adds=count, timestamp=self.clock.now())

    def expect_deletions(self, key: str, pod_keys: Iterable[str]) -> None:
        self._by_key[key] = _Expectation(deletes=set(pod_keys), timestamp=self.clock.now())

    def creation_observed(self, key: str) -> None:
        exp = self._by_key.get(key)
        if exp is not None:
            exp.adds -= 1

    def deletion_observed(self, key: str, pod_key: str) -> None:
        exp = self._by_key.get(key)
        if exp is not None:
            exp.deletes.discard(pod_key)

    def forget(self, key: str) -> None:
        self._by_key.pop(key, None)


class Wakeups:
    """An async iterable of Requests for ``Builder.source``: what informer handlers enqueue themselves."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Request] = asyncio.Queue()

    def add(self, namespace: str, name: str) -> None:
        self._queue.put_nowait(Request(namespace, name))

    async def __aiter__(self) -> AsyncIterator[Request]:
        while True:
            yield await self._queue.get()


async def adopt(client: Any, resource: str, obj: Obj, owner_ref: Mapping[str, Any]) -> bool:
    """Make ``owner_ref`` the controller of ``obj`` (guarded by its uid); False if it is gone."""
    body = {"metadata": {"ownerReferences": [dict(owner_ref)], "uid": meta(obj)["uid"]}}
    return await _patch_refs(client, resource, obj, body)


async def release(client: Any, resource: str, obj: Obj, owner_uid: str) -> bool:
    """Drop the owner reference of ``owner_uid`` from ``obj`` (guarded by its uid); False if it is gone."""
    body = {"metadata": {"ownerReferences": [{"$patch": "delete", "uid": owner_uid}], "uid": meta(obj)["uid"]}}
    return await _patch_refs(client, resource, obj, body)


async def _patch_refs(client: Any, resource: str, obj: Obj, body: Mapping[str, Any]) -> bool:
    m = meta(obj)
    with contextlib.suppress(NotFound):
        await client.patch(resource, m["name"], body, "strategic", namespace=m.get("namespace"))
        return True
    return False


async def claim(client: Any, resource: str, owner: Obj, owner_ref: Mapping[str, Any], selector: Any,
                objects: Iterable[Obj]) -> list[Obj]:
    """The ControllerRefManager's ``Claim*``: the objects ``owner`` controls after adopting matching orphans
    and releasing what it controls but no longer matches."""
    owner_meta = meta(owner)
    owner_deleted = bool(owner_meta.get("deletionTimestamp"))
    claimed: list[Obj] = []
    for obj in objects:
        ref = controller_of(obj)
        matches = selector.matches(meta(obj).get("labels") or {})
        if ref is not None:
            if ref.get("uid") != owner_meta["uid"]:
                continue
            if matches:
                claimed.append(obj)
            elif not owner_deleted:
                await release(client, resource, obj, owner_meta["uid"])
            continue
        if owner_deleted or not matches or is_being_deleted(obj):
            continue
        if meta(obj).get("namespace") != owner_meta.get("namespace"):
            continue
        if await adopt(client, resource, obj, owner_ref):
            claimed.append(obj)
    return claimed

