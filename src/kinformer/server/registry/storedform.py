"""The stored and served forms of an API object, and the values the server sets on a new one.

Invariants:

* The stored form is compact JSON without ``metadata.resourceVersion``; the served form is the object with
  ``metadata.resourceVersion == str(mod_revision)`` as its last metadata field (where decoding the stored
  value and setting it puts it).
* :func:`encode_split` cuts one encoding into both forms, exactly: it answers None rather than cut anything
  but the one marked field. :func:`stored_of_served` cuts a served encoding back to the stored form, as
  exactly: None unless the field it removes can only be the metadata's last one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import orjson

from ...clock import Clock
from ...timestamps import rfc3339
from ..storage.base import KeyValue


def timestamp(clock: Clock) -> str:
    """RFC 3339 UTC timestamp of the clock's whole second, as Kubernetes writes them (formatted once per second)."""
    return rfc3339(int(clock.wall()))


_UID_BATCH = 64
_uid_randoms: list[str] = []  # 16 random bytes (hex) per uid still to hand out
os.register_at_fork(after_in_child=_uid_randoms.clear)  # a child never repeats its parent's uids


def new_uid() -> str:
    """A random (version 4, RFC 4122 variant) UUID in its canonical text form, as ``str(uuid.uuid4())``.

    The random bytes come from the OS 64 uids at a time (one system call, not one per uid).
    """
    try:
        h = _uid_randoms.pop()
    except IndexError:
        batch = os.urandom(16 * _UID_BATCH).hex()
        _uid_randoms.extend(batch[i:i + 32] for i in range(0, len(batch), 32))
        h = _uid_randoms.pop()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


def encode(obj: Mapping[str, Any]) -> bytes:
    """The stored form: compact JSON without ``metadata.resourceVersion``."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "resourceVersion" in meta:
        rv = meta.pop("resourceVersion")
        try:
            return orjson.dumps(obj)
        finally:
            meta["resourceVersion"] = rv
    return orjson.dumps(obj)


# A random marker per process, written as a resourceVersion no client can send, to cut one encoding of an object
# into its stored and served forms (see encode_split).
_RV_MARK_TEXT = os.urandom(16).hex()
_RV_MARK = _RV_MARK_TEXT.encode()
_RV_FIELD = b',"resourceVersion":"'

Split = tuple[bytes, bytes]


def encode_split(obj: dict[str, Any]) -> Split | None:
    """One encoding of ``obj`` for both its stored form and its served form at a revision not known yet.

    ``obj``'s metadata must end with ``resourceVersion`` after another field; this sets its value to a marker
    (the caller puts a value back). Returns (head, tail): ``head + tail`` is :func:`encode`'s stored form,
    and :func:`served_bytes` is ``orjson.dumps(obj)`` once ``obj``'s resourceVersion is set to the revision.
    None when the encoding does not hold the marker exactly once, where the metadata ends: the random
    marker makes that practically impossible, and the check makes the answer exact regardless.
    """
    obj["metadata"]["resourceVersion"] = _RV_MARK_TEXT
    data = orjson.dumps(obj)
    at = data.find(_RV_MARK)  # the first marker: the one field, when it ends the metadata and is the only one
    start, end = at - len(_RV_FIELD), at + len(_RV_MARK) + 1
    if at < 0 or data[start:at] != _RV_FIELD or data[end - 1:end + 1] != b'"}' or data.find(_RV_MARK, end) >= 0:
        return None
    return data[:start], data[end:]


def served_bytes(split: Split, rev: int) -> bytes:
    """The served form of an :func:`encode_split` object at ``rev``."""
    return b"".join((split[0], _RV_FIELD, str(rev).encode(), b'"', split[1]))


def stored_of_served(raw: bytes, obj: Mapping[str, Any], rev: int) -> bytes | None:
    """The stored form of ``raw``, ``orjson.dumps(obj)`` of an object in its served form at ``rev``; equal to
    ``encode(obj)`` without encoding it again.

    Cuts the text of ``metadata.resourceVersion``; only when ``obj``'s metadata ends with it after another
    field (so that text ends the metadata) and it is in ``raw`` exactly once (so the text cut is that
    field). None otherwise: the caller encodes.
    """
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or len(meta) < 2 or next(reversed(meta)) != "resourceVersion" \
            or meta["resourceVersion"] != str(rev):
        return None
    field = b"".join((_RV_FIELD, str(rev).encode(), b'"}'))
    at = raw.find(field)
    if at < 0 or raw.find(field, at + 1) >= 0:
        return None
    return raw[:at] + raw[at + len(field) - 1:]


def served(kv: KeyValue) -> dict[str, Any]:
    """Decode a stored value into the served form (with resourceVersion)."""
    obj = orjson.loads(kv.value)
    obj.setdefault("metadata", {})["resourceVersion"] = str(kv.mod_revision)
    return obj
