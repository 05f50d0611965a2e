"""Garbage-collector settings for a process that is an API server (``kinformer serve``), not a library user.

The watch cache holds every object as decoded JSON: hundreds of dicts and lists per pod, all long-lived
and acyclic. With CPython's default thresholds (700, 10, 10) each create triggers a young collection
and full collections rescan the whole cache every time it grows by a quarter, which was a fifth to a
third of a create's CPU in ``bench/bench_server_writes.py``. A server process can do better:

* objects alive once the server has started (modules, the API catalogue) are frozen out of collection;
* young collections run every 20,000 net allocations instead of 700, and a full collection is
  considered only after 100 middle ones instead of 10. Reference counting still frees acyclic garbage
  at once; only cyclic garbage waits longer.

An embedded :class:`~kinformer.server.APIServer` never calls this: the host process owns its collector.
"""

from __future__ import annotations

import gc

SERVER_THRESHOLDS = (20_000, 10, 100)


def tune_for_server() -> None:
    """Apply the server settings above to this process (call once the server has started)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*SERVER_THRESHOLDS)
