"""Storage object in-use protection: claims and volumes outlive the pods and claims that use them.

Invariants (kube's StorageObjectInUseProtection admission and its pvc-protection and pv-protection
controllers):

* A PersistentVolumeClaim is created with the ``kubernetes.io/pvc-protection`` finalizer, a PersistentVolume
  with ``kubernetes.io/pv-protection``, so a delete first marks them terminating.
* A terminating claim loses its finalizer once no pod of its namespace that is scheduled (``spec.nodeName``
  set) uses it, through ``persistentVolumeClaim.claimName`` or as the claim of a generic ephemeral volume
  (``<pod>-<volume>``) of a pod that has not ended. Pods the server never schedules do not hold a claim.
* A terminating volume loses its finalizer once it is not ``Bound`` (``status.phase``).
* Any change of a claim or a volume triggers a pass (the :class:`CacheController` loop), and so does a pod's
  while a terminating claim is held: a pod write costs nothing otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..controllers.cachecontroller import CacheController, remove_finalizer
from ..registry.objects import ObjectStore
from ..registry.resources import Registry, ResourceInfo
from ..storage.watchcache import CachedEvent, WatchCache

__all__ = ["PVC_FINALIZER", "PV_FINALIZER", "StorageProtection", "claim_in_use", "protect"]

PVC_FINALIZER = "kubernetes.io/pvc-protection"
PV_FINALIZER = "kubernetes.io/pv-protection"
_FINALIZERS = {"persistentvolumeclaims": PVC_FINALIZER, "persistentvolumes": PV_FINALIZER}
_PODS_PREFIX = "/registry/core/pods/"


def protect(plural: str, obj: dict[str, Any]) -> None:
    """At create: give a claim or a volume its protection finalizer (other kinds are left alone)."""
    finalizer = _FINALIZERS.get(plural)
    meta = obj.get("metadata")
    if finalizer is None or not isinstance(meta, dict):
        return
    finalizers = meta.get("finalizers")
    if not isinstance(finalizers, list):
        meta["finalizers"] = [finalizer]
    elif finalizer not in finalizers:
        finalizers.append(finalizer)


def claim_in_use(claim: str, pods: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a scheduled pod among ``pods`` (of the claim's namespace) uses the claim named ``claim``."""
    for pod in pods:
        spec = pod.get("spec") or {}
        if not spec.get("nodeName"):
            continue
        name = (pod.get("metadata") or {}).get("name", "")
        ended = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        for volume in spec.get("volumes") or ():
            if not isinstance(volume, Mapping):
                continue
            if (volume.get("persistentVolumeClaim") or {}).get("claimName") == claim:
                return True
            if volume.get("ephemeral") is not None and not ended and f"{name}-{volume.get('name')}" == claim:
                return True
    return False


class StorageProtection(CacheController):
    """Removes the protection finalizers of the module invariants when nothing uses the object any more."""

    what = "storage object in-use protection"

    def __init__(self, cache: WatchCache, store: ObjectStore, registry: Registry, *, retry: float = 1.0) -> None:
        claims = registry.get("", "v1", "persistentvolumeclaims")
        volumes = registry.get("", "v1", "persistentvolumes")
        assert claims is not None and volumes is not None
        super().__init__(cache, store, claims.storage_prefix, also=(volumes.storage_prefix, _PODS_PREFIX), retry=retry)
        self.claims, self.volumes = claims, volumes
        self._held = False  # a terminating claim is held by a pod: only then do pod changes matter

    def _on_event(self, prefix: str, ev: CachedEvent) -> None:
        if prefix != _PODS_PREFIX or self._held:  # called for claims, volumes and pods only
            self._dirty.set()

    def _objects(self, prefix: str) -> list[Mapping[str, Any]]:
        bucket = self.cache.buckets.get(prefix)
        return [co.obj for co in bucket.objects.values()] if bucket is not None else []

    async def sync(self) -> int:
        """One pass over the terminating claims and volumes; returns how many lost their finalizer."""
        claims = [meta for meta in (c.get("metadata") or {} for c in self._objects(self._prefix))
                  if self._terminating(meta, PVC_FINALIZER)]
        pods_by_ns: dict[str, list[Mapping[str, Any]]] = {}
        if claims:  # pods are looked at only while a claim is being deleted
            namespaces = {meta.get("namespace", "") for meta in claims}
            for pod in self._objects(_PODS_PREFIX):
                ns = (pod.get("metadata") or {}).get("namespace", "")
                if ns in namespaces:
                    pods_by_ns.setdefault(ns, []).append(pod)
        written, held = 0, False
        for meta in claims:
            if claim_in_use(meta.get("name", ""), pods_by_ns.get(meta.get("namespace", ""), ())):
                held = True
            else:
                written += await self._release(self.claims, meta, PVC_FINALIZER)
        self._held = held
        for volume in self._objects(self.volumes.storage_prefix):
            meta = volume.get("metadata") or {}
            if self._terminating(meta, PV_FINALIZER) and (volume.get("status") or {}).get("phase") != "Bound":
                written += await self._release(self.volumes, meta, PV_FINALIZER)
        return written

    @staticmethod
    def _terminating(meta: Mapping[str, Any], finalizer: str) -> bool:
        return bool(meta.get("deletionTimestamp")) and finalizer in (meta.get("finalizers") or ())

    async def _release(self, info: ResourceInfo, meta: Mapping[str, Any], finalizer: str) -> int:
        return int(await remove_finalizer(self.store, info, meta.get("namespace", ""), meta.get("name", ""), finalizer))
