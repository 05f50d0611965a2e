"""metav1.Time on the wire: the RFC 3339 strings the API serializes timestamps as.

The one home of the cluster's time formatting and parsing. Invariants: :func:`rfc3339` writes second precision
in UTC with a ``Z`` (as metav1.Time marshals); :func:`parse_time` reads any RFC 3339 string (``Z`` or an
offset, with or without fractions, so metav1.MicroTime too) into seconds since the epoch, and a missing
timestamp (None or ``""``) into None.
"""

from __future__ import annotations

from datetime import datetime
from typing import overload

from kinformer.timestamps import rfc3339

__all__ = ["parse_time", "rfc3339"]


@overload
def parse_time(text: str) -> float: ...
@overload
def parse_time(text: str | None) -> float | None: ...
def parse_time(text: str | None) -> float | None:
    """Seconds since the epoch of an RFC 3339 timestamp; None for a missing one (None or empty)."""
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
