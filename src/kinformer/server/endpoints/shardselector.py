"""The ``shardSelector`` of list and watch (KEP-5866, server-side sharded list and watch; alpha in kube).

Grammar: one or more ``shardRange(FIELD, 'START', 'END')`` joined by ``||``, every range on the same FIELD,
``object.metadata.uid`` or ``object.metadata.namespace``. START and END are ``0x``-prefixed hex numbers,
the range is ``[START, END)`` over the 64-bit FNV-1a hash of the field's value (END may be
``0x10000000000000000``, 2^64); an object matches when its hash falls in any of the ranges. Example, the
lower half of the hash space: ``shardRange(object.metadata.uid, '0x0', '0x8000000000000000')``.

Limits: at most :data:`MAX_SELECTOR_LENGTH` characters and :data:`MAX_RANGES` ranges; a malformed selector is
a 400 ``BadRequest``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..machinery import status as st

FIELDS = ("object.metadata.uid", "object.metadata.namespace")
HASH_SPACE = 2**64
MAX_SELECTOR_LENGTH = 4096
MAX_RANGES = 64
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_HEX = r"'(0x[0-9a-fA-F]{1,17})'"
_RANGE = re.compile(rf"\s*shardRange\(\s*([A-Za-z.]+)\s*,\s*{_HEX}\s*,\s*{_HEX}\s*\)\s*")


def fnv1a64(data: bytes) -> int:
    """The 64-bit FNV-1a hash of ``data`` (Go's ``hash/fnv.New64a``)."""
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) % HASH_SPACE
    return h


class ShardSelector:
    """A parsed ``shardSelector``: one field and the hash ranges it accepts."""

    __slots__ = ("field", "ranges")

    def __init__(self, field: str, ranges: list[tuple[int, int]]) -> None:
        self.field = field
        self.ranges = ranges

    def matches(self, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        value = meta.get("uid" if self.field == "object.metadata.uid" else "namespace") or ""
        h = fnv1a64(str(value).encode())
        return any(start <= h < end for start, end in self.ranges)

    def __str__(self) -> str:
        return " || ".join(f"shardRange({self.field}, '0x{s:016x}', '0x{e:016x}')" for s, e in self.ranges)


def parse_shard_selector(text: str) -> ShardSelector | None:
    """``text`` parsed (None when it is empty: everything matches); 400 when it is malformed."""
    if not text.strip():
        return None
    if len(text) > MAX_SELECTOR_LENGTH:
        raise st.bad_request(f"invalid shardSelector: longer than {MAX_SELECTOR_LENGTH} characters")
    parts = text.split("||")
    if len(parts) > MAX_RANGES:
        raise st.bad_request(f"invalid shardSelector: more than {MAX_RANGES} shardRange terms")
    field = ""
    ranges: list[tuple[int, int]] = []
    for part in parts:
        match = _RANGE.fullmatch(part)
        if match is None:
            raise st.bad_request(f"invalid shardSelector: expected shardRange(field, '0xSTART', '0xEND') terms "
                                 f"joined by ||, got {st.truncate(part.strip(), 80)!r}")
        name, start, end = match.group(1), int(match.group(2), 16), int(match.group(3), 16)
        if name not in FIELDS:
            raise st.bad_request(f"invalid shardSelector: unsupported field {name!r}, expected one of "
                                 f"{', '.join(FIELDS)}")
        if field and name != field:
            raise st.bad_request("invalid shardSelector: every shardRange must use the same field")
        if not start <= end <= HASH_SPACE:
            raise st.bad_request(f"invalid shardSelector: the range [{match.group(2)}, {match.group(3)}) is not "
                                 "within [0x0, 0x10000000000000000] with start <= end")
        field = name
        ranges.append((start, end))
    return ShardSelector(field, ranges)
