"""The CPU-heavy, pure stages of a large write, run in a worker thread so the event loop keeps serving.

A strategic-merge patch or server-side apply of ~140,000 list items costs seconds of merging, managedFields
and validation; on the loop, ``/healthz`` and every other request would wait for all of it. From
``OFF_LOOP_BYTES`` of request body on, such a stage runs in a thread instead, where the interpreter's switch
interval (5 ms) hands the GIL back to the loop. Smaller bodies, nearly all writes, run inline: no thread hop.

Invariant: only functions of their inputs run here (no storage, no watch cache, no loop state), so the update
path's optimistic concurrency (read, compute, compare-and-swap on the loop) is unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: Request bodies from this size on have their merge and validation computed off the event loop.
OFF_LOOP_BYTES = 256 * 1024


async def run_sized(size: int, fn: Callable[[], T]) -> T:
    """``fn()``, in a worker thread when ``size`` (the request body's bytes) is at least ``OFF_LOOP_BYTES``."""
    if size < OFF_LOOP_BYTES:
        return fn()
    return await asyncio.to_thread(fn)
