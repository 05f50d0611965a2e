"""Listers over an Indexer: namespace and label filtering, NotFound like the API server's."""

from __future__ import annotations

from typing import Any

import pytest

from kinformer.cache import Indexer, Lister
from kinformer.errors import NotFound, SelectorError
from kinformer.selectors import parse_label_selector


def obj(name: str, namespace: str | None = "default", **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"metadata": meta}


def names(objs: list[Any]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)


@pytest.fixture
def indexer() -> Indexer:
    store = Indexer()
    store.add(obj("web-1", app="web", tier="fe"))
    store.add(obj("web-2", "prod", app="web"))
    store.add(obj("db", app="db"))
    store.add({"metadata": {"name": "nolabels", "namespace": "prod"}})
    return store


def test_list_all_and_by_namespace(indexer: Indexer) -> None:
    lister = Lister(indexer)
    assert names(lister.list()) == ["db", "nolabels", "web-1", "web-2"]
    assert names(lister.list(namespace="")) == ["db", "nolabels", "web-1", "web-2"]
    assert names(lister.list(namespace="prod")) == ["nolabels", "web-2"]
    assert lister.list(namespace="absent") == []


def test_list_with_label_selector(indexer: Indexer) -> None:
    lister = Lister(indexer)
    assert names(lister.list(label_selector="app=web")) == ["web-1", "web-2"]
    assert names(lister.list(namespace="default", label_selector="app=web")) == ["web-1"]
    assert names(lister.list(label_selector=parse_label_selector("!app"))) == ["nolabels"]
    assert names(lister.list(label_selector="app notin (web),tier!=x")) == ["db", "nolabels"]
    assert names(lister.list(label_selector="")) == ["db", "nolabels", "web-1", "web-2"]
    with pytest.raises(SelectorError):
        lister.list(label_selector="app in (")


def test_get_namespaced(indexer: Indexer) -> None:
    lister = Lister(indexer, resource="configmap")
    assert lister.get("web-2", "prod")["metadata"]["namespace"] == "prod"
    assert lister.get("web-2", namespace="prod") is lister.namespaced("prod").get("web-2")
    with pytest.raises(NotFound) as info:
        lister.get("missing", "default")
    err = info.value
    assert err.message == 'configmap "missing" not found'
    assert err.code == 404 and err.reason == "NotFound"
    assert err.details == {"name": "missing", "kind": "configmap"}
    with pytest.raises(TypeError, match="namespaced lister"):
        lister.get("web-1")


def test_get_cluster_scoped() -> None:
    store = Indexer()
    store.add(obj("node-1", None, role="worker"))
    lister = Lister(store, namespaced=False, resource="node")
    assert lister.get("node-1")["metadata"]["name"] == "node-1"
    assert lister.get("node-1", None)["metadata"]["name"] == "node-1"
    assert lister.get("node-1", "")["metadata"]["name"] == "node-1"
    assert names(lister.list(label_selector="role=worker")) == ["node-1"]
    with pytest.raises(NotFound, match='node "node-2" not found'):
        lister.get("node-2")


def test_not_found_without_resource_name() -> None:
    with pytest.raises(NotFound) as info:
        Lister(Indexer(), namespaced=False).get("x")
    assert info.value.message == '"x" not found'


def test_namespace_lister(indexer: Indexer) -> None:
    prod = Lister(indexer, resource="pod").namespaced("prod")
    assert prod.namespace == "prod"
    assert names(prod.list()) == ["nolabels", "web-2"]
    assert names(prod.list(label_selector="app=web")) == ["web-2"]
    assert prod.get("web-2")["metadata"]["name"] == "web-2"
    with pytest.raises(NotFound, match='pod "web-1" not found'):
        prod.get("web-1")  # exists, but in another namespace


def test_lister_sees_live_updates(indexer: Indexer) -> None:
    lister = Lister(indexer)
    indexer.update(obj("db", app="web"))
    assert names(lister.list(label_selector="app=web")) == ["db", "web-1", "web-2"]
    indexer.delete(obj("web-1"))
    assert names(lister.namespaced("default").list(label_selector="app=web")) == ["db"]
