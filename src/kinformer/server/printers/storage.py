"""Printers of volumes: core/v1 PersistentVolumes and claims, and the storage.k8s.io kinds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..endpoints.table_cells import UNSET, age_of, as_list, as_map, field, mappings, name_of, quantity, text
from .table import AGE, NAME, Doc, Printer, col

_CORE = "api.core.v1."
_STORAGE = "api.storage.v1."
_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
_MODES = (("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"), ("ReadWriteOncePod", "RWOP"))


def access_modes(modes: Any) -> str:
    """ACCESS MODES: the short names (RWO, ROX, RWX, RWOP) of the modes present, in that order."""
    present = {m for m in as_list(modes) if isinstance(m, str)}
    return ",".join(short for mode, short in _MODES if mode in present)


def _phase(obj: Mapping[str, Any]) -> str:
    """The status phase, ``Terminating`` once the object is being deleted."""
    if field(obj, "metadata", "deletionTimestamp"):
        return "Terminating"
    return text(field(obj, "status", "phase"))


def _storage_class(obj: Mapping[str, Any]) -> str:
    """The beta storage-class annotation when present, else ``spec.storageClassName``."""
    annotations = as_map(field(obj, "metadata", "annotations"))
    if _CLASS_ANNOTATION in annotations:
        return str(annotations[_CLASS_ANNOTATION])
    return text(field(obj, "spec", "storageClassName"))


def _unset_or(value: Any) -> str:
    return UNSET if value is None else str(value)


def _pv_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    """CLAIM as namespace/name of the bound claim; CAPACITY the storage quantity."""
    spec = as_map(obj.get("spec"))
    ref = spec.get("claimRef")
    claim = f"{ref.get('namespace') or ''}/{ref.get('name') or ''}" if isinstance(ref, Mapping) else ""
    return [name_of(obj), quantity(field(spec, "capacity", "storage")), access_modes(spec.get("accessModes")),
            text(spec.get("persistentVolumeReclaimPolicy")), _phase(obj), claim, _storage_class(obj),
            _unset_or(spec.get("volumeAttributesClassName")), text(field(obj, "status", "reason")), age_of(obj, now),
            _unset_or(spec.get("volumeMode"))]


_PV_SPEC = _CORE + "PersistentVolumeSpec"
PERSISTENTVOLUME = Printer((
    NAME,
    col("Capacity", description=Doc(_PV_SPEC, "capacity")),
    col("Access Modes", description=Doc(_PV_SPEC, "accessModes")),
    col("Reclaim Policy", description=Doc(_PV_SPEC, "persistentVolumeReclaimPolicy")),
    col("Status", description=Doc(_CORE + "PersistentVolumeStatus", "phase")),
    col("Claim", description=Doc(_PV_SPEC, "claimRef")),
    col("StorageClass", description="StorageClass of the pv"),
    col("VolumeAttributesClass", description="VolumeAttributesClass of the pv"),
    col("Reason", description=Doc(_CORE + "PersistentVolumeStatus", "reason")),
    AGE,
    col("VolumeMode", priority=1, description=Doc(_PV_SPEC, "volumeMode")),
), _pv_row)


def _pvc_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    """CAPACITY and ACCESS MODES come from the status, and only once the claim names its volume."""
    spec = as_map(obj.get("spec"))
    volume = text(spec.get("volumeName"))
    capacity = modes = ""
    if volume:
        capacity = quantity(field(obj, "status", "capacity", "storage"))
        modes = access_modes(field(obj, "status", "accessModes"))
    return [name_of(obj), _phase(obj), volume, capacity, modes, _storage_class(obj),
            _unset_or(spec.get("volumeAttributesClassName")), age_of(obj, now), _unset_or(spec.get("volumeMode"))]


_PVC = _CORE + "PersistentVolumeClaim"
PERSISTENTVOLUMECLAIM = Printer((
    NAME,
    col("Status", description=Doc(_PVC + "Status", "phase")),
    col("Volume", description=Doc(_PVC + "Spec", "volumeName")),
    col("Capacity", description=Doc(_PVC + "Status", "capacity")),
    col("Access Modes", description=Doc(_PVC + "Status", "accessModes")),
    col("StorageClass", description="StorageClass of the pvc"),
    col("VolumeAttributesClass", description="VolumeAttributesClass of the pvc"),
    AGE,
    col("VolumeMode", priority=1, description=Doc(_PVC + "Spec", "volumeMode")),
), _pvc_row)


def _is_default_class(obj: Mapping[str, Any]) -> bool:
    annotations = as_map(field(obj, "metadata", "annotations"))
    return "true" in (annotations.get("storageclass.kubernetes.io/is-default-class"),
                      annotations.get("storageclass.beta.kubernetes.io/is-default-class"))


def _storageclass_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    """NAME marked `` (default)`` for the default class; Delete, Immediate and false when unset."""
    name = name_of(obj) + (" (default)" if _is_default_class(obj) else "")
    return [name, text(obj.get("provisioner")), str(obj.get("reclaimPolicy") or "Delete"),
            str(obj.get("volumeBindingMode") or "Immediate"), obj.get("allowVolumeExpansion") is True,
            age_of(obj, now)]


_SC = _STORAGE + "StorageClass"
STORAGECLASS = Printer((
    NAME,
    col("Provisioner", description=Doc(_SC, "provisioner")),
    col("ReclaimPolicy", description=Doc(_SC, "reclaimPolicy")),
    col("VolumeBindingMode", description=Doc(_SC, "volumeBindingMode")),
    col("AllowVolumeExpansion", description=Doc(_SC, "allowVolumeExpansion")),
    AGE,
), _storageclass_row)


def _csidriver_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    """The spec's flags with their defaults (attach required, nothing else), token audiences and modes."""
    spec = as_map(obj.get("spec"))
    tokens = spec.get("tokenRequests")
    audiences = UNSET if tokens is None else ",".join(str(t.get("audience") or "") for t in mappings(tokens))
    modes = ",".join(str(m) for m in as_list(spec.get("volumeLifecycleModes"))) or "<none>"
    return [name_of(obj), spec.get("attachRequired") is not False, spec.get("podInfoOnMount") is True,
            spec.get("storageCapacity") is True, audiences, spec.get("requiresRepublish") is True, modes,
            age_of(obj, now)]


