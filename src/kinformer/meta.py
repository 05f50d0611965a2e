"""Object metadata accessors shared by the client and the cache (apimachinery's ``meta`` and client-go's
key functions): the cache key, the namespace and the resourceVersion of an unstructured object.

The key of an object is ``namespace/name`` when it is namespaced and ``name`` when it is cluster-scoped
(:func:`object_key` is the one place that spells it). Classes that carry these fields precomputed (the
client's lazily decoded objects, the cache's tombstones) register getters with
:func:`register_fast_metadata`; a getter returns the value, or None when that instance cannot answer fast
(then the generic path runs), and must agree exactly with the generic path.

This module imports nothing from the rest of kinformer, so every layer may use it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "Object",
    "fast_getters",
    "fast_resource_version",
    "kind_of",
    "meta_namespace_key",
    "namespace_of",
    "object_key",
    "register_fast_metadata",
    "resource_version_of",
    "split_meta_namespace_key",
]

#: An object in its unstructured JSON form, read like a dict (cached objects are read-only by contract).
Object = Mapping[str, Any]

_Getter = Callable[[Any], "str | None"]
_FAST_KEY: dict[type, _Getter] = {}
_FAST_NAMESPACE: dict[type, _Getter] = {}
_FAST_RESOURCE_VERSION: dict[type, _Getter] = {}
_FAST_KIND: dict[type, _Getter] = {}


def register_fast_metadata(cls: type, *, key: _Getter | None = None, namespace: _Getter | None = None,
                           resource_version: _Getter | None = None, kind: _Getter | None = None) -> None:
    """Let the accessors here read ``cls`` instances through the given getters (see the module docstring)."""
    for table, getter in ((_FAST_KEY, key), (_FAST_NAMESPACE, namespace),
                          (_FAST_RESOURCE_VERSION, resource_version), (_FAST_KIND, kind)):
        if getter is not None:
            table[cls] = getter


def fast_getters(cls: type) -> tuple[_Getter | None, _Getter | None, _Getter | None]:
    """The fast ``(key, namespace, resourceVersion)`` getters registered for ``cls`` (None where there is none),
    for code that handles many objects of one class to look up once; each getter still answers None for an
    instance that cannot answer fast (then the generic accessor above runs)."""
    return _FAST_KEY.get(cls), _FAST_NAMESPACE.get(cls), _FAST_RESOURCE_VERSION.get(cls)


def object_key(namespace: str | None, name: str) -> str:
    """``namespace/name``, or ``name`` when ``namespace`` is empty (cluster-scoped)."""
    return f"{namespace}/{name}" if namespace else name


def meta_namespace_key(obj: Any) -> str:
    """The key of ``obj`` (client-go's MetaNamespaceKeyFunc): see :func:`object_key`.

    A plain string is taken as a key already (client-go's ExplicitKey), a registered class answers through
    its getter (a cache tombstone yields its recorded key). Raise ValueError for an object without a
    non-empty string ``metadata.name``.
    """
    fast = _FAST_KEY.get(obj.__class__)
    if fast is not None:
        key = fast(obj)
        if key:
            return key
    try:
        meta = obj["metadata"]
        name = meta["name"]
    except TypeError:
        if isinstance(obj, str):
            return obj
        raise ValueError(f"object has no metadata: {type(obj).__name__}") from None
    except KeyError:
        raise ValueError("object has no metadata.name") from None
    if not name or name.__class__ is not str:
        raise ValueError(f"metadata.name must be a non-empty string, got {name!r}")
    return object_key(meta.get("namespace"), name)


def split_meta_namespace_key(key: str) -> tuple[str, str]:
    """Split a key made by :func:`meta_namespace_key` into ``(namespace, name)``; namespace "" if none."""
    parts = key.split("/")
    if len(parts) == 1:
        return "", parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise ValueError(f"unexpected key format: {key!r}")


def namespace_of(obj: Any) -> str:
    """``obj``'s ``metadata.namespace`` ("" for cluster-scoped objects)."""
    fast = _FAST_NAMESPACE.get(obj.__class__)
    if fast is not None:
        ns = fast(obj)
        if ns is not None:
            return ns
    return obj["metadata"].get("namespace") or ""


def fast_resource_version(obj: Any) -> str | None:
    """``obj``'s resourceVersion when its class registered a fast getter and it can answer, else None."""
    getter = _FAST_RESOURCE_VERSION.get(obj.__class__)
    return None if getter is None else getter(obj)


def kind_of(obj: Mapping[str, Any]) -> Any:
    """``obj.get("kind")``; a class with a fast getter answers without decoding what it has not decoded (the
    client's lazily decoded objects read only the head of their JSON), e.g. to tell a ``Status`` answer from an
    object."""
    fast = _FAST_KIND.get(obj.__class__)
    if fast is not None:
        kind = fast(obj)
        if kind is not None:
            return kind
    return obj.get("kind")


def resource_version_of(obj: Any) -> str:
    """``obj``'s ``metadata.resourceVersion`` ("" when it has none)."""
    fast = fast_resource_version(obj)
    if fast is not None:
        return fast
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    return (meta.get("resourceVersion") if isinstance(meta, Mapping) else None) or ""
