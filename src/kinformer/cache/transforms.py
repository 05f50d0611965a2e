"""Transforms an informer applies to every object before caching it (client-go's TransformFunc).

A transform returns a new object (or the same one, unchanged); it never modifies its argument, which may be
shared with other informers or a cache.

The default transform (and :func:`strip_last_applied`, which begins with it) drops ``metadata.managedFields``.
A ListerWatcher that can decode its objects without managedFields in the first place offers
``without_managed_fields()`` (a ListerWatcher doing so, or None when it cannot); :func:`decoding_transform` then
hands the reflector that one and what is left of the transform, so no object is built with managedFields only to
be copied without them. The cached objects are the very same (keys, values, bytes); a user transform, or a
ListerWatcher without the method, keeps the plain path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import FunctionType
from typing import Any

import orjson

from kinformer.listwatch import ListerWatcher

__all__ = ["DEFAULT_TRANSFORM", "LAST_APPLIED_ANNOTATION", "Transform", "decoding_transform", "for_class",
           "strip_last_applied", "strip_managed_fields"]

Transform = Callable[[Any], Any]

#: The annotation ``kubectl apply`` (client-side) keeps a whole copy of the applied object in.
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
_LAST_APPLIED = LAST_APPLIED_ANNOTATION.encode()


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


def for_class(transform: Transform, cls: type) -> Transform:
    """``transform`` as it applies to instances of ``cls``, for code that transforms many objects of one class
    to choose once: it returns what ``transform`` returns for every instance. For :func:`strip_managed_fields`
    and a class with a ``without_managed_fields`` method (the client's lazily decoded objects), that method
    itself (no frame of the transform's own per object); otherwise ``transform`` unchanged."""
    if transform is strip_managed_fields:
        method = getattr(cls, "without_managed_fields", None)
        if isinstance(method, FunctionType):
            return method
    return transform


def strip_last_applied(obj: Any) -> Any:
    """An opt-in transform: :func:`strip_managed_fields`, and the ``kubectl.kubernetes.io/last-applied-
    configuration`` annotation dropped too (often the largest part of an object's metadata). Objects without
    the annotation cost no more than :func:`strip_managed_fields`."""
    return _drop_last_applied(strip_managed_fields(obj))


def _drop_last_applied(obj: Any) -> Any:
    """``obj`` without the last-applied-configuration annotation (as it is when it has none)."""
    to_json = getattr(obj, "to_json", None)
    if to_json is not None and _LAST_APPLIED not in to_json():  # lazily decoded: look at the bytes first
        return obj
    try:
        annotations = obj["metadata"]["annotations"]
        if LAST_APPLIED_ANNOTATION not in annotations:
            return obj
    except (KeyError, TypeError, IndexError):
        return obj
    new = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
    meta = new["metadata"] = dict(new["metadata"])
    meta["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED_ANNOTATION}
    if not meta["annotations"]:
        del meta["annotations"]
    return type(obj).from_json(orjson.dumps(new)) if hasattr(type(obj), "from_json") else new


def decoding_transform(lw: ListerWatcher, transform: Transform | None) -> tuple[ListerWatcher, Transform | None]:
    """The (ListerWatcher, transform) a reflector should use for ``lw`` and ``transform``: when ``transform`` is
    :func:`strip_managed_fields` or :func:`strip_last_applied` and ``lw`` offers ``without_managed_fields()``,
    that ListerWatcher and what is left of the transform (nothing, or dropping the annotation); otherwise
    ``(lw, transform)`` as given. Either pair caches the same objects."""
    if transform is strip_managed_fields:
        rest: Transform | None = None
    elif transform is strip_last_applied:
        rest = _drop_last_applied
    else:
        return lw, transform
    make = getattr(lw, "without_managed_fields", None)
    decoding = make() if make is not None else None
    return (lw, transform) if decoding is None else (decoding, rest)
