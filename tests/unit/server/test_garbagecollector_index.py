"""The garbage collector's owner index follows the watch cache's events (kube's graph builder: uidToNode, owners)."""

from __future__ import annotations

from typing import Any

from kinformer.server.controllers.garbagecollector import NS_PREFIX, GarbageCollector
from kinformer.server.registry.resources import Registry
from kinformer.server.storage.memory import MemoryStorage
from kinformer.server.storage.watchcache import CachedEvent, CachedObject, WatchCache

CMS = "/registry/core/configmaps/"


def _version(name: str, rev: int, owners: tuple[str, ...] = ()) -> CachedObject:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    if owners:
        meta["ownerReferences"] = [{"uid": o, "kind": "ConfigMap", "name": o, "apiVersion": "v1"} for o in owners]
    return CachedObject(f"{CMS}default/{name}", "default", name, {"metadata": meta}, b"{}", rev)


def _collector() -> GarbageCollector:
    cache = WatchCache(MemoryStorage())
    key = f"{NS_PREFIX}default"
    cache.bucket(NS_PREFIX).objects[key] = CachedObject(key, "", "default", {"metadata": {"name": "default"}}, b"{}", 1)
    return GarbageCollector(cache, None, Registry())  # type: ignore[arg-type]  # bookkeeping only: no store


def _queued(gc: GarbageCollector) -> list[str]:
    out = []
    while not gc._queue.empty():
        out.append(gc._queue.get_nowait())
    gc._pending.clear()
    return out


def test_the_owner_index_follows_added_changed_and_dropped_owner_references() -> None:
    gc = _collector()
    owner_a, owner_b = _version("a", 2), _version("b", 3)
    for co in (owner_a, owner_b):
        gc.on_event(CMS, CachedEvent("ADDED", co, None))
    assert gc.uid_to_key == {"uid-a": owner_a.key, "uid-b": owner_b.key} and not gc.dependents
    assert _queued(gc) == []  # ownerless content of a live namespace needs no look

    v1 = _version("d", 4, ("uid-a",))
    gc.on_event(CMS, CachedEvent("ADDED", v1, None))
    assert gc.dependents == {"uid-a": {v1.key}} and _queued(gc) == [v1.key]

    v2 = _version("d", 5, ("uid-b",))  # the owner changed: the one it left is looked at again
    gc.on_event(CMS, CachedEvent("MODIFIED", v2, v1))
    assert gc.dependents == {"uid-b": {v1.key}} and _queued(gc) == [v1.key, owner_a.key]

    v3 = _version("d", 6)
    gc.on_event(CMS, CachedEvent("MODIFIED", v3, v2))
    assert not gc.dependents and _queued(gc) == [owner_b.key]

    gc.on_event(CMS, CachedEvent("DELETED", _version("d", 7), v3))
    assert "uid-d" not in gc.uid_to_key and _queued(gc) == [f"{NS_PREFIX}default"]


def test_new_content_of_a_missing_or_terminating_namespace_queues_the_namespace() -> None:
    gc = _collector()
    gone = _version("x", 2)
    gone.namespace = "gone"
    gc.on_event(CMS, CachedEvent("ADDED", gone, None))
    assert _queued(gc) == [f"{NS_PREFIX}gone"]
    ns = gc.cache.buckets[NS_PREFIX].objects[f"{NS_PREFIX}default"]
    ns.obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    gc.on_event(CMS, CachedEvent("ADDED", _version("y", 3), None))
    assert _queued(gc) == [f"{NS_PREFIX}default"]


