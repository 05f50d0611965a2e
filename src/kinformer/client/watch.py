"""Incremental decoding of a watch stream: newline-delimited JSON events over chunked HTTP.

The stream is read with ``iter_any`` (whatever bytes arrived) and split on ``\\n`` here, so lines of any size
work (aiohttp's ``readline`` refuses lines over its 128 KiB buffer limit). Each line is parsed once: a line in
the API server's exact form ``{"type":"<TYPE>","object":<object>}`` is cut at the known prefix, and one
msgspec pass over the object both validates it and decodes its fast metadata; any other line takes the
general path (envelope, then object).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import msgspec
import orjson
from msgspec import UNSET, Raw

from kinformer.client.objects import LazyObject, _decode_envelope, _decode_head
from kinformer.listwatch import WatchEvent

__all__ = ["LineSplitter", "decode_watch_line", "iter_events", "iter_lines"]

# The exact line prefixes of the API server's event types (keyed by the type's first letter, line[9]).
_PREFIXES = {ord(t[0]): (t, f'{{"type":"{t}","object":'.encode()) for t in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK")}
_CLOSE = ord("}")


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
        pending = self._pending
        if b"\n" not in chunk:
            if chunk:
                pending.append(chunk)
            return []
        lines = chunk.split(b"\n")
        if pending:
            pending.append(lines[0])
            lines[0] = b"".join(pending)
            pending.clear()
        tail = lines.pop()
        if tail:
            pending.append(tail)
        if b"" in lines:
            lines = [line for line in lines if line]
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


def decode_watch_line(line: bytes) -> WatchEvent:
    """One watch line -> :class:`WatchEvent`; ERROR events carry the ``Status`` as a plain dict."""
    ev = _fast_event(line)
    if ev is not None:
        return ev
    try:
        env = _decode_envelope(line)
    except msgspec.DecodeError as exc:
        # name the line by its size and head only: its body may be a Secret's data, and errors get logged
        raise ValueError(f"undecodable watch event ({exc}): {len(line)} bytes starting {line[:24]!r}") from exc
    if env.type == "ERROR":
        obj: Any = orjson.loads(memoryview(env.object))
        return WatchEvent("ERROR", obj)
    return WatchEvent(env.type, LazyObject(env.object))


def _fast_event(line: bytes) -> WatchEvent | None:
    """The event of a line in the server's exact form, or None (the caller then takes the general path).

    The object is the bytes between the type's prefix and the final ``}``; the head decode rejects anything
    that is not exactly one JSON object (a trailing member, whitespace), so the cut is never wrong.
    """
    if len(line) < 12 or line[-1] != _CLOSE:
        return None
    found = _PREFIXES.get(line[9])
    if found is None or not line.startswith(found[1]):
        return None
    raw = Raw(memoryview(line)[len(found[1]):-1])
    try:
        head = _decode_head(raw)
    except msgspec.DecodeError:
        return None
    meta = head.metadata
    return WatchEvent(found[0], LazyObject(raw, None if meta is UNSET else meta))


async def iter_events(chunks: AsyncIterable[bytes]) -> AsyncIterator[WatchEvent]:
    """Decode a watch stream into :class:`WatchEvent` objects as the bytes arrive."""
    splitter = LineSplitter()
    feed = splitter.feed
    fast = _fast_event
    decode = _decode_envelope
    lazy = LazyObject
    event = WatchEvent
    async for chunk in chunks:
        for line in feed(chunk):
            ev = fast(line)
            if ev is not None:
                yield ev
                continue
            try:
                env = decode(line)
            except msgspec.DecodeError:
                yield decode_watch_line(line)  # raises a ValueError naming the line
                continue
            if env.type == "ERROR":
                yield decode_watch_line(line)
            else:
                yield event(env.type, lazy(env.object))
    rest = splitter.flush()
    if rest:
        yield decode_watch_line(rest)
