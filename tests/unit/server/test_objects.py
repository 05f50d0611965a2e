"""ObjectStore.guaranteed_update: the one read-mutate-compare-and-swap loop every write verb shares."""

from __future__ import annotations

from typing import Any

import pytest

from kinformer.server.machinery import status as st
from kinformer.server.registry.objects import DELETE, MAX_RETRIES, ObjectStore, encode
from kinformer.server.registry.resources import Registry
from kinformer.server.storage.memory import MemoryStorage
from kinformer.server.storage.watchcache import Bucket, decode


class StaleCache:
    """A watch cache that holds whatever the test put in it (it never follows storage)."""

    def __init__(self) -> None:
        self.buckets: dict[str, Bucket] = {}

    def hold(self, prefix: str, key: str, value: bytes, rev: int) -> None:
        bucket = self.buckets.setdefault(prefix, Bucket(prefix, 10, 0))
        bucket.objects[key] = decode(key, value, rev)


@pytest.fixture
async def env() -> Any:
    storage = MemoryStorage()
    await storage.start()
    registry = Registry()
    info = registry.get("", "v1", "configmaps")
    cache = StaleCache()
    store = ObjectStore(storage, registry, cache=cache)  # type: ignore[arg-type]
    obj = store.prepare_create(info, "default", {"metadata": {"name": "a"}, "data": {"n": "0"}})
    key = ObjectStore.key(info, "default", "a")
    kv = await storage.create(key, encode(obj))
    yield store, info, storage, cache, key, kv
    await storage.close()


def bump(obj: dict[str, Any] | None) -> dict[str, Any]:
    assert obj is not None
    obj["data"]["n"] = str(int(obj["data"]["n"]) + 1)
    return obj


async def test_lost_compare_and_swap_retries_on_the_state_storage_reported(env):
    store, info, storage, _, key, _ = env
    seen: list[str] = []

    async def racing(obj: dict[str, Any] | None) -> dict[str, Any]:
        assert obj is not None
        seen.append(obj["data"]["n"])
        if len(seen) == 1:  # another writer wins between our read and our write
            cur = await storage.get(key)
            await storage.update(key, cur.value.replace(b'"n":"0"', b'"n":"10"'), cur.mod_revision)
        return bump(obj)

    out, outcome = await store.guaranteed_update(info, "default", "a", racing)
    assert outcome == "updated" and out["data"]["n"] == "11" and seen == ["0", "10"]


async def test_a_refusal_judged_on_a_stale_cached_copy_is_judged_again_on_storage(env):
    store, info, storage, cache, key, kv = env
    cache.hold(info.storage_prefix, key, kv.value, kv.mod_revision)
    await storage.update(key, kv.value.replace(b'"n":"0"', b'"n":"5"'), kv.mod_revision)

    def only_from_five(obj: dict[str, Any] | None) -> dict[str, Any]:
        assert obj is not None
        if obj["data"]["n"] != "5":
            raise st.conflict(info, "a")
        return bump(obj)

    out, _ = await store.guaranteed_update(info, "default", "a", only_from_five)
    assert out["data"]["n"] == "6"


async def test_a_no_op_judged_on_a_cached_copy_is_confirmed_on_storage(env):
    store, info, storage, cache, key, kv = env
    cache.hold(info.storage_prefix, key, kv.value, kv.mod_revision)
    new = await storage.update(key, kv.value.replace(b'"n":"0"', b'"n":"5"'), kv.mod_revision)
    out, outcome = await store.guaranteed_update(info, "default", "a", lambda obj: None)
    assert outcome == "unchanged" and out["data"]["n"] == "5"
    assert out["metadata"]["resourceVersion"] == str(new.mod_revision)


