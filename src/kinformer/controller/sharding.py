"""Controller sharding: the members of a group split the keys between them, never two on one key.

Each member of a :class:`Sharding` group holds one Lease (coordination.k8s.io/v1) labelled with the group
and sees the others through an informer on those Leases. A key (``namespace/name`` of the primary object,
``name`` for cluster-scoped ones) belongs to the member with the highest rendezvous score
``hash(member, key)`` among the members of its *view* (the members it considers alive), so a member joining
or leaving moves only the keys it gains or gives up (about ``1/N`` of them).

Safety — a key is reconciled by at most one member at a time — rests on four rules:

1. **Views that contain each other agree.** If A and B are each in the other's view, they cannot both own
   a key: comparing their two scores gives the same answer in both views.
2. **Joining.** A member writes its Lease without an acknowledgement (it reconciles nothing yet), waits
   until its own informer has delivered that write — so, the watch being in the server's order, it has seen
   every member that joined before it — and only then takes that view.
3. **Acknowledgements.** A member publishes, in its Lease (annotation :data:`ACK_ANNOTATION`), the view it
   acts on, and only once none of its in-flight reconciles is of a key it does not own under that view. A
   member reconciles only while every peer of its view that has published a view lists it there: a peer
   that has not seen it join may still be working on keys that move to it. A member that left keeps its
   keys until our Lease has stopped listing it (ownership is computed over the view plus the members our
   Lease may still list), so it cannot come back under the same identity and take a stale
   acknowledgement for a fresh one.
4. **Leaving, fenced as leader election.** A peer leaves a view only when its Lease is deleted (it drained
   before deleting) or released, or when its record has not been seen to change for ``lease_duration`` on
   the local clock *and* a fresh read of the Lease from the server confirms it unchanged (a stale informer
   cannot expire a live peer). A member owns nothing once ``renew_deadline`` has passed since its last
   successful renewal started (a renewal answered after that does not count); it is then fenced for good
   and the Manager stops with :class:`ShardMembershipLost` (``lease_duration > renew_deadline``: it
   stopped before anyone takes over).

Liveness: an in-flight reconcile of a key that moves is never cancelled by a hand-off (the new owner waits
for the acknowledgement); bound reconciles with the builder's ``reconcile_timeout`` to bound hand-offs.
Controllers filter at the queue (:class:`ShardedController`): a key popped while not owned is dropped and,
if its object is not in the primary cache (deleted, or mapped), remembered; when ownership changes each
controller enqueues the keys of its primary cache it gained and the remembered keys it now owns, so nothing
is lost in a hand-off. Limits: at most :data:`MAX_REMEMBERED` remembered keys per controller (oldest
forgotten first); a member's identity must be unique in its group (a restart under the same identity
continues the old membership, as client-go's leader election does). Limits of any lease protocol apply as
in leader election: equal clock rates are assumed and a process paused longer than
``lease_duration - renew_deadline`` acts on stale beliefs when it resumes.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from prometheus_client import Counter, Gauge

from kinformer.aio import task_group
from kinformer.clock import REAL_CLOCK, Clock
from kinformer.controller.leaderelection import default_identity, micro_time
from kinformer.controller.reconcile import Request
from kinformer.errors import AlreadyExists, APIError, Conflict, NotFound
from kinformer.metrics import REGISTRY

log = logging.getLogger(__name__)

__all__ = ["ACK_ANNOTATION", "GROUP_LABEL", "MAX_REMEMBERED", "ShardMember", "ShardMembershipLost",
           "ShardedController", "Sharding", "owner_of"]

GROUP_LABEL = "sharding.kinformer.io/group"
ACK_ANNOTATION = "sharding.kinformer.io/acknowledged-members"
LEASES = "coordination.k8s.io/v1/leases"
MAX_REMEMBERED = 100_000

MEMBERS = Gauge("kinformer_shard_members", "Members this replica considers alive in its sharding group",
                ["group"], registry=REGISTRY)
OWNED = Gauge("kinformer_shard_owned_keys", "Keys of the primary caches this member owns", ["group"],
              registry=REGISTRY)
HANDOFFS = Counter("kinformer_shard_handoffs_total", "Changes of this member's view of its group", ["group"],
                   registry=REGISTRY)
DROPPED = Counter("kinformer_shard_keys_dropped_total", "Queued keys skipped because this member did not own them",
                  ["controller"], registry=REGISTRY)


class ShardMembershipLost(Exception):
    """This member could not renew its Lease within the renew deadline (or its Lease was deleted by someone
    else); its controllers have been stopped."""


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
        if self.identity is not None and not self.identity:
            raise ValueError("identity must not be empty (None: generated)")
        if not self.lease_duration > self.renew_deadline > self.retry_period * 1.2 > 0:
            raise ValueError("sharding needs lease_duration > renew_deadline > 1.2 x retry_period > 0 "
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


def lease_name(group: str, identity: str) -> str:
    """A DNS-1123 name for ``identity``'s Lease (identities may hold characters names may not)."""
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    prefix = "".join(c if c.isalnum() else "-" for c in group.lower())[:40].strip("-") or "shard"
    return f"{prefix}-{digest}"


