"""Pod logs: the ``pods/log`` subresource's query (kubectl's ``logs`` flags) and its stream split into lines.

The server answers ``text/plain``: the whole log, or with ``follow`` a response that stays open and grows as the
container writes. Lines are split on ``\\n`` and decoded as UTF-8 (invalid bytes replaced); a line longer than
:data:`MAX_LINE` bytes is yielded in pieces of that size, so a log without newlines cannot grow memory.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator

__all__ = ["MAX_LINE", "iter_lines", "log_params"]

#: The longest piece of a log line yielded at once (bytes).
MAX_LINE = 1 << 20


def log_params(*, container: str | None = None, follow: bool = False, since_seconds: int | None = None,
               since_time: str | None = None, tail_lines: int | None = None, previous: bool = False,
               timestamps: bool = False, limit_bytes: int | None = None) -> dict[str, str]:
    """The query of a ``pods/log`` request (PodLogOptions); ``since_seconds`` and ``since_time`` exclude each
    other, counts must be positive (``tail_lines`` may be 0), as the API server validates them."""
    if since_seconds is not None and since_time is not None:
        raise ValueError("at most one of since_seconds and since_time")
    for label, value, least in (("since_seconds", since_seconds, 1), ("tail_lines", tail_lines, 0),
                                ("limit_bytes", limit_bytes, 1)):
        if value is not None and value < least:
            raise ValueError(f"{label} must be >= {least}, got {value}")
    params: dict[str, str] = {}
    options: tuple[tuple[str, str | int | None], ...] = (
        ("container", container), ("sinceSeconds", since_seconds), ("sinceTime", since_time),
        ("tailLines", tail_lines), ("limitBytes", limit_bytes))
    for key, option in options:
        if option is not None:
            params[key] = str(option)
    for key, flag in (("follow", follow), ("previous", previous), ("timestamps", timestamps)):
        if flag:
            params[key] = "true"
    return params


async def iter_lines(chunks: AsyncIterable[bytes], max_line: int = MAX_LINE) -> AsyncIterator[str]:
    """The lines of a byte stream (without their ``\\n``); a last line without one is yielded at the end."""
    pending = bytearray()
    async for chunk in chunks:
        pending += chunk
        start = 0
        while True:
            end = pending.find(b"\n", start)
            if end < 0:
                break
            for piece in range(start, end, max_line) if end > start else (start,):
                yield pending[piece:min(piece + max_line, end)].decode("utf-8", errors="replace")
            start = end + 1
        del pending[:start]
        while len(pending) >= max_line:
            yield pending[:max_line].decode("utf-8", errors="replace")
            del pending[:max_line]
    if pending:
        yield pending.decode("utf-8", errors="replace")