async def test_an_update_that_changes_nothing_on_a_cached_copy_is_not_written(env):
    store, info, storage, cache, key, kv = env
    cache.hold(info.storage_prefix, key, kv.value, kv.mod_revision)
    out, outcome = await store.guaranteed_update(info, "default", "a", lambda obj: obj)
    assert outcome == "updated" and out["metadata"]["resourceVersion"] == str(kv.mod_revision)
    assert await storage.current_revision() == kv.mod_revision
    out, outcome = await store.guaranteed_update(info, "default", "a", bump)
    assert out["metadata"]["resourceVersion"] == str(await storage.current_revision()) != str(kv.mod_revision)


async def test_precondition_and_bounded_retries_answer_409(env):
    store, info, storage, _, key, kv = env
    with pytest.raises(st.StatusError) as e:
        await store.guaranteed_update(info, "default", "a", bump, precondition_rv=kv.mod_revision + 7)
    assert e.value.code == 409
    calls = 0

    async def always_loses(obj: dict[str, Any] | None) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        cur = await storage.get(key)
        await storage.update(key, cur.value, cur.mod_revision)
        return bump(obj)

    with pytest.raises(st.StatusError) as e:
        await store.guaranteed_update(info, "default", "a", always_loses)
    assert e.value.code == 409 and calls == MAX_RETRIES


async def test_missing_object_is_404_unless_creation_is_allowed(env):
    store, info, _, _, _, _ = env
    with pytest.raises(st.StatusError) as e:
        await store.guaranteed_update(info, "default", "b", bump)
    assert e.value.code == 404

    def create(obj: dict[str, Any] | None) -> dict[str, Any]:
        assert obj is None
        return store.prepare_create(info, "default", {"metadata": {"name": "b"}})

    store.check_namespace = _namespace_exists  # type: ignore[method-assign]
    out, outcome = await store.guaranteed_update(info, "default", "b", create, allow_create=True)
    assert outcome == "created" and out["metadata"]["resourceVersion"]


async def test_delete_removes_the_key_at_the_revision_read(env):
    store, info, storage, _, key, _ = env
    out, outcome = await store.guaranteed_update(info, "default", "a", lambda obj: DELETE)
    assert outcome == "deleted" and await storage.get(key) is None
    assert int(out["metadata"]["resourceVersion"]) == await storage.current_revision()


async def _namespace_exists(namespace: str) -> None:
    return None


async def test_a_served_create_hands_its_object_and_bytes_to_the_watch_cache_unchanged() -> None:
    from kinformer.server.storage.watchcache import WatchCache

    storage = MemoryStorage()
    await storage.start()
    cache = WatchCache(storage)
    await cache.start()
    registry = Registry()
    info = registry.get("", "v1", "pods")
    store = ObjectStore(storage, registry, cache=cache)
    try:
        ns = store.prepare_create(registry.get("", "v1", "namespaces"), "", {"metadata": {"name": "default"}})
        await store.create(registry.get("", "v1", "namespaces"), "", ns)
        pod = {"metadata": {"resourceVersion": "0", "name": "p", "labels": {"a": "b"}},
               "spec": {"containers": [{"name": "c", "image": "i"}]}}
        obj = store.prepare_create(info, "default", pod)
        seen: list[Any] = []
        cache.add_listener(lambda prefix, ev: seen.append(ev.cur.obj), [info.storage_prefix])
        created, raw = await store.create_served(info, "default", obj)
        await cache.sync()
        co = cache.buckets[info.storage_prefix].objects[ObjectStore.key(info, "default", "p")]
        kv = await storage.get(co.key)
        assert seen[0] is obj is created and co.raw is raw  # taken, not decoded again (the listeners read it)
        assert raw == decode(co.key, kv.value, kv.mod_revision).raw  # what decoding would have served
        assert b"resourceVersion" not in kv.value and not cache._offers
        cache.offer(co.key, co.rev, {}, b"{}")  # an offer for a revision already applied is declined
        assert not cache._offers

        def relabel(current: dict[str, Any] | None) -> dict[str, Any]:
            assert current is not None
            current["metadata"]["labels"] = {"a": "c"}
            return current

        raw, outcome = await store.guaranteed_update_served(info, "default", "p", relabel)
        await cache.sync()
        co = cache.buckets[info.storage_prefix].objects[co.key]
        kv = await storage.get(co.key)
        assert outcome == "updated" and co.raw is raw and co.obj["metadata"]["labels"] == {"a": "c"}
        assert raw == decode(co.key, kv.value, kv.mod_revision).raw and not cache._offers

        def bind(current: dict[str, Any] | None) -> dict[str, Any]:  # as a binding writes (answering a Status)
            assert current is not None
            current["spec"]["nodeName"] = "n"
            return current

        bound, outcome = await store.guaranteed_update(info, "default", "p", bind, handover=True)
        await cache.sync()
        co = cache.buckets[info.storage_prefix].objects[co.key]
        kv = await storage.get(co.key)
        assert outcome == "updated" and seen[-1] is bound and bound["spec"]["nodeName"] == "n"  # taken, not decoded
        assert co.raw == decode(co.key, kv.value, kv.mod_revision).raw and not cache._offers
    finally:
        await cache.stop()
        await storage.close()


