"""Controller sharding: the members of a group split the keys between them, never two on one key.

Each member of a :class:`Sharding` group holds one Lease (coordination.k8s.io/v1) labelled with the group
and sees the others through an informer on those Leases. A key (``namespace/name`` of the primary object,
``name`` for cluster-scoped ones) belongs to the member with the highest rendezvous score
``hash(member, key)`` among the members it considers alive, so a member joining or leaving moves only the
keys it gains or gives up (about ``1/N`` of them).

Safety — a key is reconciled by at most one member at a time — rests on three rules:

1. **Acting view.** Each member acts on a view (the set of members it believes alive). Two members whose
   views both contain each other can never both own a key: the comparison of their two scores is the same
   in both views.
2. **Acknowledgements.** A member publishes, in its Lease, the view it acts on (annotation
   :data:`ACK_ANNOTATION`), and only after its in-flight reconciles of keys it no longer owns under that view
   have finished. A member reconciles only while every peer in its view has published a view that
   contains it: a peer that has not seen it join yet may still be working on keys that move to it.
3. **Fencing, as leader election.** A peer leaves a view only when its Lease is gone or released (it
   drained before releasing), or when its record has not been seen to change for ``lease_duration`` on the
   local clock. A member whose own renewals have failed for ``renew_deadline`` stops taking keys at once
   and the Manager stops (``lease_duration > renew_deadline``, so it stopped before anyone takes over).

Liveness: an in-flight reconcile of a key that moves is never cancelled by a hand-off (the new owner waits
for its acknowledgement); bound reconciles with the builder's ``reconcile_timeout`` so hand-offs are bounded.
Keys a member skipped because it did not own them are enqueued again when it gains them, and on every
change of ownership each controller re-enqueues the keys of its primary cache it now owns, so nothing is
lost in a hand-off.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from prometheus_client import Counter, Gauge

from kinformer.clock import REAL_CLOCK, Clock
from kinformer.controller.metrics import REGISTRY
from kinformer.errors import APIError, Conflict, NotFound

log = logging.getLogger(__name__)

__all__ = ["ACK_ANNOTATION", "GROUP_LABEL", "ShardMember", "ShardMembershipLost", "Sharding", "owner_of"]

GROUP_LABEL = "sharding.kinformer.io/group"
ACK_ANNOTATION = "sharding.kinformer.io/acknowledged-members"
LEASES = "coordination.k8s.io/v1/leases"

MEMBERS = Gauge("kinformer_shard_members", "Members this replica considers alive in its sharding group",
                ["group"], registry=REGISTRY)
OWNED = Gauge("kinformer_shard_owned_keys", "Keys of the primary caches this member owns", ["group"],
              registry=REGISTRY)
HANDOFFS = Counter("kinformer_shard_handoffs_total", "Changes of this member's acting view", ["group"],
                   registry=REGISTRY)
DROPPED = Counter("kinformer_shard_keys_dropped_total", "Queued keys skipped because another member owns them",
                  ["controller"], registry=REGISTRY)


class ShardMembershipLost(Exception):
    """This member could not renew its Lease within the renew deadline; its controllers have been stopped."""


@dataclass(frozen=True)
class Sharding:
    """How a Manager's controllers split their keys with the other members of ``group``."""

    group: str
    namespace: str = "default"
    identity: str | None = None
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.group:
            raise ValueError("a sharding group needs a name")
        if not self.lease_duration > self.renew_deadline > self.retry_period * 1.2:
            raise ValueError("sharding needs lease_duration > renew_deadline > 1.2 x retry_period "
                             f"(got {self.lease_duration}, {self.renew_deadline}, {self.retry_period})")


def _score(member: str, key: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{member}\x00{key}".encode(), digest_size=8).digest(), "big")


def owner_of(key: str, members: Iterable[str]) -> str | None:
    """The member of ``members`` that owns ``key`` (highest rendezvous score; None when there is none)."""
    best: tuple[int, str] | None = None
    for member in members:
        candidate = (_score(member, key), member)
        if best is None or candidate > best:
            best = candidate
    return best[1] if best else None


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}_{os.getpid()}"


