"""The DefaultStorageClass admission plugin: a new claim that names no class gets the default one.

Invariants (kube's ``plugin/pkg/admission/storage/storageclass/setdefault``):

* Only a PersistentVolumeClaim created without ``spec.storageClassName`` (absent or null; ``""`` asks for no class)
  and without the beta ``volume.beta.kubernetes.io/storage-class`` annotation is changed.
* The default class is a StorageClass annotated ``storageclass.kubernetes.io/is-default-class: "true"`` (or
  the beta annotation); of several, the newest by ``creationTimestamp``, then the first by name. Without one
  the claim is left as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..storage.watchcache import WatchCache

__all__ = ["default_class_name", "default_storage_class"]

SC_PREFIX = "/registry/storage.k8s.io/storageclasses/"
DEFAULT_ANNOTATIONS = ("storageclass.kubernetes.io/is-default-class",
                       "storageclass.beta.kubernetes.io/is-default-class")
BETA_CLAIM_ANNOTATION = "volume.beta.kubernetes.io/storage-class"


def default_class_name(classes: list[Mapping[str, Any]]) -> str | None:
    """The name of the default class among ``classes`` (StorageClass objects), or None."""
    defaults = [(meta.get("creationTimestamp") or "", meta.get("name") or "")
                for meta in (c.get("metadata") or {} for c in classes)
                if any((meta.get("annotations") or {}).get(a) == "true" for a in DEFAULT_ANNOTATIONS)]
    if not defaults:
        return None
    newest = max(created for created, _ in defaults)
    return min(name for created, name in defaults if created == newest)


def default_storage_class(cache: WatchCache, claim: dict[str, Any]) -> None:
    """Set ``spec.storageClassName`` of a new ``claim`` to the default class, when it asks for none."""
    spec = claim.get("spec")
    if not isinstance(spec, dict) or spec.get("storageClassName") is not None:
        return
    if ((claim.get("metadata") or {}).get("annotations") or {}).get(BETA_CLAIM_ANNOTATION):
        return
    bucket = cache.buckets.get(SC_PREFIX)
    name = default_class_name([co.obj for co in bucket.objects.values()]) if bucket is not None else None
    if name is not None:
        spec["storageClassName"] = name
