"""Indexer: the keyed store with secondary indices (client-go threadSafeMap semantics)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinformer.cache import (
    NAMESPACE_INDEX,
    DeletedFinalStateUnknown,
    Indexer,
    Store,
    meta_namespace_index_func,
    meta_namespace_key,
    split_meta_namespace_key,
)
from kinformer.meta import register_fast_metadata


def obj(name: str, namespace: str | None = "default", rv: str = "1", **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": rv, "labels": labels}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"metadata": meta}


def by_app(o: Any) -> list[str]:
    return [o["metadata"]["labels"].get("app", "")]


def by_labels(o: Any) -> list[str]:
    """Multi-valued: one entry per label key."""
    return sorted(o["metadata"]["labels"])


# ------------------------------------------------------------------------------------------ keys


def test_meta_namespace_key() -> None:
    assert meta_namespace_key(obj("a")) == "default/a"
    assert meta_namespace_key(obj("node1", namespace=None)) == "node1"
    assert meta_namespace_key(obj("node1", namespace="")) == "node1"
    assert meta_namespace_key(DeletedFinalStateUnknown("ns/x", None)) == "ns/x"
    assert meta_namespace_key("explicit/key") == "explicit/key"
    with pytest.raises(ValueError, match=r"metadata\.name"):
        meta_namespace_key({"metadata": {}})
    with pytest.raises(ValueError, match="no metadata"):
        meta_namespace_key(42)


def test_split_meta_namespace_key() -> None:
    assert split_meta_namespace_key("ns/name") == ("ns", "name")
    assert split_meta_namespace_key("name") == ("", "name")
    with pytest.raises(ValueError, match="unexpected key format"):
        split_meta_namespace_key("a/b/c")


def test_meta_namespace_index_func() -> None:
    assert meta_namespace_index_func(obj("a", "ns1")) == ["ns1"]
    assert meta_namespace_index_func(obj("a", None)) == [""]


# ------------------------------------------------------------------------------------------ store


def test_crud_and_reads() -> None:
    store = Indexer()
    a, b = obj("a"), obj("b", "other")
    assert store.add(a) is None
    store.add(b)
    assert len(store) == 2
    assert "default/a" in store and "default/zz" not in store
    assert store.get(obj("a", rv="9")) is a
    assert store.get_by_key("other/b") is b
    assert sorted(store.list_keys()) == ["default/a", "other/b"]
    assert {id(o) for o in store.list()} == {id(a), id(b)}
    a2 = obj("a", rv="2")
    assert store.update(a2) is a
    assert store.get_by_key("default/a") is a2
    assert store.delete(a2) is a2
    assert store.delete(a2) is None
    assert store.get_by_key("default/a") is None
    assert len(store) == 1
    store.resync()  # a no-op for a plain store
    assert Store is Indexer


def test_delete_accepts_tombstone_and_delete_key() -> None:
    store = Indexer(indexers={"app": by_app})
    store.add(obj("a", app="web"))
    store.add(obj("b", app="web"))
    store.delete(DeletedFinalStateUnknown("default/a", None))
    assert store.list_keys() == ["default/b"]
    assert store.index_keys("app", "web") == ["default/b"]
    assert store.delete_key("default/b") is not None
    assert store.delete_key("default/b") is None
    assert store.list_index_func_values("app") == []


def test_namespace_index_always_present() -> None:
    store = Indexer()
    store.add(obj("a", "ns1"))
    store.add(obj("b", "ns1"))
    store.add(obj("c", "ns2"))
    store.add(obj("n", None))
    assert NAMESPACE_INDEX in store.get_indexers()
    assert sorted(o["metadata"]["name"] for o in store.by_index(NAMESPACE_INDEX, "ns1")) == ["a", "b"]
    assert [o["metadata"]["name"] for o in store.by_index(NAMESPACE_INDEX, "")] == ["n"]
    assert sorted(store.list_index_func_values(NAMESPACE_INDEX)) == ["", "ns1", "ns2"]


def test_index_follows_changed_values_and_drops_empty_sets() -> None:
    store = Indexer(indexers={"app": by_app})
    store.add(obj("a", app="web"))
    store.add(obj("b", app="web"))
    assert sorted(store.index_keys("app", "web")) == ["default/a", "default/b"]
    store.update(obj("a", app="db"))
    assert store.index_keys("app", "web") == ["default/b"]
    assert store.index_keys("app", "db") == ["default/a"]
    store.update(obj("b", app="db"))
    assert store.index_keys("app", "web") == []
    assert store.list_index_func_values("app") == ["db"]  # no empty "web" entry left behind
    store.delete(obj("a"))
    store.delete(obj("b"))
    assert store.list_index_func_values("app") == []
    assert store.list_index_func_values(NAMESPACE_INDEX) == []


def test_single_index_store_follows_values_beyond_the_shared_tuples() -> None:
    # a store with one index function shares one tuple per value for the first few thousand distinct values
    # and keeps fresh ones beyond; either way an update moves the key and a delete leaves no empty entry
    def label_pairs(o: Any) -> list[str]:
        return sorted(f"{k}={v}" for k, v in o["metadata"]["labels"].items())

    store = Indexer(indexers={NAMESPACE_INDEX: label_pairs})
    count = 5000
    for i in range(count):
        store.add(obj(f"p{i}", app=f"a{i}", tier="web"))
    for i in range(count):
        store.update(obj(f"p{i}", app=f"b{i}", tier="web"))
    assert store.index_keys(NAMESPACE_INDEX, "app=a0") == []
    assert store.index_keys(NAMESPACE_INDEX, f"app=b{count - 1}") == [f"default/p{count - 1}"]
    assert len(store.index_keys(NAMESPACE_INDEX, "tier=web")) == count
    for i in range(count):
        store.delete(obj(f"p{i}"))
    assert store.list_index_func_values(NAMESPACE_INDEX) == []


def test_multi_valued_index_and_index_query() -> None:
    store = Indexer(indexers={"labels": by_labels})
    store.add(obj("a", x="1", y="1"))
    store.add(obj("b", y="1"))
    store.add(obj("c", z="1"))
    assert sorted(store.index_keys("labels", "y")) == ["default/a", "default/b"]
    # objects sharing any of the probe's values
    assert sorted(o["metadata"]["name"] for o in store.index("labels", obj("p", x="", z=""))) == ["a", "c"]
    assert sorted(o["metadata"]["name"] for o in store.index("labels", obj("p", y=""))) == ["a", "b"]
    assert store.index("labels", obj("p")) == []
    store.update(obj("a", z="1"))
    assert sorted(store.index_keys("labels", "z")) == ["default/a", "default/c"]
    assert store.index_keys("labels", "x") == []
    assert sorted(store.list_index_func_values("labels")) == ["y", "z"]


def test_unknown_index_raises_key_error() -> None:
    store = Indexer()
    for call in (lambda: store.by_index("nope", "v"), lambda: store.index_keys("nope", "v"),
                 lambda: store.index("nope", obj("a")), lambda: store.list_index_func_values("nope")):
        with pytest.raises(KeyError, match="index with name 'nope' does not exist"):
            call()


def test_add_indexers_after_items_exist() -> None:
    store = Indexer()
    store.add(obj("a", app="web"))
    store.add(obj("b", app="db"))
    store.add_indexers({"app": by_app, "labels": by_labels})
    assert store.index_keys("app", "web") == ["default/a"]
    assert sorted(store.index_keys("labels", "app")) == ["default/a", "default/b"]
    store.update(obj("a", app="db"))
    assert sorted(store.index_keys("app", "db")) == ["default/a", "default/b"]
    with pytest.raises(ValueError, match="indexer conflict: \\['app'\\]"):
        store.add_indexers({"app": by_app, "other": by_app})
    assert "other" not in store.get_indexers()


def test_replace_rebuilds_items_and_indices() -> None:
    store = Indexer(indexers={"app": by_app})
    store.add(obj("old", app="web"))
    store.replace([obj("a", app="db"), obj("b", "ns2", app="web"), obj("a", rv="2", app="db")], "10")
    assert sorted(store.list_keys()) == ["default/a", "ns2/b"]
    assert store.get_by_key("default/a")["metadata"]["resourceVersion"] == "2"
    assert store.index_keys("app", "web") == ["ns2/b"]
    assert sorted(store.list_index_func_values(NAMESPACE_INDEX)) == ["default", "ns2"]
    store.update(obj("a", app="web"))
    assert sorted(store.index_keys("app", "web")) == ["default/a", "ns2/b"]


def picky(o: Any) -> list[str]:
    if o["metadata"]["labels"].get("bad"):
        raise RuntimeError("cannot index")
    return ["ok"]


def test_raising_index_func_leaves_store_unchanged() -> None:
    store = Indexer(indexers={"picky": picky})
    good = obj("a")
    store.add(good)
    with pytest.raises(RuntimeError):
        store.update(obj("a", bad="1"))
    assert store.get_by_key("default/a") is good
    assert store.index_keys("picky", "ok") == ["default/a"]


def test_changes_applied_under_the_store_lock_in_one_go() -> None:
    store = Indexer(indexers={"picky": picky})
    a, b = obj("a"), obj("b")
    store.add(a)
    with store.lock:  # the lock add/delete take: held, a reader's compound read waits for the whole batch
        assert store.add_locked(b) is None
        with pytest.raises(RuntimeError):
            store.add_locked(obj("a", bad="1"))  # leaves the store as it was
        with pytest.raises(ValueError):
            store.add_locked({"metadata": {"namespace": "default"}})  # no key
        assert store.delete_locked(DeletedFinalStateUnknown("default/a", None)) is a
        assert store.delete_locked(obj("gone")) is None
        assert store.add_locked(obj("b", rv="2")) is b
    assert not store.lock.locked() and store.list_keys() == ["default/b"]
    assert store.index_keys("picky", "ok") == ["default/b"]
    assert store.get_by_key("default/b")["metadata"]["resourceVersion"] == "2"


class Fast(dict):  # type: ignore[type-arg]
    """A dict whose class registered fast getters that answer only when it carries ``fast``."""


register_fast_metadata(Fast, key=lambda o: o.get("fast", {}).get("key"),
                       namespace=lambda o: o.get("fast", {}).get("ns"))


def test_objects_with_fast_getters_are_stored_as_the_generic_path_would_store_them() -> None:
    store = Indexer()
    fast = Fast(obj("a", "ns1"), fast={"key": "ns1/a", "ns": "ns1"})
    slow = Fast(obj("b", "ns2"))  # its getters answer None: the generic path
    plain = obj("c", "ns1")
    for o in (fast, slow, plain, Fast(obj("d", None), fast={"key": "d", "ns": ""})):
        store.add(o)
    assert sorted(store.list_keys()) == ["d", "ns1/a", "ns1/c", "ns2/b"]
    assert sorted(store.index_keys(NAMESPACE_INDEX, "ns1")) == ["ns1/a", "ns1/c"]
    assert store.index_keys(NAMESPACE_INDEX, "ns2") == ["ns2/b"] and store.index_keys(NAMESPACE_INDEX, "") == ["d"]
    store.add_indexers({"app": by_app})  # more than the namespace index: the fast namespace is not used alone
    store.add(Fast(obj("a", "ns1", app="web"), fast={"key": "ns1/a", "ns": "ns1"}))
    assert store.index_keys("app", "web") == ["ns1/a"] and len(store) == 4

    keyed_by_uid = Indexer(key_func=lambda o: o["metadata"]["uid"])  # another key function: no fast key
    keyed_by_uid.add(Fast({"metadata": {"name": "a", "uid": "u1"}}, fast={"key": "x/a", "ns": ""}))
    assert keyed_by_uid.list_keys() == ["u1"]


def test_custom_key_func() -> None:
    store = Indexer(key_func=lambda o: o["metadata"]["uid"])
    store.add({"metadata": {"name": "a", "uid": "u1"}})
    assert store.get_by_key("u1")["metadata"]["name"] == "a"
    store.delete(DeletedFinalStateUnknown("u1", None))
    assert len(store) == 0


# ------------------------------------------------------------------------------ concurrency


async def test_thread_reads_while_loop_writes() -> None:
    """A reader thread always sees consistent index answers while the event loop mutates the store."""
    store = Indexer(indexers={"app": by_app})
    apps = ["a", "b", "c"]
    stop = threading.Event()
    problems: list[str] = []
    reads = 0

    def reader() -> None:
        nonlocal reads
        while not stop.is_set():
            for app in apps:
                for o in store.by_index("app", app):
                    if o["metadata"]["labels"]["app"] != app:
                        problems.append(f"{o['metadata']['name']} indexed under {app}")
            keys = store.list_keys()
            objs = store.list()
            if len(keys) > 200 or len(objs) > 200:
                problems.append("more objects than ever written")
            store.list_index_func_values("app")
            reads += 1

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 5.0
        i = 0
        while (i < 20_000 or reads < 20) and time.monotonic() < deadline:
            name = f"o{i % 200}"
            if i % 7 == 0:
                store.delete(obj(name))
            else:
                store.update(obj(name, app=apps[i % 3], rv=str(i)))
            if i % 1000 == 0:
                store.replace([obj(f"o{j}", app=apps[j % 3]) for j in range(0, 200, 2)], str(i))
                await asyncio.sleep(0)
            i += 1
    finally:
        stop.set()
        thread.join(timeout=5)
    assert not thread.is_alive()
    assert problems == []
    assert reads > 0
    assert_consistent(store, {"app": by_app})


# ------------------------------------------------------------------------------ hypothesis


def brute_force_indices(store: Indexer, indexers: dict[str, Any]) -> dict[str, dict[str, set[str]]]:
    expected: dict[str, dict[str, set[str]]] = {}
    for name, func in indexers.items():
        index: dict[str, set[str]] = {}
        for key in store.list_keys():
            for v in func(store.get_by_key(key)):
                index.setdefault(v, set()).add(key)
        expected[name] = index
    return expected


def assert_consistent(store: Indexer, indexers: dict[str, Any]) -> None:
    expected = brute_force_indices(store, {NAMESPACE_INDEX: meta_namespace_index_func, **indexers})
    for name, index in expected.items():
        assert sorted(store.list_index_func_values(name)) == sorted(index)
        for value, keys in index.items():
            assert sorted(store.index_keys(name, value)) == sorted(keys)
            assert sorted(meta_namespace_key(o) for o in store.by_index(name, value)) == sorted(keys)


names = st.sampled_from(["a", "b", "c", "d"])
namespaces = st.sampled_from(["ns1", "ns2", None])
label_sets = st.dictionaries(st.sampled_from(["app", "tier", "x"]), st.sampled_from(["1", "2"]), max_size=3)
objects = st.builds(lambda n, ns, labels: obj(n, ns, **labels), names, namespaces, label_sets)
operations = st.one_of(
    st.tuples(st.just("update"), objects),
    st.tuples(st.just("delete"), objects),
    st.tuples(st.just("replace"), st.lists(objects, max_size=4)),
    st.tuples(st.just("add_indexer"), st.just(None)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(operations, max_size=25))
def test_random_operations_keep_indices_consistent(ops: list[tuple[str, Any]]) -> None:
    indexers: dict[str, Any] = {"app": by_app}
    store = Indexer(indexers=indexers)
    model: dict[str, Any] = {}
    for op, arg in ops:
        if op == "update":
            store.update(arg)
            model[meta_namespace_key(arg)] = arg
        elif op == "delete":
            store.delete(arg)
            model.pop(meta_namespace_key(arg), None)
        elif op == "replace":
            store.replace(arg)
            model = {meta_namespace_key(o): o for o in arg}
        elif "labels" not in indexers:
            store.add_indexers({"labels": by_labels})
            indexers["labels"] = by_labels
        assert {k: store.get_by_key(k) for k in store.list_keys()} == model
        assert_consistent(store, indexers)


def test_index_funcs_may_return_any_iterable_or_a_single_string() -> None:
    store = Indexer(indexers={
        "gen": lambda o: (v for v in o["metadata"]["labels"].values()),
        "set": lambda o: set(o["metadata"]["labels"]),
        "str": lambda o: o["metadata"]["labels"].get("app", "none"),
    })
    store.add(obj("a", app="web", tier="fe"))
    store.update(obj("a", app="db", tier="fe"))
    assert store.index_keys("gen", "db") == ["default/a"] and store.index_keys("gen", "web") == []
    assert sorted(store.list_index_func_values("set")) == ["app", "tier"]
    assert store.list_index_func_values("str") == ["db"]
    store.delete(obj("a"))
    for name in ("gen", "set", "str"):
        assert store.list_index_func_values(name) == []


def test_index_with_an_index_function_returning_a_string() -> None:
    idx = Indexer(indexers={"by_app": lambda o: o["metadata"]["labels"]["app"]})
    web = {"metadata": {"name": "w", "namespace": "default", "labels": {"app": "web"}}}
    other = {"metadata": {"name": "e", "namespace": "default", "labels": {"app": "e"}}}
    idx.add(web)
    idx.add(other)
    assert [o["metadata"]["name"] for o in idx.by_index("by_app", "web")] == ["w"]
    assert [o["metadata"]["name"] for o in idx.index("by_app", web)] == ["w"]