def _acknowledged(meta: Mapping[str, Any]) -> frozenset[str] | None:
    """The view a Lease publishes; None while its member is joining (no view published: it owns nothing)."""
    raw = (meta.get("annotations") or {}).get(ACK_ANNOTATION)
    if raw is None:
        return None
    try:
        members = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return frozenset()
    return frozenset(m for m in members if isinstance(m, str)) if isinstance(members, list) else frozenset()


@dataclass
class _Peer:
    lease: str  # the Lease's name
    rv: str  # its resourceVersion last seen
    seen_at: float  # local monotonic time the record was last seen to change
    acked: frozenset[str] | None


class ShardMember:
    """One member of a sharding group: its Lease, its view of the others, and who owns which key.

    Callbacks in ``on_change`` run on the event loop whenever the keys this member may reconcile may have
    changed (also when it is fenced). ``in_flight()`` returns the keys being reconciled right now across
    the Manager's controllers, which call :meth:`reconcile_finished` when a reconcile ends.
    """

    def __init__(self, config: Sharding, client: Any, factory: Any, *, clock: Clock = REAL_CLOCK) -> None:
        self.config = config
        self.client = client
        self.clock = clock
        self.identity = config.identity or default_identity()
        self.lease_name = lease_name(config.group, self.identity)
        self.informer = factory.informer(LEASES, namespace=config.namespace,
                                         label_selector=f"{GROUP_LABEL}={config.group}")
        self._registration = self.informer.add_event_handler(
            on_add=self._on_add, on_update=self._on_update, on_delete=self._on_delete)
        self._peers: dict[str, _Peer] = {}  # identity -> what was last seen of its Lease
        self.view: frozenset[str] = frozenset({self.identity})
        self.published: frozenset[str] | None = None  # the acknowledgement last written
        self._claimed: frozenset[str] = frozenset()  # members our Lease may list (published, or being written)
        self._to_publish: frozenset[str] | None = None
        self.fenced = False
        self.active = False  # joined: its first view is published
        self.ready = asyncio.Event()
        self.on_change: list[Callable[[], Any]] = []
        self.in_flight: Callable[[], Iterable[str]] = lambda: ()
        self._changed = asyncio.Event()
        self._publish = asyncio.Event()
        self._renewed_at = clock.now()
        self._rv = ""
        self._written: set[str] = set()  # resourceVersions of our own writes, and of our Lease as delivered,
        self._delivered: set[str] = set()  # until the informer caught up with a write (rule 2)
        self._caught_up = asyncio.Event()
        self._notified: tuple[frozenset[str], bool, bool] | None = None  # (acting, admitted, fenced) told

    # -- what the others say --------------------------------------------------------------------------

    # coroutine handlers: they run on the event loop (plain ones would run in a thread)
    async def _on_add(self, lease: Mapping[str, Any]) -> None:
        self._seen(lease)

    async def _on_update(self, _old: Any, lease: Mapping[str, Any]) -> None:
        self._seen(lease)

    async def _on_delete(self, lease: Any) -> None:
        self._gone(lease)

    def _seen(self, lease: Mapping[str, Any]) -> None:
        meta = lease.get("metadata") or {}
        holder = (lease.get("spec") or {}).get("holderIdentity") or ""
        name, rv = str(meta.get("name", "")), str(meta.get("resourceVersion", ""))
        if name == self.lease_name:
            self._own_seen(rv)
            return
        if not holder:  # released: whoever held it left after draining
            self._forget_lease(name)
            return
        peer = self._peers.get(holder)
        if peer is None or peer.rv != rv:
            self._peers[holder] = _Peer(name, rv, self.clock.now(), _acknowledged(meta))
        self._changed.set()

    def _own_seen(self, rv: str) -> None:
        if not self._caught_up.is_set():
            self._delivered.add(rv)
            self._check_caught_up()

    def _own_written(self, rv: str) -> None:
        if not self._caught_up.is_set():
            self._written.add(rv)
            self._check_caught_up()

    def _check_caught_up(self) -> None:
        """Caught up once the informer delivered one of our own writes (the event may come first)."""
        if self._written & self._delivered:
            self._caught_up.set()
            self._written.clear()
            self._delivered.clear()

    def _gone(self, lease: Any) -> None:
        obj = getattr(lease, "obj", lease) or {}
        self._forget_lease(str((obj.get("metadata") or {}).get("name", "")))

    def _forget_lease(self, name: str) -> None:
        for identity in [i for i, p in self._peers.items() if p.lease == name]:
            del self._peers[identity]
        self._changed.set()

    async def _confirm_expired(self, identity: str, peer: _Peer) -> bool:
        """Read the peer's Lease from the server: expired only if it is gone or still the record seen
        ``lease_duration`` ago (a stale informer must not expire a live peer)."""
        try:
            async with asyncio.timeout(self.config.retry_period):
                lease = await self.client.get(LEASES, peer.lease, namespace=self.config.namespace)
        except NotFound:
            return True
        except (APIError, OSError, TimeoutError) as exc:
            log.warning("sharding %s: reading %s failed: %s", self.config.group, peer.lease, exc)
            return False
        meta = lease.get("metadata") or {}
        rv = str(meta.get("resourceVersion", ""))
        if rv != peer.rv or (lease.get("spec") or {}).get("holderIdentity") != identity:
            self._seen(lease)
            return False
        try:  # a crashed member's Lease: clear it so later members need not wait it out
            await self.client.delete(LEASES, peer.lease, namespace=self.config.namespace,
                                     preconditions={"resourceVersion": rv})
        except (APIError, OSError, TimeoutError):
            pass
        return True

    async def _current_view(self) -> frozenset[str]:
        now = self.clock.now()
        for identity, peer in list(self._peers.items()):
            if now - peer.seen_at > self.config.lease_duration and await self._confirm_expired(identity, peer):
                if self._peers.get(identity) is peer:
                    del self._peers[identity]
                log.info("sharding %s: member %s expired", self.config.group, identity)
        return frozenset({self.identity, *self._peers})

    # -- ownership ------------------------------------------------------------------------------------

    def admitted(self) -> bool:
        """Joined, not fenced, renewed within the renew deadline, and acknowledged by every peer of its view
        that has published a view (rules 2-4)."""
        if not self.active or self.fenced:
            return False
        if self.clock.now() - self._renewed_at >= self.config.renew_deadline:
            return False
        for identity in self.view:
            peer = self._peers.get(identity)
            if peer is not None and peer.acked is not None and self.identity not in peer.acked:
                return False
        return True

    @property
    def acting(self) -> frozenset[str]:
        """The members ownership is computed over: the view, plus the members our Lease may still list as
        acknowledged. A member that left keeps its keys until our Lease stops listing it, so that member,
        back under the same identity, cannot take our stale acknowledgement for a fresh one."""
        return self.view | self._claimed

    def owns(self, key: str) -> bool:
        """Whether this member may reconcile ``key`` now."""
        return self.admitted() and owner_of(key, self.acting) == self.identity

    def owner_under(self, acting: frozenset[str], admitted: bool) -> Callable[[str], bool]:
        """``owns`` as it was for a recorded (acting, admitted) state."""
        return lambda key: admitted and owner_of(key, acting) == self.identity

    def reconcile_finished(self) -> None:
        """Called by a controller when a reconcile ends (a pending acknowledgement may now be published)."""
        if self._to_publish != self.view:
            self._changed.set()

    # -- running --------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Join the group and keep the Lease and the view current until cancelled.

        Raises :class:`ShardMembershipLost` once fenced. Cancelled, it leaves the Lease in place: the
        Manager calls :meth:`release` after its controllers drained.
        """
        try:
            async with task_group() as group:
                group.create_task(self._fence_loop(), name=f"shard-{self.lease_name}-fence")
                group.create_task(self._renew_loop(), name=f"shard-{self.lease_name}-renew")
                group.create_task(self._view_loop(), name=f"shard-{self.lease_name}-view")
        finally:
            self.active = False

    async def _fence_loop(self) -> None:
        """Fence once a joined member's last successful renewal started ``renew_deadline`` ago (rule 4)."""
        while True:
            left = self._renewed_at + self.config.renew_deadline - self.clock.now()
            if not self.active:
                left = self.config.retry_period  # joining: nothing owned yet, keep trying
            elif left <= 0:
                self.fenced = True
                log.warning("sharding %s: lease %s not renewed within %.1fs; fenced", self.config.group,
                            self.lease_name, self.config.renew_deadline)
                self._notify()
                raise ShardMembershipLost(f"sharding {self.config.group}: lease {self.lease_name} not renewed "
                                          f"within {self.config.renew_deadline}s")
            await self.clock.sleep(min(left, self.config.retry_period))

    async def _renew_loop(self) -> None:
        """Write the Lease every ``retry_period``, and at once when a new acknowledgement is to be published."""
        while True:
            self._publish.clear()
            acked = self._to_publish
            self._claimed |= acked or frozenset()  # a failed write may still have landed
            try:
                async with asyncio.timeout(self.config.renew_deadline):
                    await self._write_lease(acked)
            except (APIError, OSError, TimeoutError) as exc:
                log.warning("sharding %s: renewing %s failed: %s", self.config.group, self.lease_name, exc)
            else:
                if self._claimed != (acked or frozenset()):
                    self._claimed = acked or frozenset()
                    self._changed.set()
                if acked != self.published:
                    self.published = acked
                    if acked is not None and not self.active:
                        self.active = True
                        log.info("sharding %s: joined as %s (%d members)", self.config.group, self.identity,
                                 len(acked))
                        self.ready.set()
                    self._changed.set()
            try:
                async with asyncio.timeout(self.config.retry_period):
                    await self._publish.wait()
            except TimeoutError:
                pass

    async def _view_loop(self) -> None:
        """Join (rule 2), then follow the group: new view -> drain -> publish (rule 3)."""
        await self._registration.wait_for_sync()
        await self._caught_up.wait()
        while True:
            self._changed.clear()
            view = await self._current_view()
            if view != self.view:
                log.info("sharding %s: members %s -> %s", self.config.group, sorted(self.view), sorted(view))
                self.view = view
                HANDOFFS.labels(self.config.group).inc()
                MEMBERS.labels(self.config.group).set(len(view))
            if self._to_publish != self.view and self._drained():
                self._to_publish = self.view
                self._publish.set()
            self._notify()
            try:
                async with asyncio.timeout(self._next_expiry()):
                    await self._changed.wait()
            except TimeoutError:
                pass

    def _drained(self) -> bool:
        return all(owner_of(key, self.view) == self.identity for key in self.in_flight())

    def _next_expiry(self) -> float:
        """Seconds until the next peer could be considered expired (at most ``retry_period``; a peer already
        past it whose expiry a read could not confirm is read again after ``retry_period``, not sooner)."""
        now, wait = self.clock.now(), self.config.retry_period
        for peer in self._peers.values():
            left = peer.seen_at + self.config.lease_duration - now
            if left >= 0:
                wait = min(wait, left + 0.01)
        return wait

    def _lease(self, acked: frozenset[str] | None) -> dict[str, Any]:
        annotations = {} if acked is None else {ACK_ANNOTATION: orjson.dumps(sorted(acked)).decode()}
        meta: dict[str, Any] = {"name": self.lease_name, "namespace": self.config.namespace,
                                "labels": {GROUP_LABEL: self.config.group}, "annotations": annotations}
        if self._rv:
            meta["resourceVersion"] = self._rv
        spec = {"holderIdentity": self.identity, "renewTime": micro_time(self.clock.wall()),
                "leaseDurationSeconds": max(1, round(self.config.lease_duration))}
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}

    async def _write_lease(self, acked: frozenset[str] | None) -> None:
        """Create or renew the Lease; a Lease deleted under a joined member fences it (someone forced it out)."""
        started = self.clock.now()
        for _ in range(3):
            try:
                if self._rv:
                    out = await self.client.replace(LEASES, self._lease(acked), namespace=self.config.namespace)
                else:
                    out = await self.client.create(LEASES, self._lease(acked), namespace=self.config.namespace)
            except (Conflict, AlreadyExists):  # our earlier write landed unanswered, or a restart
                self._rv = await self._current_rv()
                continue
            except NotFound:
                if self.active:
                    self.fenced = True
                    self._notify()
                    raise ShardMembershipLost(f"sharding {self.config.group}: lease {self.lease_name} "
                                              "deleted") from None
                self._rv = ""
                continue
            self._rv = str(out["metadata"]["resourceVersion"])
            self._own_written(self._rv)
            if self.active and self.clock.now() - self._renewed_at >= self.config.renew_deadline:
                self.fenced = True  # answered too late: peers may already have judged us gone
            if not self.fenced:
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
        """Leave the group: delete the Lease, so peers take this member's keys at once. Call only once the
        controllers have stopped (nothing in flight)."""
        self.active = False
        self.fenced = True
        self._notify()
        try:
            async with asyncio.timeout(self.config.renew_deadline):
                await self.client.delete(LEASES, self.lease_name, namespace=self.config.namespace)
        except NotFound:
            pass
        except (APIError, OSError, TimeoutError) as exc:
            log.warning("sharding %s: releasing %s failed (peers wait out its expiry): %s",
                        self.config.group, self.lease_name, exc)
        MEMBERS.labels(self.config.group).set(0)
        log.info("sharding %s: %s left the group", self.config.group, self.identity)

    def _notify(self) -> None:
        """Tell the controllers, when what this member may own has changed."""
        state = (self.acting, self.admitted(), self.fenced)
        if state == self._notified:
            return
        self._notified = state
        owned = sum(callback() or 0 for callback in self.on_change)
        OWNED.labels(self.config.group).set(owned)