async def test_a_shared_update_gets_the_caches_object_and_leaves_it_as_it_was(env):
    """``shared``: the callback reads the cache's own object (no decoded copy) and returns a new one; the cached
    version is never changed, and a refusal judged on it is judged again on a fresh read."""
    store, info, storage, cache, key, kv = env
    cache.hold(info.storage_prefix, key, kv.value, kv.mod_revision)
    co = cache.buckets[info.storage_prefix].objects[key]
    before = co.raw
    seen: list[dict[str, Any]] = []

    def relabel(current: dict[str, Any] | None) -> dict[str, Any]:
        assert current is not None
        seen.append(current)
        return {**current, "metadata": {**current["metadata"], "labels": {"a": "b"}}}

    out, outcome = await store.guaranteed_update(info, "default", "a", relabel, shared=True)
    assert outcome == "updated" and seen[0] is co.obj and out["metadata"]["labels"] == {"a": "b"}
    assert co.raw == before and encode(co.obj) == kv.value  # the cache's version as it was
    stored = await storage.get(key)
    assert stored.value == encode(out) and out["metadata"]["resourceVersion"] == str(stored.mod_revision)

    def refuse_cached(current: dict[str, Any] | None) -> dict[str, Any]:
        assert current is not None
        seen.append(current)
        if current is co.obj:  # the stale cached version is refused: the store reads storage and asks again
            raise st.conflict(info, "a")
        return {**current, "data": {"n": "9"}}

    out, outcome = await store.guaranteed_update(info, "default", "a", refuse_cached, shared=True)
    assert outcome == "updated" and seen[-2] is co.obj and seen[-1] is not co.obj and out["data"] == {"n": "9"}


def _pod_write(store: ObjectStore, subresource: str, **changes: Any) -> None:
    """Validate a write of a stored pod (``changes`` on top of it) as the store validates one, ``subresource``."""
    info = store.registry.get("", "v1", "pods")
    old = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "namespace": "default", "uid": "u"},
           "spec": {"containers": [{"name": "c", "image": "x"}]}, "status": {"phase": "Pending"}}
    new = {**old, "metadata": dict(old["metadata"]), **changes}
    store.validate(info, new, old, subresource)


async def test_pod_status_update_does_not_validate_the_spec_it_keeps(env):
    # kube's podStatusStrategy.ValidateUpdate is ValidatePodStatusUpdate: metadata and status, never the spec
    store = env[0]
    _pod_write(store, "status", spec={"containers": []}, status={"phase": "Running"})
    with pytest.raises(st.StatusError) as e:
        _pod_write(store, "", spec={"containers": []})
    assert e.value.code == 422


async def test_pod_status_update_still_validates_metadata_and_status_types(env):
    store = env[0]
    for changes in ({"metadata": {"name": "p", "namespace": "default", "uid": "u", "labels": {"a b": "c"}}},
                    {"status": "Running"}):
        with pytest.raises(st.StatusError) as e:
            _pod_write(store, "status", **changes)
        assert e.value.code == 422, changes