def test_a_dependent_is_looked_at_when_new_when_its_owner_references_change_or_when_being_deleted() -> None:
    """An update that keeps a dependent's ownerReferences (a pod's binding or status write) queues nothing: its
    owners were judged when the references were set, and an owner's deletion queues it."""
    gc = _collector()
    gc.on_event(CMS, CachedEvent("ADDED", _version("a", 2), None))
    v1 = _version("d", 3, ("uid-a",))
    gc.on_event(CMS, CachedEvent("ADDED", v1, None))
    assert _queued(gc) == [v1.key]
    v2 = _version("d", 4, ("uid-a",))
    v2.obj["metadata"]["labels"] = {"changed": "yes"}
    gc.on_event(CMS, CachedEvent("MODIFIED", v2, v1))
    assert _queued(gc) == [] and gc.dependents == {"uid-a": {v1.key}}
    v3 = _version("d", 5, ("uid-a",))
    v3.obj["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = True
    gc.on_event(CMS, CachedEvent("MODIFIED", v3, v2))
    assert _queued(gc) == [v1.key]
    v4 = _version("d", 6, ("uid-a",))
    v4.obj["metadata"].update(ownerReferences=v3.obj["metadata"]["ownerReferences"],
                              deletionTimestamp="2026-01-01T00:00:00Z")
    gc.on_event(CMS, CachedEvent("MODIFIED", v4, v3))
    assert _queued(gc) == [v1.key]
    gc.on_event(CMS, CachedEvent("DELETED", _version("a", 7), _version("a", 2)))
    assert _queued(gc) == [v1.key, f"{NS_PREFIX}default"]  # its owner went


def test_an_owner_is_looked_at_when_a_dependent_stops_blocking_its_deletion() -> None:
    """kube's addUnblockedOwnersToDeleteQueue: a reference whose blockOwnerDeletion goes from true to false, or
    a blocking reference removed, queues its owner (a foreground deletion may be waiting on that dependent)."""
    gc = _collector()
    owner_a, owner_b = _version("a", 2), _version("b", 3)
    for co in (owner_a, owner_b):
        gc.on_event(CMS, CachedEvent("ADDED", co, None))
    v1 = _version("d", 4, ("uid-a", "uid-b"))
    for r in v1.obj["metadata"]["ownerReferences"]:
        r["blockOwnerDeletion"] = True
    gc.on_event(CMS, CachedEvent("ADDED", v1, None))
    assert _queued(gc) == [v1.key]
    v2 = _version("d", 5, ("uid-a", "uid-b"))
    v2.obj["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = True
    v2.obj["metadata"]["ownerReferences"][1]["blockOwnerDeletion"] = False  # b unblocked
    gc.on_event(CMS, CachedEvent("MODIFIED", v2, v1))
    assert _queued(gc) == [v1.key, owner_b.key]
    v3 = _version("d", 6, ("uid-a", "uid-b"))
    v3.obj["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = True
    v3.obj["metadata"]["ownerReferences"][1]["apiVersion"] = "v2"  # changed, but b was not blocked
    gc.on_event(CMS, CachedEvent("MODIFIED", v3, v2))
    assert _queued(gc) == [v1.key]
    v4 = _version("d", 7, ("uid-b",))  # the blocking reference to a removed
    gc.on_event(CMS, CachedEvent("MODIFIED", v4, v3))
    assert _queued(gc) == [v1.key, owner_a.key]
    v5 = _version("d", 8, ("uid-b",))
    v5.obj["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = True
    gc.on_event(CMS, CachedEvent("MODIFIED", v5, v4))  # blocking again: no owner is unblocked
    assert _queued(gc) == [v1.key]


def test_a_change_that_keeps_the_uid_and_owners_leaves_the_indexes_and_queues_only_a_deletion() -> None:
    gc = _collector()
    owner = _version("a", 2)
    gc.on_event(CMS, CachedEvent("ADDED", owner, None))
    v1 = _version("d", 3, ("uid-a",))
    gc.on_event(CMS, CachedEvent("ADDED", v1, None))
    assert _queued(gc) == [v1.key]
    index = (dict(gc.uid_to_key), {k: set(v) for k, v in gc.dependents.items()})
    v2 = _version("d", 4, ("uid-a",))  # equal references, a list of its own (as a decoded write has)
    v2.obj["metadata"]["labels"] = {"x": "y"}
    gc.on_event(CMS, CachedEvent("MODIFIED", v2, v1))
    assert (gc.uid_to_key, gc.dependents) == index and _queued(gc) == []
    v3 = _version("d", 5, ("uid-a",))
    v3.obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    gc.on_event(CMS, CachedEvent("MODIFIED", v3, v2))
    assert (gc.uid_to_key, gc.dependents) == index and _queued(gc) == [v1.key]
