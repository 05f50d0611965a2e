"""Controller expectations (kube's pkg/controller/controller_utils.go, kube 1.32), shared by the replicaset
and deployment controllers. Pod predicates are :mod:`kinformer.cluster.podutil`'s, owner references and
adoption :mod:`.refs`'.

* :class:`Expectations` is kube's UIDTrackingControllerExpectations: after asking for N creations (or the
  deletion of named pods) a controller does not act again on that key until the informer has observed them,
  or until ``ttl`` (kube's 5 minutes) has passed.
* :class:`kinformer.cluster.wakeups.Wakeups` lets the controller's own informer handlers enqueue keys, so
  expectations are lowered before the key they concern is reconciled.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kinformer.clock import Clock

Obj = Mapping[str, Any]

#: kube's ExpectationsTimeout: expectations older than this are considered satisfied.
EXPECTATIONS_TTL = 300.0


def meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


@dataclass
class _Expectation:
    adds: int = 0
    deletes: set[str] = field(default_factory=set)
    timestamp: float = 0.0

    def fulfilled(self) -> bool:
        return self.adds <= 0 and not self.deletes


class Expectations:
    """Creations and deletions a controller is waiting to observe, per controller key."""

    def __init__(self, clock: Clock, ttl: float = EXPECTATIONS_TTL) -> None:
        self.clock = clock
        self.ttl = ttl
        self._by_key: dict[str, _Expectation] = {}

    def satisfied(self, key: str) -> bool:
        """True when nothing is pending for ``key`` (or what is pending has expired)."""
        exp = self._by_key.get(key)
        return exp is None or exp.fulfilled() or self.clock.now() - exp.timestamp > self.ttl

    def expect_creations(self, key: str, count: int) -> None:
        self._by_key[key] = _Expectation(adds=count, timestamp=self.clock.now())

    def expect_deletions(self, key: str, pod_keys: Iterable[str]) -> None:
        self._by_key[key] = _Expectation(deletes=set(pod_keys), timestamp=self.clock.now())

    def creation_observed(self, key: str) -> None:
        exp = self._by_key.get(key)
        if exp is not None:
            exp.adds -= 1

    def deletion_observed(self, key: str, pod_key: str) -> None:
        exp = self._by_key.get(key)
        if exp is not None:
            exp.deletes.discard(pod_key)

    def forget(self, key: str) -> None:
        self._by_key.pop(key, None)
