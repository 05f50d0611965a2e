"""metav1.Time and metav1.MicroTime text of wall-clock seconds, formatted once per second.

Invariants: :func:`rfc3339` and :func:`micro_time` return exactly what
``datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")`` (and ``"...%S.%fZ"``) return, including
the microsecond rounding (half to even) that may carry into the next second; the text of a second is made
once and reused while the following calls fall in the same second (one entry, any clock). The library and
the server share this module (it imports nothing of either).
"""

from __future__ import annotations

import math
import time

__all__ = ["micro_time", "rfc3339"]

_last: tuple[int, str] = (-1, "")  # the last second formatted, with its text up to the seconds


def _split(wall: float) -> tuple[int, int]:
    """Whole seconds and microseconds of ``wall`` as ``datetime.fromtimestamp`` rounds them."""
    frac, whole = math.modf(wall)
    us = round(frac * 1e6)
    if us >= 1000000:
        whole += 1
        us -= 1000000
    elif us < 0:
        whole -= 1
        us += 1000000
    return int(whole), us


def _seconds_text(second: int) -> str:
    global _last
    last = _last
    if last[0] == second:
        return last[1]
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
    _last = (second, text)
    return text


def rfc3339(wall: float) -> str:
    """A metav1.Time as the API serializes it (second precision, UTC, ``Z``)."""
    return _seconds_text(_split(wall)[0]) + "Z"


def micro_time(wall: float) -> str:
    """A metav1.MicroTime (RFC 3339 with microseconds, UTC, ``Z``)."""
    second, us = _split(wall)
    return f"{_seconds_text(second)}.{us:06d}Z"
