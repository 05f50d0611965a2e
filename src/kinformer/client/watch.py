"""Incremental decoding of a watch stream: newline-delimited JSON events over chunked HTTP.

The stream is read with ``iter_any`` (whatever bytes arrived) and split on ``\\n`` here, so lines of any size
work (aiohttp's ``readline`` refuses lines over its 128 KiB buffer limit). Each line is parsed once: a line in
the API server's exact form ``{"type":"<TYPE>","object":<object>}`` is cut at the known prefix, and one
msgspec pass over the object both validates it and decodes its fast metadata; any other line takes the
general path (envelope, then object). With ``as_metadata`` every object event carries a PartialObjectMetadata:
a whole object is cut down in the same single pass (:mod:`kinformer.client.partial`). With
``drop_managed_fields`` each object event's object is decoded already without ``metadata.managedFields`` (what
an informer's default transform would make of it), straight from the line.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any

import msgspec
import orjson
from msgspec import UNSET, Raw

from kinformer.client.objects import LazyObject, _decode_envelope, _decode_head, without_managed_fields_from
from kinformer.client.partial import is_partial, partial_from_raw, to_partial_object_metadata
from kinformer.listwatch import ADDED, BOOKMARK, DELETED, ERROR, MODIFIED, WatchBatch, WatchEvent

__all__ = ["LineSplitter", "decode_partial_watch_line", "decode_watch_line", "iter_event_batches", "iter_events",
           "iter_lines"]

# The exact line prefixes of the API server's event types (keyed by the type's first letter, line[9]).
_PREFIXES = {ord(t[0]): (t, f'{{"type":"{t}","object":'.encode()) for t in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK")}
_CLOSE = ord("}")
_OBJECT_EVENTS = frozenset((ADDED, MODIFIED, DELETED))


class LineSplitter:
    """Splits a byte stream into lines (``\\n``-terminated; the terminator is dropped).

    Invariant: ``feed`` returns every complete line exactly once, in order; bytes after the last newline
    are held (in pieces, so a line spread over many chunks is joined once, not re-copied per chunk) until a
    later chunk completes them. Empty lines are skipped.
    """

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines ``chunk`` completes, in order.

        Lines are cut at each newline found by ``bytes.find`` (a memchr): ``bytes.split`` tests every byte in
        a loop of its own, several times the cost on watch lines of kilobytes.
        """
        pending = self._pending
        find = chunk.find
        end = find(b"\n")
        if end < 0:
            if chunk:
                pending.append(chunk)
            return []
        if pending:
            pending.append(chunk[:end])
            first = b"".join(pending)
            pending.clear()
        else:
            first = chunk[:end]
        lines = [first] if first else []
        start = end + 1
        end = find(b"\n", start)
        while end >= 0:
            if end > start:
                lines.append(chunk[start:end])
            start = end + 1
            end = find(b"\n", start)
        if start < len(chunk):
            pending.append(chunk[start:])
        return lines

    def flush(self) -> bytes:
        """The unterminated rest of the stream (empty when the stream ended on a newline)."""
        rest = b"".join(self._pending)
        self._pending.clear()
        return rest if rest.strip() else b""


async def iter_lines(chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """Yield each complete line of ``chunks``; a final unterminated line is yielded too."""
    splitter = LineSplitter()
    feed = splitter.feed
    async for chunk in chunks:
        for line in feed(chunk):
            yield line
    rest = splitter.flush()
    if rest:
        yield rest


def decode_watch_line(line: bytes, *, drop_managed_fields: bool = False) -> WatchEvent:
    """One watch line -> :class:`WatchEvent`; ERROR events carry the ``Status`` as a plain dict.
    ``drop_managed_fields``: an ADDED/MODIFIED/DELETED event's object is as its
    :meth:`~kinformer.client.objects.LazyObject.without_managed_fields` copy would be."""
    ev = _fast_event_without_managed_fields(line) if drop_managed_fields else _fast_event(line)
    if ev is not None:
        return ev
    ev = _general_event(line)
    return _without_managed_fields(ev) if drop_managed_fields else ev


def _general_event(line: bytes) -> WatchEvent:
    """The event of any well-formed line (the envelope decoded, then the object)."""
    try:
        env = _decode_envelope(line)
    except msgspec.DecodeError as exc:
        # name the line by its size and head only: its body may be a Secret's data, and errors get logged
        raise ValueError(f"undecodable watch event ({exc}): {len(line)} bytes starting {line[:24]!r}") from exc
    if env.type == "ERROR":
        obj: Any = orjson.loads(memoryview(env.object))
        return WatchEvent("ERROR", obj)
    return WatchEvent(env.type, LazyObject(env.object))


def _without_managed_fields(ev: WatchEvent) -> WatchEvent:
    """``ev`` with an ADDED/MODIFIED/DELETED event's object without managedFields (bookmarks, errors and
    unknown types as they are: what an informer's transform is applied to)."""
    obj = ev.object
    if ev.type in _OBJECT_EVENTS and isinstance(obj, LazyObject):
        return WatchEvent(ev.type, obj.without_managed_fields())
    return ev


def _exact_form(line: bytes) -> tuple[str, int] | None:
    """(type, length of its prefix) of a line in the server's exact form, or None (the caller then takes the
    general path).

    The object is the bytes between the type's prefix and the final ``}``; the caller's decode rejects
    anything that is not exactly one JSON object (a trailing member, whitespace), so the cut is never wrong.
    """
    if len(line) < 12 or line[-1] != _CLOSE:
        return None
    found = _PREFIXES.get(line[9])
    if found is None or not line.startswith(found[1]):
        return None
    return found[0], len(found[1])


def _fast_event(line: bytes) -> WatchEvent | None:
    """The event of a line in the server's exact form, or None (see :func:`_exact_form`)."""
    found = _exact_form(line)
    if found is None:
        return None
    raw = Raw(memoryview(line)[found[1]:-1])
    try:
        head = _decode_head(raw)
    except msgspec.DecodeError:
        return None
    meta = head.metadata
    return WatchEvent(found[0], LazyObject(raw, None if meta is UNSET else meta))


def _fast_event_without_managed_fields(line: bytes) -> WatchEvent | None:
    """:func:`_fast_event`, an object event's object cut out of the line without managedFields in one step."""
    found = _exact_form(line)
    if found is None or found[0] == BOOKMARK:
        return None if found is None else _fast_event(line)
    kind, start = found
    end = len(line) - 1
    try:
        head = _decode_head(memoryview(line)[start:end])  # no Raw: the object is cut from the line itself
    except msgspec.DecodeError:
        return None
    meta = head.metadata
    return WatchEvent(kind, without_managed_fields_from(line, start, end, None if meta is UNSET else meta))


def _fast_partial_event(line: bytes, drop_managed_fields: bool = False) -> WatchEvent | None:
    """:func:`_fast_event` with the object cut down to its PartialObjectMetadata (bookmarks as they are)."""
    found = _exact_form(line)
    if found is None or found[0] == BOOKMARK:
        return None
    try:
        return WatchEvent(found[0], partial_from_raw(Raw(memoryview(line)[found[1]:-1]), drop_managed_fields))
    except msgspec.DecodeError:
        return None


def _fast_partial_event_without_managed_fields(line: bytes) -> WatchEvent | None:
    """:func:`_fast_partial_event` dropping managedFields (a function of its own: no argument per call)."""
    return _fast_partial_event(line, True)


def decode_partial_watch_line(line: bytes, *, drop_managed_fields: bool = False) -> WatchEvent:
    """:func:`decode_watch_line`, with every object event's object as a PartialObjectMetadata."""
    ev = _fast_partial_event(line, drop_managed_fields)
    if ev is not None:
        return ev
    ev = decode_watch_line(line)
    if ev.type not in (BOOKMARK, ERROR) and not is_partial(ev.object):
        ev = WatchEvent(ev.type, to_partial_object_metadata(ev.object))
    return _without_managed_fields(ev) if drop_managed_fields else ev


def _decode_without_managed_fields(line: bytes) -> WatchEvent:
    return decode_watch_line(line, drop_managed_fields=True)


def _decode_partial_without_managed_fields(line: bytes) -> WatchEvent:
    return decode_partial_watch_line(line, drop_managed_fields=True)


# (fast, general) line decoders by (as_metadata, drop_managed_fields)
_DECODERS: dict[tuple[bool, bool], tuple[Callable[[bytes], WatchEvent | None], Callable[[bytes], WatchEvent]]] = {
    (False, False): (_fast_event, decode_watch_line),
    (False, True): (_fast_event_without_managed_fields, _decode_without_managed_fields),
    (True, False): (_fast_partial_event, decode_partial_watch_line),
    (True, True): (_fast_partial_event_without_managed_fields, _decode_partial_without_managed_fields),
}


async def iter_event_batches(chunks: AsyncIterable[bytes], *, as_metadata: bool = False,
                             drop_managed_fields: bool = False) -> AsyncIterator[WatchBatch]:
    """Decode a watch stream as the bytes arrive: one list of :class:`WatchEvent` per chunk that completes at
    least one line (a consumer's loop over a list costs no await per event); with ``as_metadata`` each object
    event's object is a PartialObjectMetadata (cut down here when the server sent the whole object); with
    ``drop_managed_fields`` each ADDED/MODIFIED/DELETED event's object is as its ``without_managed_fields()``
    copy would be (cut while decoding: what an informer's default transform would make of it)."""
    splitter = LineSplitter()
    feed = splitter.feed
    fast, general = _DECODERS[as_metadata, drop_managed_fields]
    async for chunk in chunks:
        lines = feed(chunk)
        if lines:
            yield [ev if (ev := fast(line)) is not None else general(line) for line in lines]
    rest = splitter.flush()
    if rest:
        yield [general(rest)]


async def iter_events(chunks: AsyncIterable[bytes], *, as_metadata: bool = False,
                      drop_managed_fields: bool = False) -> AsyncIterator[WatchEvent]:
    """:func:`iter_event_batches`, one event at a time."""
    async for batch in iter_event_batches(chunks, as_metadata=as_metadata, drop_managed_fields=drop_managed_fields):
        for event in batch:
            yield event
