"""kinformer.meta: the one key function and the metadata accessors, generic and fast paths alike."""

from __future__ import annotations

import pytest

from kinformer.cache.tombstone import DeletedFinalStateUnknown
from kinformer.client.objects import LazyObject
from kinformer.meta import (
    fast_getters,
    kind_of,
    meta_namespace_key,
    namespace_of,
    object_key,
    resource_version_of,
    split_meta_namespace_key,
)


def test_object_key_spells_namespaced_and_cluster_scoped_keys() -> None:
    assert object_key("default", "web") == "default/web"
    assert object_key("", "node-1") == object_key(None, "node-1") == "node-1"
    assert split_meta_namespace_key(object_key("ns", "a")) == ("ns", "a")


@pytest.mark.parametrize("obj", [
    {"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "7"}},
    LazyObject.from_json(b'{"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "7"}}'),
])
def test_accessors_agree_on_dicts_and_lazy_objects(obj) -> None:
    assert (meta_namespace_key(obj), namespace_of(obj), resource_version_of(obj)) == ("ns/a", "ns", "7")


@pytest.mark.parametrize("raw", [b'{"kind": "Status", "metadata": {}}', b'{"metadata": {"name": "x"}}',
                                 b'{"kind": 5}', b'{"metadata": {}, "kind": "Pod", "spec": {}}'])
def test_kind_of_agrees_with_get_on_dicts_and_lazy_objects(raw: bytes) -> None:
    import orjson

    plain = orjson.loads(raw)
    assert kind_of(plain) == kind_of(LazyObject.from_json(raw)) == plain.get("kind")


def test_cluster_scoped_and_missing_fields() -> None:
    obj = {"metadata": {"name": "n"}}
    assert (meta_namespace_key(obj), namespace_of(obj), resource_version_of(obj)) == ("n", "", "")


def test_explicit_keys_and_tombstones() -> None:
    assert meta_namespace_key("ns/x") == "ns/x"
    assert meta_namespace_key(DeletedFinalStateUnknown("ns/gone", None)) == "ns/gone"


@pytest.mark.parametrize("bad", [{"metadata": {}}, {"metadata": {"name": ""}}, {"metadata": {"name": 3}}, 42])
def test_objects_without_a_name_have_no_key(bad) -> None:
    with pytest.raises(ValueError):
        meta_namespace_key(bad)


def test_fast_getters_of_a_class_answer_as_the_accessors() -> None:
    lazy = LazyObject.from_json(b'{"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "7"}}')
    key, namespace, rv = fast_getters(LazyObject)
    assert key is not None and namespace is not None and rv is not None
    assert (key(lazy), namespace(lazy), rv(lazy)) == (meta_namespace_key(lazy), namespace_of(lazy), "7")
    assert fast_getters(dict) == (None, None, None)
    assert fast_getters(DeletedFinalStateUnknown)[0] is not None
