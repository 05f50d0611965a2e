"""Leader election on coordination.k8s.io/v1 Leases (client-go's tools/leaderelection).

Invariants (client-go's rules):

* ``lease_duration > renew_deadline > 1.2 * retry_period`` (defaults 15 s / 10 s / 2 s);
* whether another holder's lease has expired is judged from the *local* clock time at which this
  elector last saw the Lease record change, never from the timestamps written in the Lease, so
  clock skew between replicas does not matter;
* a leader that cannot renew within ``renew_deadline`` stops leading (its ``on_started_leading``
  task is cancelled) before any other candidate can consider the lease expired;
* ``on_stopped_leading`` always runs when :meth:`LeaderElector.run` ends;
* with ``release_on_cancel`` a leader that is cancelled writes an empty holder with a 1 s duration
  so the next candidate takes over at once.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import random
import socket
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kinformer.aio import first_completed
from kinformer.clock import REAL_CLOCK, Clock, sleep_until
from kinformer.controller import metrics
from kinformer.errors import AlreadyExists, APIError, Conflict, NotFound
from kinformer.timestamps import micro_time

log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2
LEASES = "coordination.k8s.io/v1/leases"


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass
class LeaderElectionConfig:
    """Where the Lease lives, who we are, the timings and the callbacks."""

    lease_name: str
    lease_namespace: str = "default"
    identity: str = field(default_factory=default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True
    on_started_leading: Callable[[], Awaitable[Any]] | None = None
    on_stopped_leading: Callable[[], Any] | None = None
    on_new_leader: Callable[[str], Any] | None = None

    def __post_init__(self) -> None:
        if not self.lease_name:
            raise ValueError("lease_name is required")
        if not self.identity:
            raise ValueError("identity must not be empty")
        if self.retry_period <= 0 or self.renew_deadline <= 0 or self.lease_duration <= 0:
            raise ValueError("lease_duration, renew_deadline and retry_period must be > 0")
        if self.lease_duration <= self.renew_deadline:
            raise ValueError(f"lease_duration ({self.lease_duration}) must be greater than "
                             f"renew_deadline ({self.renew_deadline})")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError(f"renew_deadline ({self.renew_deadline}) must be greater than "
                             f"{JITTER_FACTOR} x retry_period ({self.retry_period})")


class LeaderElector:
    """Campaigns for a Lease and runs ``on_started_leading`` while it holds it."""

    def __init__(self, config: LeaderElectionConfig, client: Any, *, clock: Clock = REAL_CLOCK,
                 rng: random.Random | None = None) -> None:
        self.config = config
        self.client = client
        self.clock = clock
        self._rng = rng or random.Random()
        self._observed_spec: dict[str, Any] | None = None
        self._observed_rv: str | None = None
        self._observed_time = 0.0
        self._reported_leader: str | None = None
        self.leading = asyncio.Event()

    # -- public -----------------------------------------------------------------------------------

    def is_leader(self) -> bool:
        spec = self._observed_spec
        return bool(spec) and spec is not None and spec.get("holderIdentity") == self.config.identity

    @property
    def renewed_at(self) -> float:
        """Local monotonic time at which the Lease record was last seen to change (our renewals included)."""
        return self._observed_time

    def get_leader(self) -> str:
        return (self._observed_spec or {}).get("holderIdentity") or ""

    async def run(self) -> None:
        """Acquire, lead until renewal fails or the task is cancelled, then stop leading."""
        try:
            await self._acquire()
            self._set_leading(True)
            index, ended = await first_completed(self._started_leading(), self._renew_until_lost())
            if index == 0 and not ended.cancelled() and ended.exception() is not None:
                log.error("%s: on_started_leading failed: %s", self.config.identity, ended.exception())
        finally:
            was_leader = self.leading.is_set()
            self._set_leading(False)
            if was_leader and self.config.release_on_cancel:
                await self._release_within_deadline()
            await _maybe_await(self.config.on_stopped_leading)

    # -- loops ------------------------------------------------------------------------------------

    async def _acquire(self) -> None:
        cfg = self.config
        log.info("%s: attempting to acquire lease %s/%s", cfg.identity, cfg.lease_namespace, cfg.lease_name)
        while not await self._try_acquire_or_renew():
            await self.clock.sleep(cfg.retry_period * (1 + self._rng.random() * JITTER_FACTOR))
        log.info("%s: acquired lease %s/%s", cfg.identity, cfg.lease_namespace, cfg.lease_name)

    async def _renew_until_lost(self) -> None:
        """Renew every ``retry_period``; return once a renewal has failed for ``renew_deadline``."""
        cfg = self.config
        while True:
            await self.clock.sleep(cfg.retry_period)
            deadline = self.clock.now() + cfg.renew_deadline
            while not await self._attempt_before(deadline):
                if self.clock.now() + cfg.retry_period > deadline:
                    log.warning("%s: failed to renew lease %s/%s within %.1fs; stopping leading",
                                cfg.identity, cfg.lease_namespace, cfg.lease_name, cfg.renew_deadline)
                    return
                await self.clock.sleep(cfg.retry_period)

    async def _attempt_before(self, deadline: float) -> bool:
        """One try to renew, abandoned (as a failure) if it has not finished by ``deadline``.

        client-go bounds each renewal by the renew deadline too: a request that hangs (the client's own
        timeout may be longer than the lease) must not keep a leader leading past it.
        """
        index, attempt = await first_completed(
            self._try_acquire_or_renew(), sleep_until(self.clock, deadline))
        return index == 0 and not attempt.cancelled() and attempt.exception() is None and bool(attempt.result())

    async def _started_leading(self) -> None:
        if self.config.on_started_leading is not None:
            await self.config.on_started_leading()
        else:
            await asyncio.Event().wait()

    # -- one attempt ------------------------------------------------------------------------------

    def _record(self, wall: float, old: Mapping[str, Any] | None) -> dict[str, Any]:
        cfg = self.config
        record: dict[str, Any] = {
            "holderIdentity": cfg.identity,
            "leaseDurationSeconds": max(1, round(cfg.lease_duration)),
            "acquireTime": micro_time(wall),
            "renewTime": micro_time(wall),
            "leaseTransitions": 0,
        }
        if old is not None:
            transitions = int(old.get("leaseTransitions") or 0)
            if old.get("holderIdentity") == cfg.identity:
                record["acquireTime"] = old.get("acquireTime") or record["acquireTime"]
                record["leaseTransitions"] = transitions
            else:
                record["leaseTransitions"] = transitions + 1
        return record

    async def _try_acquire_or_renew(self) -> bool:
        cfg = self.config
        now, wall = self.clock.now(), self.clock.wall()
        try:
            lease = await self.client.get(LEASES, cfg.lease_name, namespace=cfg.lease_namespace)
        except NotFound:
            return await self._create(now, wall)
        except (TimeoutError, APIError, OSError) as exc:
            log.warning("%s: error retrieving lease %s/%s: %s", cfg.identity, cfg.lease_namespace,
                        cfg.lease_name, exc)
            return False
        spec = dict(lease.get("spec") or {})
        rv = lease["metadata"].get("resourceVersion")
        if spec.get("holderIdentity") != cfg.identity:
            # Another holder's lease is timed from when we saw its record, i.e. after the GET returned
            # (a slow GET must not shorten it); our own renewals keep the earlier time, the safer one.
            now = self.clock.now()
        if spec != self._observed_spec or rv != self._observed_rv:
            self._observe(spec, rv, now)
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or 0)
        if holder and holder != cfg.identity and self._observed_time + duration > now:
            return False
        body = self._lease(self._record(wall, spec), resourceVersion=rv)
        return await self._store(self.client.replace(LEASES, body, namespace=cfg.lease_namespace),
                                 (Conflict, NotFound), "updating", now)

    async def _create(self, now: float, wall: float) -> bool:
        body = self._lease(self._record(wall, None))
        return await self._store(self.client.create(LEASES, body, namespace=self.config.lease_namespace),
                                 (AlreadyExists, Conflict), "creating", now)

    def _lease(self, spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
        cfg = self.config
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": cfg.lease_name, "namespace": cfg.lease_namespace, **metadata}, "spec": spec}

    async def _store(self, write: Awaitable[Any], lost: tuple[type[APIError], ...], verb: str, now: float) -> bool:
        """Await a lease write: True (the stored lease observed) if it succeeded, False if another candidate
        got there first (``lost``) or the write failed (logged)."""
        try:
            stored = await write
        except lost:
            return False
        except (TimeoutError, APIError, OSError) as exc:
            log.warning("%s: error %s lease: %s", self.config.identity, verb, exc)
            return False
        self._observe(dict(stored.get("spec") or {}), stored["metadata"].get("resourceVersion"), now)
        return True

    def _observe(self, spec: dict[str, Any], rv: str | None, now: float) -> None:
        self._observed_spec, self._observed_rv, self._observed_time = spec, rv, now
        holder = spec.get("holderIdentity") or ""
        if holder != self._reported_leader:
            self._reported_leader = holder
            if holder and self.config.on_new_leader is not None:
                try:
                    self.config.on_new_leader(holder)
                except Exception:
                    log.exception("on_new_leader failed")

    async def _release_within_deadline(self) -> None:
        """Give the Lease up, spending at most ``renew_deadline`` (a hung connection must not keep a
        stopping replica, or its owner, waiting)."""
        try:
            async with asyncio.timeout(self.config.renew_deadline):
                await self._release()
        except TimeoutError:
            log.warning("%s: releasing lease %s/%s timed out", self.config.identity,
                        self.config.lease_namespace, self.config.lease_name)

    async def _release(self) -> None:
        cfg = self.config
        if not self.is_leader():
            return
        spec = dict(self._observed_spec or {})
        wall = self.clock.wall()
        spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=micro_time(wall),
                    acquireTime=micro_time(wall))
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": cfg.lease_name, "namespace": cfg.lease_namespace,
                             "resourceVersion": self._observed_rv},
                "spec": spec}
        try:
            await self.client.replace(LEASES, body, namespace=cfg.lease_namespace)
            self._observed_spec = spec
        except Exception as exc:
            log.warning("%s: failed to release lease: %s", cfg.identity, exc)

    def _set_leading(self, value: bool) -> None:
        if value:
            self.leading.set()
        else:
            self.leading.clear()
        metrics.LEADER_ELECTION_STATUS.labels(self.config.lease_name).set(1 if value else 0)


async def _maybe_await(fn: Callable[[], Any] | None) -> None:
    if fn is None:
        return
    try:
        value = fn()
        if inspect.isawaitable(value):
            await value
    except Exception:
        log.exception("on_stopped_leading failed")


def identity_from_env() -> str:
    """POD_NAME (downward API) when set, else hostname_uuid."""
    return os.environ.get("POD_NAME") or default_identity()