_CSI = _STORAGE + "CSIDriverSpec"
CSIDRIVER = Printer((
    NAME,
    col("AttachRequired", "boolean", description=Doc(_CSI, "attachRequired")),
    col("PodInfoOnMount", "boolean", description=Doc(_CSI, "podInfoOnMount")),
    col("StorageCapacity", "boolean", description=Doc(_CSI, "storageCapacity")),
    col("TokenRequests", description=Doc(_CSI, "tokenRequests")),
    col("RequiresRepublish", "boolean", description=Doc(_CSI, "requiresRepublish")),
    col("Modes", description=Doc(_CSI, "volumeLifecycleModes")),
    AGE,
), _csidriver_row)

CSINODE = Printer((
    NAME, col("Drivers", "integer", description="Drivers indicates the number of CSI drivers registered on the node"),
    AGE,
), lambda obj, now: [name_of(obj), len(as_list(field(obj, "spec", "drivers"))), age_of(obj, now)])


def _attachment_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    spec = as_map(obj.get("spec"))
    return [name_of(obj), text(spec.get("attacher")), text(field(spec, "source", "persistentVolumeName")),
            text(spec.get("nodeName")), field(obj, "status", "attached") is True, age_of(obj, now)]


_VA = _STORAGE + "VolumeAttachment"
VOLUMEATTACHMENT = Printer((
    NAME,
    col("Attacher", fmt="name", description=Doc(_VA + "Spec", "attacher")),
    col("PV", description=Doc(_VA + "Source", "persistentVolumeName")),
    col("Node", description=Doc(_VA + "Spec", "nodeName")),
    col("Attached", "boolean", description=Doc(_VA + "Status", "attached")),
    AGE,
), _attachment_row)
