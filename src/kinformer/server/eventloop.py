"""The event loop a serving process runs on: uvloop when it is installed, asyncio's own loop otherwise.

uvloop (libuv, in C) does the fixed part of every request (socket reads and writes, callbacks, task steps)
for about a quarter fewer instructions than asyncio's pure-Python selector loop on a health probe, about
60k per request (docs/design-notes/benchmark-history.md, "Write path"). Only a process that exists to serve
(``kinformer serve``) picks it, as ``asyncio.Runner(loop_factory=loop_factory())``; nothing here
installs a loop policy, so the library and an in-process :class:`~kinformer.server.APIServer` keep running
on whatever loop their host runs (the tests run on asyncio's).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["EVENT_LOOPS", "loop_factory"]

# "auto": uvloop when importable, else asyncio; "uvloop": uvloop or ImportError; "asyncio": the stdlib loop.
EVENT_LOOPS = ("auto", "uvloop", "asyncio")


def loop_factory(choice: str = "auto") -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory of the loop ``choice`` names (None: asyncio's default); ImportError for a missing uvloop."""
    if choice not in EVENT_LOOPS:
        raise ValueError(f"unknown event loop {choice!r}: one of {', '.join(EVENT_LOOPS)}")
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory

