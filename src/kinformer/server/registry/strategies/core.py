"""Strategies of core/v1 kinds other than Pods and Services.

* Namespaces start Active with the ``kubernetes`` finalizer; spec (finalizers) and status change only
  through ``/finalize`` and ``/status``.
* Secrets: ``stringData`` is write-only (merged into ``data``, then dropped); ``data`` values are
  decoded as Go does (line breaks ignored) and stored re-encoded on one line; ``type`` never changes.
* ConfigMaps and Secrets with ``immutable: true`` keep their data (and immutability) forever.
* ReplicationControllers carry a generation; PersistentVolume(Claim)s start Pending; ServiceAccounts,
  PVs and PVCs are returned by DELETE.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from .base import Cause, GenerationStrategy, KindStrategy, ReturnedOnDeleteMixin, forbidden, invalid
from .workload_rules import replicas_causes

NAMESPACE_FINALIZER = "kubernetes"


class NamespaceStrategy(ReturnedOnDeleteMixin, KindStrategy):
    def create(self, obj: dict[str, Any]) -> None:
        spec = spec if isinstance(spec := obj.get("spec"), dict) else {}
        finalizers = [f for f in spec.get("finalizers") or () if isinstance(f, str)]
        if NAMESPACE_FINALIZER not in finalizers:
            finalizers.append(NAMESPACE_FINALIZER)
        spec["finalizers"] = finalizers
        obj["spec"] = spec
        obj["status"] = {"phase": "Active"}

    def update(self, obj: dict[str, Any], old: Mapping[str, Any]) -> None:
        if "spec" in old:
            obj["spec"] = old["spec"]
        if "status" in old:
            obj["status"] = old["status"]


def go_base64(value: str) -> bytes:
    """Decode like Go's StdEncoding.DecodeString: ``\\r`` and ``\\n`` are ignored, anything else is strict."""
    return base64.b64decode(value.replace("\r", "").replace("\n", ""), validate=True)


def _normalize_secret_data(obj: dict[str, Any]) -> None:
    """Re-encode ``data`` values on one line and merge ``stringData`` into ``data`` (stringData wins)."""
    data = obj.get("data")
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, str) and ("\n" in value or "\r" in value):
                try:
                    data[key] = base64.b64encode(go_base64(value)).decode()
                except (binascii.Error, ValueError):
                    pass  # left for validation to report as illegal base64 data
    string_data = obj.get("stringData")
    if isinstance(string_data, dict):
        merged = dict(data) if isinstance(data, dict) else {}
        for key, value in string_data.items():
            if isinstance(value, str):
                merged[key] = base64.b64encode(value.encode()).decode()
        obj["data"] = merged
        del obj["stringData"]


def immutable_data_causes(obj: Mapping[str, Any], old: Mapping[str, Any], fields: tuple[str, ...]) -> list[Cause]:
    """An object once ``immutable: true`` keeps that flag and its data."""
    if old.get("immutable") is not True:
        return []
    causes: list[Cause] = []
    if obj.get("immutable") is not True:
        causes.append(forbidden("immutable", "field is immutable when `immutable` is set"))
    if any((obj.get(f) or {}) != (old.get(f) or {}) for f in fields):
        causes.append(forbidden("data", "field is immutable when `immutable` is set"))
    return causes


class SecretStrategy(KindStrategy):
    def create(self, obj: dict[str, Any]) -> None:
        _normalize_secret_data(obj)

    def update(self, obj: dict[str, Any], old: Mapping[str, Any]) -> None:
        _normalize_secret_data(obj)

    def update_causes(self, obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
        causes = immutable_data_causes(obj, old, ("data",))
        if obj.get("type") != old.get("type"):
            causes.append(invalid("type", obj.get("type"), "field is immutable"))
        return causes


class ConfigMapStrategy(KindStrategy):
    def update_causes(self, obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
        return immutable_data_causes(obj, old, ("data", "binaryData"))


class ReturnedOnDelete(ReturnedOnDeleteMixin, KindStrategy):
    pass


class PersistentVolumeStrategy(ReturnedOnDeleteMixin, KindStrategy):
    resets_status = True

    def initial_status(self) -> dict[str, Any]:
        return {"phase": "Pending"}


class ReplicationControllerStrategy(GenerationStrategy):
    def initial_status(self) -> dict[str, Any]:
        return {"replicas": 0}

    def causes(self, obj: Mapping[str, Any]) -> list[Cause]:
        spec = obj.get("spec")
        return replicas_causes(spec) if isinstance(spec, Mapping) else []


class NodeStrategy(KindStrategy):
    """Nodes keep the status they are created with (kube's nodeStrategy: a kubelet registers its node with
    capacity, allocatable and conditions in one create); later writes change status only through nodes/status."""


class StatusResetStrategy(KindStrategy):
    """A kind with a status subresource and no generation: create starts status empty."""

    resets_status = True

    def initial_status(self) -> None:
        return None


STRATEGIES: dict[str, KindStrategy] = {
    "namespaces": NamespaceStrategy(),
    "secrets": SecretStrategy(),
    "configmaps": ConfigMapStrategy(),
    "serviceaccounts": ReturnedOnDelete(),
    "persistentvolumes": PersistentVolumeStrategy(),
    "persistentvolumeclaims": PersistentVolumeStrategy(),
    "replicationcontrollers": ReplicationControllerStrategy(),
    "resourcequotas": StatusResetStrategy(),
    "nodes": NodeStrategy(),
}