class ShardedController:
    """A controller's side of sharding: filter at the queue, re-enqueue what ownership brings.

    Invariant: every key this member owns is either queued, in flight, or was reconciled while owned since
    it last changed hands — a key popped while not owned is re-enqueued when ownership arrives (from the
    primary cache, or from the bounded set of remembered keys whose object is not cached).
    """

    def __init__(self, controller: Any, member: ShardMember) -> None:
        self.controller = controller
        self.member = member
        self._state: tuple[frozenset[str], bool] = (frozenset(), False)
        self._remembered: dict[Any, None] = {}  # Requests, oldest first
        self._dropped = DROPPED.labels(controller.name)
        member.on_change.append(self.on_change)

    def admit(self, request: Any) -> bool:
        """Whether a popped request may be reconciled here; if not it is counted and, when its object is not
        in the primary cache, remembered.

        A drop also makes the member notify its current state: admission can lapse and return between two
        notifications (a peer's Lease read twice before the view loop runs), and a key dropped in such a
        window must still count as not owned before, so that the return of ownership re-enqueues it.
        """
        if self.member.owns(request.key):
            return True
        self.member._notify()
        self._dropped.inc()
        primary = self.controller.primary
        if primary is None or primary.indexer.get_by_key(request.key) is None:
            self._remembered.pop(request, None)
            self._remembered[request] = None
            if len(self._remembered) > MAX_REMEMBERED:
                del self._remembered[next(iter(self._remembered))]
        return False

    def on_change(self) -> int:
        """Enqueue the keys gained since the last change; abort the controller once fenced. Returns the
        number of primary keys owned now."""
        member, ctrl = self.member, self.controller
        if member.fenced:
            ctrl.abort()
            return 0
        state = (member.acting, member.admitted())
        owned_now = member.owner_under(*state)
        keys = ctrl.primary.indexer.list_keys() if ctrl.primary is not None else []
        owned_before = member.owner_under(*self._state)
        self._state = state
        owned = 0
        for key in keys:
            if owned_now(key):
                owned += 1
                if not owned_before(key):
                    namespace, _, name = key.rpartition("/")
                    ctrl.queue.add(Request(namespace, name))
        for request in [r for r in self._remembered if owned_now(r.key)]:
            del self._remembered[request]
            ctrl.queue.add(request)
        return owned