def lease_name(group: str, identity: str) -> str:
    """A DNS-1123 name for ``identity``'s Lease (identities may hold characters names may not)."""
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    prefix = "".join(c if c.isalnum() else "-" for c in group.lower())[:40].strip("-") or "shard"
    return f"{prefix}-{digest}"


class ShardMember:
    """One member of a sharding group: its Lease, its view of the others, and who owns which key.

    ``on_change()`` is called (on the event loop) whenever the keys this member may reconcile may have
    changed; controllers then re-enqueue what they gained. ``in_flight()`` returns the keys being
    reconciled right now (across the Manager's controllers), so hand-offs wait for them.
    """

    def __init__(self, config: Sharding, client: Any, factory: Any, *, clock: Clock = REAL_CLOCK) -> None:
        self.config = config
        self.client = client
        self.clock = clock
        self.identity = config.identity or default_identity()
        self.lease_name = lease_name(config.group, self.identity)
        self.informer = factory.informer(LEASES, namespace=config.namespace,
                                         label_selector=f"{GROUP_LABEL}={config.group}")
        self.informer.add_event_handler(on_add=self._seen, on_update=lambda _old, new: self._seen(new),
                                        on_delete=self._gone)
        self._seen_at: dict[str, tuple[str, float]] = {}  # identity -> (resourceVersion, local time seen)
        self._acks: dict[str, frozenset[str]] = {}
        self._holders: dict[str, str] = {}  # lease name -> holder identity
        self.view: frozenset[str] = frozenset()
        self.published: frozenset[str] | None = None
        self.fenced = False
        self.active = False
        self.on_change: list[Callable[[], None]] = []
        self.in_flight: Callable[[], Iterable[str]] = lambda: ()
        self._changed = asyncio.Event()
        self._reconciled = asyncio.Event()
        self._renewed_at = clock.now()
        self._rv = ""

    # -- what others say ------------------------------------------------------------------------------

    def _seen(self, lease: Mapping[str, Any]) -> None:
        spec = lease.get("spec") or {}
        meta = lease.get("metadata") or {}
        holder = spec.get("holderIdentity") or ""
        name = str(meta.get("name", ""))
        if not holder:  # released: whoever held it left
            left = self._holders.pop(name, None)
            if left is not None:
                self._seen_at.pop(left, None)
                self._acks.pop(left, None)
            self._changed.set()
            return
        self._holders[name] = holder
        rv = str(meta.get("resourceVersion", ""))
        previous = self._seen_at.get(holder)
        if previous is None or previous[0] != rv:
            self._seen_at[holder] = (rv, self.clock.now())
        try:
            acked = orjson.loads((meta.get("annotations") or {}).get(ACK_ANNOTATION, "[]"))
        except orjson.JSONDecodeError:
            acked = []
        self._acks[holder] = frozenset(a for a in acked if isinstance(a, str)) if isinstance(acked, list) \
            else frozenset()
        self._changed.set()

    def _gone(self, lease: Any) -> None:
        obj = getattr(lease, "obj", lease) or {}
        holder = self._holders.pop(str((obj.get("metadata") or {}).get("name", "")), None)
        if holder is not None:
            self._seen_at.pop(holder, None)
            self._acks.pop(holder, None)
        self._changed.set()

    def _alive(self) -> frozenset[str]:
        now = self.clock.now()
        alive = {m for m, (_, at) in self._seen_at.items() if now - at <= self.config.lease_duration}
        alive.add(self.identity)
        return frozenset(alive)

    # -- ownership ------------------------------------------------------------------------------------

    def admitted(self) -> bool:
        """Every peer in this member's view has acknowledged it (rule 2), and it is not fenced (rule 3)."""
        if not self.active or self.fenced:
            return False
        return all(self.identity in self._acks.get(peer, frozenset()) for peer in self.view if peer != self.identity)

    def owns(self, key: str) -> bool:
        """Whether this member may reconcile ``key`` now."""
        return self.admitted() and owner_of(key, self.view) == self.identity

    def reconcile_finished(self) -> None:
        """Called by a controller when a reconcile ends (hand-offs wait on it)."""
        self._reconciled.set()

    # -- running --------------------------------------------------------------------------------------

    async def run(self, ready: asyncio.Event) -> None:
        """Join the group, keep the Lease and the view current; set ``ready`` once keys may be taken.

        Raises :class:`ShardMembershipLost` when the Lease could not be renewed within the renew deadline.
        Cancelled, it releases the Lease after the controllers stopped (the Manager cancels it last).
        """
        await self.informer.wait_for_sync()
        self.view = self._alive()
        await self._write_lease(self.view)
        self.published = self.view
        self.active = True
        MEMBERS.labels(self.config.group).set(len(self.view))
        log.info("sharding %s: joined as %s (%d members)", self.config.group, self.identity, len(self.view))
        ready.set()
        self._notify()
        try:
            while True:
                await self._step()
        finally:
            self.active = False

    async def _step(self) -> None:
        """Renew when due, re-evaluate the view, and publish it once the hand-off drained."""
        try:
            async with asyncio.timeout(self.config.retry_period):
                await self._changed.wait()
        except TimeoutError:
            pass
        self._changed.clear()
        now = self.clock.now()
        if now - self._renewed_at >= self.config.retry_period:
            try:
                await self._write_lease(self.published or self.view)
            except (APIError, OSError, TimeoutError) as exc:
                log.warning("sharding %s: renewing %s failed: %s", self.config.group, self.lease_name, exc)
            if self.clock.now() - self._renewed_at > self.config.renew_deadline:
                self.fenced = True
                self._notify()
                raise ShardMembershipLost(f"sharding {self.config.group}: lease {self.lease_name} not renewed "
                                          f"within {self.config.renew_deadline}s")
        view = self._alive()
        if view != self.view:
            log.info("sharding %s: members %s -> %s", self.config.group, sorted(self.view), sorted(view))
            self.view = view
            HANDOFFS.labels(self.config.group).inc()
            MEMBERS.labels(self.config.group).set(len(view))
            self._notify()
        if self.published != self.view:
            await self._drain(self.view)
            await self._write_lease(self.view)
            self.published = self.view
        self._notify()

    async def _drain(self, view: frozenset[str]) -> None:
        """Wait until no in-flight reconcile is of a key this member does not own under ``view``."""
        while any(owner_of(k, view) != self.identity for k in self.in_flight()):
            self._reconciled.clear()
            try:
                async with asyncio.timeout(self.config.retry_period):
                    await self._reconciled.wait()
            except TimeoutError:
                pass
            if self.view != view:
                return

    def _lease(self, acked: frozenset[str]) -> dict[str, Any]:
        now = self.clock.wall()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(now))
        meta: dict[str, Any] = {"name": self.lease_name, "namespace": self.config.namespace,
                                "labels": {GROUP_LABEL: self.config.group},
                                "annotations": {ACK_ANNOTATION: orjson.dumps(sorted(acked)).decode()}}
        if self._rv:
            meta["resourceVersion"] = self._rv
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.config.lease_duration),
                         "renewTime": stamp}}

    async def _write_lease(self, acked: frozenset[str]) -> None:
        started = self.clock.now()
        async with asyncio.timeout(self.config.renew_deadline):
            for _ in range(3):
                try:
                    if self._rv:
                        out = await self.client.replace(LEASES, self._lease(acked))
                    else:
                        out = await self.client.create(LEASES, self._lease(acked), namespace=self.config.namespace)
                except Conflict:
                    self._rv = await self._current_rv()
                    continue
                except NotFound:
                    self._rv = ""
                    continue
                self._rv = str(out["metadata"]["resourceVersion"])
                self._renewed_at = started
                return
        raise Conflict(f"lease {self.lease_name} kept changing")

    async def _current_rv(self) -> str:
        try:
            lease = await self.client.get(LEASES, self.lease_name, namespace=self.config.namespace)
        except NotFound:
            return ""
        return str(lease["metadata"]["resourceVersion"])

    async def release(self) -> None:
        """Leave the group: delete the Lease, so peers take this member's keys at once (call after draining)."""
        self.active = False
        try:
            async with asyncio.timeout(self.config.renew_deadline):
                await self.client.delete(LEASES, self.lease_name, namespace=self.config.namespace)
        except (APIError, OSError, TimeoutError) as exc:
            log.warning("sharding %s: releasing %s failed (peers wait out its expiry): %s",
                        self.config.group, self.lease_name, exc)
        log.info("sharding %s: %s left the group", self.config.group, self.identity)

    def _notify(self) -> None:
        for callback in self.on_change:
            callback()
