"""The server's own controllers: ownerReference garbage collection, namespace and CRD cleanup.

Driven by the watch cache's event stream (a listener, no polling). Each event queues the keys that
need another look; one worker task re-reads them from the cache and acts through the ObjectStore, so
every action is an ordinary compare-and-swap write and is idempotent.

* Background: once every owner of a dependent is gone the dependent is deleted; references to owners
  that are gone are dropped while another owner lives.
* Foreground: an owner with the ``foregroundDeletion`` finalizer deletes its dependents (foreground
  too) and loses the finalizer once no dependent with ``blockOwnerDeletion: true`` remains.
* Orphan: an owner with the ``orphan`` finalizer removes its reference from every dependent, then
  loses the finalizer.
* A terminating namespace deletes everything in it, then drops its ``kubernetes`` finalizer.
* A CRD being deleted deletes its custom resources (only those it serves: never a built-in's objects), then
  drops ``customresourcecleanup``.

Several API server replicas over one store each run this collector, with no coordination: every
decision is taken from a cache that reflects one consistent revision, and every action is either a
compare-and-swap on the revision the decision was based on (deleting a dependent whose owners are
gone carries uid and resourceVersion preconditions, so a dependent changed meanwhile is looked at
again rather than deleted) or a change that is the same whoever makes it (removing a finalizer,
deleting a terminating namespace's content). A replica that loses a race gets 404 (done by another)
or 409, and retries the key after a short delay once its cache has caught up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from ..machinery import status as st
from ..registry.objects import CRD_FINALIZER, FOREGROUND, NAMESPACE_FINALIZER, ORPHAN, ObjectStore, timestamp
from ..registry.resources import Registry, ResourceInfo
from ..storage.watchcache import CachedEvent, CachedObject, WatchCache, split_key
from .cachecontroller import remove_finalizer
from .namespace_conditions import remaining_content, terminating_conditions

log = logging.getLogger(__name__)

NS_PREFIX = "/registry/core/namespaces/"
CRD_PREFIX = "/registry/apiextensions.k8s.io/customresourcedefinitions/"
CONFLICT_RETRY = 0.05  # seconds before a key that hit a conflict is looked at again
NAMESPACE_SYNC_TIMEOUT = 2.0  # bound on the consistent read before a namespace's finalizer is removed


_NO_OWNERS: frozenset[str] = frozenset()


def _owners_of(meta: Mapping[str, Any]) -> AbstractSet[str]:
    """The owner uids that the object of metadata ``meta`` names (the same empty set when it names none)."""
    refs = meta.get("ownerReferences")
    if not refs:
        return _NO_OWNERS
    return {r["uid"] for r in refs if isinstance(r, Mapping) and r.get("uid")}


def _blocked(meta: Mapping[str, Any]) -> AbstractSet[str]:
    """The owner uids whose deletion the object of metadata ``meta`` blocks (``blockOwnerDeletion: true``)."""
    return {r["uid"] for r in meta.get("ownerReferences") or () if isinstance(r, Mapping) and r.get("uid")
            and r.get("blockOwnerDeletion") is True}


def _unblocked(old_meta: Mapping[str, Any], meta: Mapping[str, Any]) -> AbstractSet[str]:
    """The owner uids the object blocked in ``old_meta`` and no longer blocks in ``meta``: references removed or
    whose ``blockOwnerDeletion`` went from true to false or absent (kube's addUnblockedOwnersToDeleteQueue)."""
    if old_meta.get("ownerReferences") == meta.get("ownerReferences"):
        return _NO_OWNERS
    was = _blocked(old_meta)
    return was - _blocked(meta) if was else _NO_OWNERS


class GarbageCollector:
    """Owner/dependent bookkeeping from the cache's events plus one worker that finishes deletions."""

    def __init__(self, cache: WatchCache, store: ObjectStore, registry: Registry) -> None:
        self.cache = cache
        self.store = store
        self.registry = registry
        self.uid_to_key: dict[str, str] = {}
        self.dependents: dict[str, set[str]] = {}
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._pending: set[str] = set()
        self._delayed: dict[str, asyncio.TimerHandle] = {}  # keys waiting to be retried after a conflict
        self._task: asyncio.Task[None] | None = None
        self.idle = asyncio.Event()
        self.idle.set()

    # ------------------------------------------------------------------------------ bookkeeping

    def start(self) -> None:
        self.rebuild()
        # every resource: any object may own or depend on another
        self.cache.add_listener(self.on_event, on_reset=self.rebuild)
        self._task = asyncio.create_task(self._run(), name="kinformer-gc")

    def rebuild(self) -> None:
        """Re-derive the owner indexes from the cache and queue everything that may need work."""
        self.uid_to_key.clear()
        self.dependents.clear()
        for bucket in self.cache.buckets.values():
            for key, co in bucket.objects.items():
                self._index(key, None, co.meta)
        for bucket in self.cache.buckets.values():
            for key, co in bucket.objects.items():
                meta = co.meta
                if meta.get("deletionTimestamp") or meta.get("ownerReferences"):
                    self.enqueue(key)

    async def stop(self) -> None:
        self.cache.remove_listener(self.on_event)
        for timer in self._delayed.values():
            timer.cancel()
        self._delayed.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _index(self, key: str, old_meta: Mapping[str, Any] | None, new_meta: Mapping[str, Any] | None) -> None:
        """Record in the uid and owner indexes that ``key`` went from ``old_meta`` to ``new_meta`` (its
        metadata before and after; None: absent)."""
        if new_meta is not None:
            uid = new_meta.get("uid")
            if uid:
                self.uid_to_key[uid] = key
        elif old_meta is not None:
            uid = old_meta.get("uid")
            if uid and self.uid_to_key.get(uid) == key:
                del self.uid_to_key[uid]
        if (old_meta is not None and old_meta.get("ownerReferences")) or \
                (new_meta is not None and new_meta.get("ownerReferences")):  # most objects have no owner
            self._index_owners(key, _owners_of(old_meta) if old_meta is not None else _NO_OWNERS,
                               _owners_of(new_meta) if new_meta is not None else _NO_OWNERS)

    def _index_owners(self, key: str, old: AbstractSet[str], new: AbstractSet[str]) -> None:
        for owner in old - new:
            deps = self.dependents.get(owner)
            if deps is not None:
                deps.discard(key)
                if not deps:
                    del self.dependents[owner]
        for owner in new:
            self.dependents.setdefault(owner, set()).add(key)

    def enqueue(self, key: str) -> None:
        if key not in self._pending:
            self._pending.add(key)
            self.idle.clear()
            self._queue.put_nowait(key)

    def on_event(self, prefix: str, ev: CachedEvent) -> None:
        """Cache listener: update the indexes and queue whatever this change may unblock.

        An object is looked at when it is being deleted, or when it names owners and it is new or its
        ownerReferences changed (kube's graph builder): with the same references its owners were judged at
        that change, and an owner's deletion queues its dependents (:meth:`_on_deleted`). An owner is looked at
        again when a dependent stops naming it, or stops blocking its deletion (``blockOwnerDeletion`` true to
        false): an owner deleting its dependents in the foreground may be waiting on that one alone."""
        cur = ev.cur
        meta = cur.meta
        if ev.type == "DELETED":
            self._on_deleted(prefix, cur.key, cur.namespace, meta)
            return
        prev = ev.prev
        old_meta = prev.meta if prev is not None else None
        refs = meta.get("ownerReferences")
        if old_meta is not None and old_meta.get("ownerReferences") == refs and old_meta.get("uid") == meta.get("uid"):
            # neither its uid nor its owners changed (a status write, say): the indexes hold it as they are, and
            # nothing it names is unblocked; only a deletion in progress needs a look
            if meta.get("deletionTimestamp"):
                self.enqueue(cur.key)
            return
        self._index(cur.key, old_meta, meta)
        if meta.get("deletionTimestamp") or (refs and (old_meta is None or old_meta.get("ownerReferences") != refs)):
            self.enqueue(cur.key)
        if old_meta is None:
            if cur.namespace:  # new content of a namespace that may be terminating (it raced the deletion)
                bucket = self.cache.buckets.get(NS_PREFIX)
                ns = bucket.objects.get(NS_PREFIX + cur.namespace) if bucket is not None else None
                if ns is None or ns.meta.get("deletionTimestamp"):
                    self.enqueue(NS_PREFIX + cur.namespace)
        elif old_meta.get("ownerReferences") or refs:
            old_owners = _owners_of(old_meta)
            left = old_owners - _owners_of(meta) if old_owners else _NO_OWNERS
            for owner in left | _unblocked(old_meta, meta):
                owner_key = self.uid_to_key.get(owner)
                if owner_key is not None:
                    self.enqueue(owner_key)

    def _on_deleted(self, prefix: str, key: str, namespace: str, meta: Mapping[str, Any]) -> None:
        self._index(key, meta, None)
        uid = meta.get("uid")
        for dep in self.dependents.get(uid, ()) if uid else ():
            self.enqueue(dep)
        for owner in _owners_of(meta):
            owner_key = self.uid_to_key.get(owner)
            if owner_key is not None:
                self.enqueue(owner_key)
        if namespace:
            self.enqueue(NS_PREFIX + namespace)
        self._crd_contents_changed(prefix)

    def _crd_contents_changed(self, prefix: str) -> None:
        group, plural = prefix.split("/")[2:4]
        info = self.registry.by_storage_prefix(group, plural)
        if info is not None and not info.builtin and info.crd_name:
            self.enqueue(CRD_PREFIX + info.crd_name)

    # ------------------------------------------------------------------------------ worker

    async def _run(self) -> None:
        while True:
            key = await self._queue.get()
            self._pending.discard(key)
            try:
                await self._sync(key)
            except asyncio.CancelledError:
                raise
            except st.StatusError as e:
                if e.code not in (404, 409):
                    log.warning("garbage collector: %s: %s", key, e.message)
                if e.code == 409:
                    self._retry_later(key)
            except Exception:
                log.exception("garbage collector failed on %s", key)
            if self._queue.empty() and not self._delayed:
                self.idle.set()

    def _retry_later(self, key: str) -> None:
        """Re-queue ``key`` after :data:`CONFLICT_RETRY` seconds (time for this replica's cache to catch up)."""
        if key in self._delayed:
            return

        def again() -> None:
            del self._delayed[key]
            self.enqueue(key)

        self._delayed[key] = asyncio.get_running_loop().call_later(CONFLICT_RETRY, again)

    def _lookup(self, key: str) -> tuple[ResourceInfo, CachedObject, str, str] | None:
        """The cached object of ``key`` with its resource, namespace and name (None: not cached or not served)."""
        prefix, ns, name = split_key(key)
        bucket = self.cache.buckets.get(prefix)
        co = bucket.objects.get(key) if bucket is not None else None
        if co is None:
            return None
        group, plural = prefix.split("/")[2:4]
        info = self.registry.by_storage_prefix(group, plural)
        if info is None:
            return None
        return info, co, ns, name

    async def _sync(self, key: str) -> None:
        found = self._lookup(key)
        if found is None:
            return
        info, co, ns, name = found
        meta = co.meta
        if meta.get("deletionTimestamp"):
            fins = meta.get("finalizers") or ()
            if ORPHAN in fins:
                await self._orphan(info, meta, ns, name)
            elif FOREGROUND in fins:
                await self._foreground(info, meta, ns, name)
            if key.startswith(NS_PREFIX):
                await self._namespace(info, co.obj, name)
            elif key.startswith(CRD_PREFIX) and CRD_FINALIZER in fins:
                await self._crd(info, co.obj, name)
            return
        await self._check_owners(info, meta, ns, name)

    async def _check_owners(self, info: ResourceInfo, meta: Mapping[str, Any], ns: str, name: str) -> None:
        owners = _owners_of(meta)
        if not owners:
            return
        alive = {u for u in owners if self._owner_state(u, ns) != "absent"}
        if alive == owners:
            return
        uid = meta.get("uid")
        if not alive:
            pre = {"uid": uid, "resourceVersion": meta.get("resourceVersion")} if uid else {}
            await self.store.delete(info, ns, name, {"propagationPolicy": "Background", "preconditions": pre})
            return
        await self._drop_refs(info, ns, name, owners - alive, uid)

    def _owner_state(self, owner_uid: str, dependent_ns: str) -> str:
        """``absent``, ``waiting`` (being deleted in the foreground) or ``solid``, as the dependent sees it.

        A namespaced owner exists for a dependent only in the dependent's own namespace (kube's rule);
        a cluster-scoped owner exists for every dependent.
        """
        key = self.uid_to_key.get(owner_uid)
        if key is None:
            return "absent"
        prefix, owner_ns, _ = split_key(key)
        if owner_ns and owner_ns != dependent_ns:
            return "absent"
        bucket = self.cache.buckets.get(prefix)
        co = bucket.objects.get(key) if bucket is not None else None
        if co is None:
            return "absent"
        meta = co.meta
        if meta.get("deletionTimestamp") and FOREGROUND in (meta.get("finalizers") or ()):
            return "waiting"
        return "solid"

    async def _drop_refs(self, info: ResourceInfo, ns: str, name: str, owners: AbstractSet[str],
                         uid: str | None) -> None:
        def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
            meta = cur["metadata"]
            if uid and meta.get("uid") != uid:
                return None
            refs = meta.get("ownerReferences") or []
            kept = [r for r in refs if r.get("uid") not in owners]
            if len(kept) == len(refs):
                return None
            if kept:
                meta["ownerReferences"] = kept
            else:
                meta.pop("ownerReferences", None)
            return cur

        await self.store.mutate(info, ns, name, fn, raw=True)

    async def _remove_finalizer(self, info: ResourceInfo, ns: str, name: str, finalizer: str) -> None:
        await remove_finalizer(self.store, info, ns, name, finalizer)

    def _dependents_of(self, uid: str) -> list[tuple[ResourceInfo, Mapping[str, Any], str, str]]:
        """The cached dependents of ``uid``: resource, metadata (:attr:`CachedObject.meta`), namespace, name."""
        out: list[tuple[ResourceInfo, Mapping[str, Any], str, str]] = []
        for dep in sorted(self.dependents.get(uid, ())):
            found = self._lookup(dep)
            if found is not None:
                dinfo, co, dns, dname = found
                out.append((dinfo, co.meta, dns, dname))
        return out

    async def _orphan(self, info: ResourceInfo, meta: Mapping[str, Any], ns: str, name: str) -> None:
        uid = meta.get("uid", "")
        for dinfo, dmeta, dns, dname in self._dependents_of(uid):
            await self._drop_refs(dinfo, dns, dname, {uid}, dmeta.get("uid"))
        await self._remove_finalizer(info, ns, name, ORPHAN)

    async def _foreground(self, info: ResourceInfo, meta: Mapping[str, Any], ns: str, name: str) -> None:
        uid = meta.get("uid", "")
        blocking = False
        for dinfo, dmeta, dns, dname in self._dependents_of(uid):
            refs = dmeta.get("ownerReferences") or ()
            if any(r.get("uid") == uid and r.get("blockOwnerDeletion") for r in refs):
                blocking = True
            states = {u: self._owner_state(u, dns) for u in _owners_of(dmeta) if u != uid}
            if any(state == "solid" for state in states.values()):
                # Another owner keeps it: only the references to owners going away are dropped.
                gone = {uid} | {u for u, state in states.items() if state != "solid"}
                await self._drop_refs(dinfo, dns, dname, gone, dmeta.get("uid"))
                continue
            if not dmeta.get("deletionTimestamp"):
                try:
                    await self.store.delete(dinfo, dns, dname, {"propagationPolicy": "Foreground"})
                except st.StatusError as e:
                    if e.code != 404:
                        raise
        if not blocking:
            await self._remove_finalizer(info, ns, name, FOREGROUND)

    async def _delete_all(self, prefixes: list[tuple[ResourceInfo, str]]) -> bool:
        """Delete every object under the given (info, key prefix) pairs; True when none is left."""
        empty = True
        for info, prefix in prefixes:
            bucket = self.cache.buckets.get(info.storage_prefix)
            if bucket is None:
                continue
            for key in [k for k in bucket.objects if k.startswith(prefix)]:
                empty = False
                co = bucket.objects.get(key)
                if co is None or co.meta.get("deletionTimestamp"):
                    continue
                try:
                    await self.store.delete(info, co.namespace, co.name, {"propagationPolicy": "Background"})
                except st.StatusError as e:
                    if e.code != 404:
                        raise
        return empty

    async def _namespace(self, info: ResourceInfo, obj: Mapping[str, Any], name: str) -> None:
        if NAMESPACE_FINALIZER not in ((obj.get("spec") or {}).get("finalizers") or ()):
            return
        seen: set[str] = set()
        targets = []
        for res in self.registry.resources():
            if res.namespaced and res.storage_prefix not in seen:
                seen.add(res.storage_prefix)
                targets.append((res, f"{res.storage_prefix}{name}/"))
        if not await self._delete_all(targets):
            await self._report_remaining(info, name, targets)
            return
        # The cache may lag storage: content created just before the deletion showed up in the cache must
        # be seen (and deleted) before the namespace goes, or it would outlive its namespace.
        try:
            await self.cache.sync(timeout=NAMESPACE_SYNC_TIMEOUT)
        except TimeoutError:
            self._retry_later(NS_PREFIX + name)
            return
        if not await self._delete_all(targets):
            return

        def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
            spec = cur.get("spec") or {}
            fins = spec.get("finalizers") or []
            if NAMESPACE_FINALIZER not in fins:
                return None
            spec["finalizers"] = [f for f in fins if f != NAMESPACE_FINALIZER]
            cur["spec"] = spec
            return cur

        await self.store.mutate(info, "", name, fn, raw=True)

    async def _report_remaining(self, info: ResourceInfo, name: str, targets: list[tuple[ResourceInfo, str]]) -> None:
        """Set the terminating namespace's conditions from what its content still is."""
        left = []
        for res, prefix in targets:
            bucket = self.cache.buckets.get(res.storage_prefix)
            label = f"{res.plural}.{res.group}"
            left += [(label, co.obj) for k, co in (bucket.objects.items() if bucket else ()) if k.startswith(prefix)]
        resources, finalizers = remaining_content(left)

        def fn(cur: dict[str, Any]) -> dict[str, Any] | None:
            status = cur.setdefault("status", {})
            conditions = terminating_conditions(resources, finalizers, timestamp(self.store.clock),
                                                status.get("conditions") or ())
            if conditions == status.get("conditions"):
                return None
            status["conditions"] = conditions
            return cur

        await self.store.mutate(info, "", name, fn, raw=True)

    async def _crd(self, info: ResourceInfo, obj: Mapping[str, Any], name: str) -> None:
        spec = obj.get("spec") or {}
        try:
            group, plural = spec["group"], spec["names"]["plural"]
        except (KeyError, TypeError):
            group = plural = ""
        target = self.registry.by_storage_prefix(group, plural) if group else None
        if target is not None and target.crd_name == name and \
                not await self._delete_all([(target, target.storage_prefix)]):
            return
        await self._remove_finalizer(info, "", name, CRD_FINALIZER)

    async def wait_idle(self, timeout: float = 5.0) -> None:
        """Wait until the worker has nothing queued (for tests and orderly shutdown)."""
        await asyncio.wait_for(self.idle.wait(), timeout)
