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
    if 0 < limit < _ENCODER_DEPTH:
        levels = _ENCODER_DEPTH - limit
        try:
            wrapper = _WRAPPERS.pop()
        except IndexError:
            wrapper = _wrapper(levels)
        if wrapper[0] != levels:
            wrapper = _wrapper(levels)
        inner = wrapper[2]
        inner.append(doc)
        try:
            orjson.dumps(wrapper[1])
            return False
        except TypeError:  # too deep, or not JSON data: the walk below tells
            pass
        finally:
            inner.clear()
            _WRAPPERS.append(wrapper)
    return _walk_too_deep(doc, limit)


def too_deep_at(value: Any, level: int) -> bool:
    """Whether ``value``, found at ``level`` of a document (the root is level 1), nests below :data:`MAX_DEPTH`."""
    if type(value) is not dict and type(value) is not list:
        return False
    for _ in range(level - 1):  # the levels above it, as lists (a few: too_deep's wrappers are of one size)
        value = [value]
    return too_deep(value)


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
