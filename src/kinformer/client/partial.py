"""``meta.k8s.io/v1`` PartialObjectMetadata cut from whole objects in one decoding pass.

A metadata-only informer caches PartialObjectMetadata (kind, apiVersion, metadata). A server that ignores
``as=PartialObjectMetadata`` sends whole objects, which are cut down here: one msgspec pass over the object
decodes its ``metadata`` into a struct that keeps every ObjectMeta field as raw JSON (name, namespace and
resourceVersion decoded, as a :class:`~kinformer.client.objects.LazyObject`'s fast fields) and skips
everything else; the struct is encoded back (raw fields copied verbatim, in ObjectMeta's order, managedFields
last, or left out when the caller drops it as an informer's default transform would) and becomes the LazyObject
with its fast fields set, so nothing is decoded twice.

Invariants: the result is equal, as a mapping, to ``{"kind": "PartialObjectMetadata", "apiVersion":
"meta.k8s.io/v1", "metadata": <the object's metadata>}``; a metadata field this module does not know (a newer
API), or metadata that is not an object of the expected shape, takes the general path (the metadata cut out
as raw JSON, whatever it holds), never a lossy one. The result references no buffer but its own bytes,
except an object that already was a PartialObjectMetadata, which is kept over its input as it came.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType

from kinformer.client.objects import LazyObject, _Meta
from kinformer.untrack import gc_untrack

__all__ = ["PARTIAL_API_VERSION", "PARTIAL_KIND", "is_partial", "partial_from_raw", "to_partial_object_metadata"]

PARTIAL_KIND = "PartialObjectMetadata"
PARTIAL_API_VERSION = "meta.k8s.io/v1"
_HEAD = b'{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":'
_MF = b'"managedFields":'
_TAIL = b"}}"


class _ObjectMeta(Struct, forbid_unknown_fields=True, gc=False):
    """Every field of Kubernetes' ObjectMeta (1.32), in its JSON order; unknown fields fail the decode."""

    name: str | UnsetType = UNSET
    generateName: Raw | UnsetType = UNSET
    namespace: str | UnsetType = UNSET
    selfLink: Raw | UnsetType = UNSET
    uid: Raw | UnsetType = UNSET
    resourceVersion: str | UnsetType = UNSET
    generation: Raw | UnsetType = UNSET
    creationTimestamp: Raw | UnsetType = UNSET
    deletionTimestamp: Raw | UnsetType = UNSET
    deletionGracePeriodSeconds: Raw | UnsetType = UNSET
    labels: Raw | UnsetType = UNSET
    annotations: Raw | UnsetType = UNSET
    ownerReferences: Raw | UnsetType = UNSET
    finalizers: Raw | UnsetType = UNSET
    managedFields: Raw | UnsetType = UNSET


class _Source(Struct, gc=False):
    """An object's type and metadata (its other members are skipped)."""

    kind: str | UnsetType = UNSET
    apiVersion: str | UnsetType = UNSET
    metadata: _ObjectMeta | UnsetType = UNSET


class _RawMetadata(Struct, gc=False):
    metadata: Raw = Raw(b"{}")


_decode_source = msgspec.json.Decoder(_Source).decode
_decode_raw_metadata = msgspec.json.Decoder(_RawMetadata).decode
_encode = msgspec.json.Encoder().encode


def is_partial(obj: Any) -> bool:
    """Whether ``obj`` (any mapping) is a PartialObjectMetadata."""
    try:
        return bool(obj.get("kind") == PARTIAL_KIND)
    except AttributeError:
        return False


def partial_from_raw(raw: bytes | Raw, drop_managed_fields: bool = False) -> LazyObject:
    """The PartialObjectMetadata of one object's JSON ``raw`` (whole or already partial); with
    ``drop_managed_fields``, as its :meth:`~kinformer.client.objects.LazyObject.without_managed_fields` copy
    would be (the managedFields a whole object carries is then skipped, never copied)."""
    try:
        source = _decode_source(raw)
    except msgspec.DecodeError:
        return _dropped(_partial_by_cutting(raw), drop_managed_fields)
    meta = source.metadata
    if meta is UNSET:
        return _dropped(_partial_by_cutting(raw), drop_managed_fields)
    fast = _Meta(meta.name, meta.namespace, meta.resourceVersion, meta.managedFields)
    if source.kind == PARTIAL_KIND and source.apiVersion == PARTIAL_API_VERSION:
        return _dropped(LazyObject(raw, fast), drop_managed_fields)  # already cut down by the server
    managed = meta.managedFields
    if managed is UNSET or drop_managed_fields:
        meta.managedFields = fast.managedFields = UNSET
        data = b"".join((_HEAD, _encode(meta), b"}"))
        # without_managed_fields would not have cut a copy whose metadata holds the key elsewhere: be that copy
        if managed is UNSET or data.find(_MF) < 0:
            obj = LazyObject(data, fast)
            if drop_managed_fields:
                gc_untrack(obj)  # as without_managed_fields's compact copy
            return obj
        return _with_managed_fields_last(meta, managed, fast).without_managed_fields()
    return _with_managed_fields_last(meta, managed, fast)


def _with_managed_fields_last(meta: _ObjectMeta, managed: Raw, fast: _Meta) -> LazyObject:
    """The PartialObjectMetadata of ``meta`` with ``managed`` as its managedFields, the last member."""
    meta.managedFields = UNSET
    body = memoryview(_encode(meta))[:-1]  # without its closing brace: managedFields goes last
    sep = b"," if len(body) > 1 else b""
    data = b"".join((_HEAD, body, sep, _MF, managed, _TAIL))
    start = len(_HEAD) + len(body) + len(sep) + len(_MF)
    fast.managedFields = Raw(memoryview(data)[start:len(data) - len(_TAIL)])
    return LazyObject(data, fast)


def _dropped(obj: LazyObject, drop_managed_fields: bool) -> LazyObject:
    return obj.without_managed_fields() if drop_managed_fields else obj


def _partial_by_cutting(raw: bytes | Raw) -> LazyObject:
    """The general path: the metadata cut out as raw JSON, whatever it holds (decoded again for its key)."""
    return LazyObject(_HEAD + bytes(_decode_raw_metadata(raw).metadata) + b"}")


def to_partial_object_metadata(obj: Any, *, drop_managed_fields: bool = False) -> LazyObject:
    """``obj`` (a whole object: a LazyObject or any mapping) as a ``meta.k8s.io/v1`` PartialObjectMetadata
    (``drop_managed_fields``: see :func:`partial_from_raw`)."""
    raw = obj._raw if isinstance(obj, LazyObject) else msgspec.json.encode(obj)
    return partial_from_raw(raw, drop_managed_fields)
