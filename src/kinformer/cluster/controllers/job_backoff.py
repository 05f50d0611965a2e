"""The Job controller's pod-failure backoff (kube's backoffStore): after ``n`` failures since the last
success, new pods wait ``base * 2**(n-1)`` (capped at ``cap``) from the last failure.

A record is kept per Job key in memory, as kube keeps it, and replaced only after a sync whose status write
succeeded, so a failed sync never counts a failure twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["BackoffRecord", "BackoffStore"]


@dataclass(frozen=True)
class BackoffRecord:
    failures_after_last_success: int = 0
    last_failure_time: float | None = None

    def remaining(self, now: float, base: float, cap: float) -> float:
        """Seconds until a new pod may be created (0: now)."""
        if self.failures_after_last_success == 0 or self.last_failure_time is None:
            return 0.0
        delay = min(cap, base * 2 ** (self.failures_after_last_success - 1))
        return max(0.0, delay - (now - self.last_failure_time))


class BackoffStore:
    """Backoff records by Job key."""

    def __init__(self) -> None:
        self._records: dict[str, BackoffRecord] = {}

    def get(self, key: str) -> BackoffRecord:
        return self._records.get(key, BackoffRecord())

    def next_record(self, key: str, succeeded_at: Sequence[float], failed_at: Sequence[float]) -> BackoffRecord:
        """The record after newly finished pods (their finish times): a success resets the count, and only
        failures after the last success count."""
        old = self.get(key)
        if not succeeded_at:
            if not failed_at:
                return old
            return BackoffRecord(old.failures_after_last_success + len(failed_at), max(failed_at))
        last_success = max(succeeded_at)
        later = [t for t in failed_at if t > last_success]
        return BackoffRecord(len(later), max(later) if later else None)

    def update(self, key: str, record: BackoffRecord) -> None:
        self._records[key] = record

    def remove(self, key: str) -> None:
        self._records.pop(key, None)
