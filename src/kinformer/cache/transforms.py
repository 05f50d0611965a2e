"""Transforms an informer applies to every object before caching it (client-go's TransformFunc).

A transform returns a new object (or the same one, unchanged); it never modifies its argument, which may be
shared with other informers or a cache.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["DEFAULT_TRANSFORM", "Transform", "strip_managed_fields"]

Transform = Callable[[Any], Any]


def strip_managed_fields(obj: Any) -> Any:
    """The default transform: ``obj`` without ``metadata.managedFields`` (a new top-level dict with a copied
    metadata; nested values are shared). Objects without managedFields are returned as they are."""
    without = getattr(obj, "without_managed_fields", None)  # lazily decoded client objects strip cheaply
    if without is not None:
        return without()
    try:
        meta = obj["metadata"]
        if "managedFields" not in meta:
            return obj
    except (KeyError, TypeError, IndexError):
        return obj
    if not isinstance(meta, Mapping):
        return obj
    new = dict(obj)
    new["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return new


DEFAULT_TRANSFORM: Transform = strip_managed_fields
