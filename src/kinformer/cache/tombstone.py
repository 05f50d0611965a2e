"""The tombstone a relist leaves for an object whose deletion was never observed.

It lives in its own module so that both the store (whose key function accepts it) and the DeltaFIFO
(which creates it) can import it without a cycle; :mod:`kinformer.cache.delta_fifo` re-exports it.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, NamedTuple

from kinformer.meta import register_fast_metadata


class DeletedFinalStateUnknown(NamedTuple):
    """An object deleted while the watch was down: ``key`` is exact, ``obj`` is its last known (maybe stale) state.

    ``obj`` is None when the last state is not known at all.
    """

    key: str
    obj: Any


register_fast_metadata(DeletedFinalStateUnknown, key=attrgetter("key"))
