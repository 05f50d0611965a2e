"""How deeply JSON data nests: the :data:`MAX_DEPTH` limit every decoded document is held to.

Levels count containers (objects and arrays): a document's root container is level 1, a container inside it
level 2, and so on; scalars add none. A document is too deep when a container sits below level
:data:`MAX_DEPTH`, well under the 254 levels the JSON writer accepts, so whatever was read can be written back.
"""

from __future__ import annotations

from typing import Any

import orjson

MAX_DEPTH = 100
DEPTH_MESSAGE = f"exceeded max depth of {MAX_DEPTH}"


def _encoder_depth() -> int:
    """How many nested containers orjson writes (254 today); 0 when it is not the fixed limit measured here."""
    def nested(levels: int) -> list[Any]:
        value: list[Any] = []
        for _ in range(levels - 1):
            value = [value]
        return value

    limit = 254
    try:
        orjson.dumps(nested(limit))
    except TypeError:
        return 0
    try:
        orjson.dumps(nested(limit + 1))
    except TypeError:
        return limit
    return 0


_ENCODER_DEPTH = _encoder_depth()
# Reusable wrappers for too_deep, (limit, outermost list, innermost list), taken and put back whole (atomic).
_WRAPPERS: list[tuple[int, list[Any], list[Any]]] = []


def _wrapper(levels: int) -> tuple[int, list[Any], list[Any]]:
    """``levels`` lists nested in one another: (levels, the outermost, the innermost, empty)."""
    inner: list[Any] = []
    outer = inner
    for _ in range(levels - 1):
        outer = [outer]
    return levels, outer, inner


def too_deep(doc: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``doc`` (JSON data, no shared containers) nests objects/arrays more than ``limit`` levels.

    Measured by orjson, which refuses to write more than :data:`_ENCODER_DEPTH` levels: ``doc`` placed inside
    ``_ENCODER_DEPTH - limit`` lists is written unless it is too deep. What orjson cannot write for another reason
    (an integer beyond 64 bits, ...) is walked level by level.
    """
    if not isinstance(doc, dict | list):
        return False
    if 0 < limit < _ENCODER_DEPTH and _wrapped_encoding(doc, _ENCODER_DEPTH - limit) is not None:
        return False
    return _walk_too_deep(doc, limit)


def _wrapped_encoding(doc: Any, levels: int) -> bytes | None:
    """orjson's encoding of ``doc`` inside ``levels`` lists; None when orjson refuses it (too deep, or not JSON
    data)."""
    try:
        wrapper = _WRAPPERS.pop()
    except IndexError:
        wrapper = _wrapper(levels)
    if wrapper[0] != levels:
        wrapper = _wrapper(levels)
    inner = wrapper[2]
    inner.append(doc)
    try:
        return orjson.dumps(wrapper[1])
    except TypeError:
        return None
    finally:
        inner.clear()
        _WRAPPERS.append(wrapper)


def encoded_size(doc: Any, limit: int = MAX_DEPTH) -> int | None:
    """The size of ``doc``'s JSON encoding when ``doc`` (a container, JSON data) nests at most ``limit`` levels:
    the encoding :func:`too_deep` measures with, less its wrapping brackets; None when that measure does not tell
    (the caller asks :func:`too_deep` and encodes)."""
    if not 0 < limit < _ENCODER_DEPTH or (type(doc) is not dict and type(doc) is not list):
        return None
    data = _wrapped_encoding(doc, _ENCODER_DEPTH - limit)
    return None if data is None else len(data) - 2 * (_ENCODER_DEPTH - limit)


def too_deep_at(value: Any, level: int) -> bool:
    """Whether ``value``, found at ``level`` of a document (the root is level 1), nests below :data:`MAX_DEPTH`.

    A value found within the limit by orjson's measure is remembered with its encoding (:func:`encoding_of`).
    """
    if type(value) is not dict and type(value) is not list:
        return False
    wrapped = value
    for _ in range(level - 1):  # the levels above it, as lists (a few: too_deep's wrappers are of one size)
        wrapped = [wrapped]
    if not 0 < MAX_DEPTH < _ENCODER_DEPTH:
        return too_deep(wrapped)
    data = _wrapped_encoding(wrapped, _ENCODER_DEPTH - MAX_DEPTH)
    if data is None:
        return _walk_too_deep(wrapped, MAX_DEPTH)
    lists = _ENCODER_DEPTH - MAX_DEPTH + level - 1  # the brackets around the value's own encoding, each side
    _last_encoded[0] = (value, data[lists:-lists])
    return False


# The value too_deep_at last found within the limit, and its encoding (orjson.dumps of it), for encoding_of
_last_encoded: list[tuple[Any, bytes] | None] = [None]


def encoding_of(value: Any) -> bytes:
    """``orjson.dumps(value)``; the encoding :func:`too_deep_at` made of this very object when it measured it last.

    Exact while the measured value is not changed in place afterwards, which holds for what it measures: a decoded
    request body's ``metadata.managedFields``, which the server replaces and never edits. The value is held until
    the next measure, so its identity cannot pass to another object.
    """
    last = _last_encoded[0]
    if last is not None and last[0] is value:
        return last[1]
    return orjson.dumps(value)


def _walk_too_deep(doc: Any, limit: int) -> bool:
    level = [doc] if isinstance(doc, dict | list) else []
    for _ in range(limit):  # level by level: the containers at depth 1, 2, ...
        if not level:
            return False
        deeper = []
        for node in level:
            deeper += [c for c in (node.values() if isinstance(node, dict) else node) if isinstance(c, dict | list)]
        level = deeper
    return bool(level)
