"""LazyObject: reads like the dict it was decoded from, decodes lazily, strips managedFields cheaply."""

from __future__ import annotations

import copy
import gc
import json
import pickle
from collections.abc import Mapping
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinformer.client.objects import (
    LazyObject,
    decode_list,
    decode_object,
    decode_without_managed_fields,
    encode,
    to_plain,
)
from kinformer.client.watch import decode_watch_line
from kinformer.meta import kind_of

FIXTURE = Path(__file__).resolve().parents[3] / "bench" / "pod-realistic.json"


@pytest.fixture
def pod() -> dict:
    return json.loads(FIXTURE.read_text())


def stripped(d: dict) -> dict:
    d = copy.deepcopy(d)
    d["metadata"].pop("managedFields", None)
    return d


def test_the_compact_copy_an_informer_caches_is_not_tracked_by_the_cyclic_collector(pod: dict) -> None:
    obj = decode_object(orjson.dumps(pod))
    copy_ = obj.without_managed_fields()
    assert gc.is_tracked(obj) and not gc.is_tracked(copy_)
    assert copy_ == stripped(pod) and copy_.to_dict() == stripped(pod)  # fully usable, decoded members too
    gc.collect()  # a collection does not trip over it (it references tracked dicts once decoded)
    assert copy_["metadata"]["name"] == pod["metadata"]["name"]


def test_reads_like_the_dict(pod: dict) -> None:
    obj = decode_object(orjson.dumps(pod))
    assert isinstance(obj, Mapping)
    assert obj == pod and pod == obj
    assert list(obj) == list(pod) and len(obj) == len(pod)
    assert obj["metadata"]["name"] == pod["metadata"]["name"]
    assert obj["spec"] == pod["spec"]
    assert obj.get("nope") is None and obj.get("nope", 3) == 3
    assert "spec" in obj and "nope" not in obj
    assert dict(obj.items()) == pod
    assert list(obj.keys()) == list(pod.keys())
    assert list(obj.values()) == list(pod.values())
    with pytest.raises(KeyError):
        obj["nope"]
    assert obj.name == pod["metadata"]["name"]
    assert obj.namespace == pod["metadata"]["namespace"]
    assert obj.resource_version == pod["metadata"]["resourceVersion"]
    assert obj.key == f"{obj.namespace}/{obj.name}"
    assert obj.name in repr(obj)


def test_kind_of_reads_only_the_head_of_an_undecoded_object(pod: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    from kinformer.client import objects

    decodes: list[object] = []
    loads = objects._loads
    monkeypatch.setattr(objects, "_loads", lambda raw: decodes.append(raw) or loads(raw))
    obj = decode_object(orjson.dumps(pod))
    assert kind_of(obj) == "Pod" and decodes == []  # the object is not decoded for it
    status = decode_object(b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success"}')
    assert kind_of(status) == "Status" and decodes == []
    assert kind_of(decode_object(b'{"metadata":{"name":"x"}}')) is None  # no kind: the generic path decides
    assert obj["spec"] and kind_of(obj) == "Pod"  # decoded: read from the decode
    assert kind_of(decode_object(b'{"kind":5}')) == 5  # a head that does not fit: as get("kind") says
    assert kind_of({"kind": "Foo"}) == "Foo" and kind_of({}) is None  # any other Mapping: its get


def test_get_answers_alike_before_and_after_the_decode(pod: dict) -> None:
    fresh, decoded = decode_object(orjson.dumps(pod)), decode_object(orjson.dumps(pod))
    assert decoded["spec"] == pod["spec"]  # decoded now: get reads the decode directly
    for obj in (fresh, decoded):
        assert obj.get("spec") == pod["spec"] and obj.get("metadata")["name"] == pod["metadata"]["name"]
        assert obj.get("nope") is None and obj.get("nope", 3) == 3
    assert decoded.get("spec") is decoded["spec"]


def test_members_are_decoded_once_and_cached(pod: dict) -> None:
    obj = decode_object(orjson.dumps(pod))
    assert obj["spec"] is obj["spec"]
    assert obj["metadata"] is obj["metadata"]


def test_to_dict_is_a_fresh_deep_copy(pod: dict) -> None:
    obj = decode_object(orjson.dumps(pod))
    d = obj.to_dict()
    assert type(d) is dict and d == pod
    d["metadata"]["labels"] = {"changed": "yes"}
    d["spec"]["x"] = 1
    assert obj == pod
    assert obj.to_dict() is not obj.to_dict()


def test_without_managed_fields(pod: dict) -> None:
    obj = decode_object(orjson.dumps(pod))
    assert obj.has_managed_fields == ("managedFields" in pod["metadata"])
    _ = obj["spec"]  # a decoded member survives stripping
    s = obj.without_managed_fields()
    assert s == stripped(pod)
    assert "managedFields" not in s["metadata"]
    assert not s.has_managed_fields
    assert s.without_managed_fields() is s
    assert orjson.loads(s.to_json()) == stripped(pod)
    assert s.to_dict() == stripped(pod)
    # the original is untouched
    assert obj == pod


def test_unknown_metadata_fields_fall_back_to_plain_dict(pod: dict) -> None:
    pod["metadata"]["futureField"] = {"x": 1}
    pod["metadata"]["managedFields"] = [{"manager": "m"}]
    obj = decode_object(orjson.dumps(pod))
    assert obj == pod
    assert obj.name == pod["metadata"]["name"]
    s = obj.without_managed_fields()
    assert s == stripped(pod)
    assert s["metadata"]["futureField"] == {"x": 1}


def test_object_without_metadata() -> None:
    obj = decode_object(b'{"kind":"Status","code":404}')
    assert obj == {"kind": "Status", "code": 404}
    assert obj.key == "" and obj.name == ""
    assert obj.without_managed_fields() == obj


def test_null_and_cluster_scoped_metadata() -> None:
    body = {"kind": "Namespace", "apiVersion": "v1",
            "metadata": {"name": "ns1", "creationTimestamp": None, "labels": None}}
    obj = decode_object(orjson.dumps(body))
    assert obj == body
    assert obj.key == "ns1"


def test_pickle_copy_encode(pod: dict) -> None:
    obj = decode_object(orjson.dumps(pod)).without_managed_fields()
    assert pickle.loads(pickle.dumps(obj)) == stripped(pod)
    assert copy.copy(obj) is obj and copy.deepcopy(obj) is obj
    assert orjson.loads(encode(obj)) == stripped(pod)
    assert orjson.loads(encode({"items": [obj]})) == {"items": [stripped(pod)]}
    assert to_plain({"a": [obj]}) == {"a": [stripped(pod)]}
    assert type(to_plain(obj)) is dict
    assert not hasattr(obj, "__dict__")
    with pytest.raises(TypeError):
        hash(obj)


def test_decode_list_adds_kind_and_api_version(pod: dict) -> None:
    item = {k: v for k, v in pod.items() if k not in ("kind", "apiVersion")}
    body = {"kind": "PodList", "apiVersion": "v1",
            "metadata": {"resourceVersion": "42", "continue": "tok", "remainingItemCount": 3}, "items": [item, pod]}
    items, rv, cont, remaining = decode_list(orjson.dumps(body))
    assert (rv, cont, remaining) == ("42", "tok", 3)
    assert items[0]["kind"] == "Pod" and items[0]["apiVersion"] == "v1"
    assert items[0]["spec"] == pod["spec"]
    assert items[1] == pod
    items, rv, cont, remaining = decode_list(b'{"kind":"PodList","apiVersion":"v1","metadata":{},"items":null}')
    assert items == [] and rv == "" and cont is None and remaining is None


def test_decode_watch_line(pod: dict) -> None:
    ev = decode_watch_line(orjson.dumps({"type": "MODIFIED", "object": pod}))
    assert ev.type == "MODIFIED" and isinstance(ev.object, LazyObject) and ev.object == pod
    err = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired", "code": 410,
           "metadata": {}, "message": "too old resource version: 1 (100)"}
    ev = decode_watch_line(orjson.dumps({"type": "ERROR", "object": err}))
    assert ev.type == "ERROR" and type(ev.object) is dict and ev.object == err
    with pytest.raises(ValueError):
        decode_watch_line(b'{"type": "ADDED", "object": ')


def test_metadata_view_fast_fields_and_full_access(pod: dict) -> None:
    obj = decode_object(orjson.dumps(pod))
    meta = obj["metadata"]
    assert isinstance(meta, Mapping) and bool(meta)
    assert meta["name"] == pod["metadata"]["name"] and meta.get("namespace") == pod["metadata"]["namespace"]
    assert obj._md is None  # fast fields decode nothing
    assert meta.get("labels") == pod["metadata"].get("labels")
    assert dict(meta) == pod["metadata"] and len(meta) == len(pod["metadata"]) and "uid" in meta
    assert meta.get("nope", 1) == 1
    with pytest.raises(KeyError):
        meta["nope"]
    assert orjson.loads(encode({"m": meta})) == {"m": pod["metadata"]}
    ns = decode_object(b'{"kind":"Namespace","metadata":{"name":"n"}}')
    assert ns["metadata"].get("namespace") is None and ns.key == "n"
    with pytest.raises(KeyError):
        ns["metadata"]["namespace"]


def test_strip_fallbacks_are_exact(pod: dict) -> None:
    pod["metadata"]["managedFields"] = [{"manager": "m", "fieldsV1": {"f:data": {}}}]
    # pretty-printed JSON: managedFields cannot be cut out byte-wise, the object is re-encoded
    pretty = json.dumps(pod, indent=2).encode()
    assert decode_object(pretty).without_managed_fields() == stripped(pod)
    # the same member bytes twice (a nested "managedFields" in spec): never guess
    twin = copy.deepcopy(pod)
    twin["spec"] = {"managedFields": pod["metadata"]["managedFields"]}
    s = decode_object(orjson.dumps(twin)).without_managed_fields()
    assert s == stripped(twin) and s["spec"]["managedFields"] == pod["metadata"]["managedFields"]
    # managedFields first or only member of metadata
    for meta in ({"managedFields": [{"manager": "m"}], "name": "x"}, {"managedFields": [{"manager": "m"}]}):
        s = decode_object(orjson.dumps({"kind": "K", "metadata": meta})).without_managed_fields()
        assert s.to_dict() == {"kind": "K", "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    # odd metadata types fall back to plain decoding
    odd = decode_object(b'{"metadata":{"name":5,"managedFields":[]},"x":1}')
    assert odd["metadata"] == {"name": 5, "managedFields": []} and odd.name == ""
    assert odd.without_managed_fields() == {"metadata": {"name": 5}, "x": 1}


def test_list_items_without_kind_and_empty_items() -> None:
    body = b'{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":[{},' \
           b'{"metadata":{"name":"a"}}, {"kind":"Other","apiVersion":"x/v1","metadata":{"name":"b"}}]}'
    items, rv, _, _ = decode_list(body)
    assert rv == "9"
    assert items[0] == {"kind": "ConfigMap", "apiVersion": "v1"}
    assert items[1] == {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "a"}}
    assert items[2]["kind"] == "Other" and items[2].key == "b"
    assert all(type(i.to_json()) is bytes for i in items)


def test_managed_fields_key_repeated_with_the_same_value_is_never_cut_by_guess() -> None:
    # a nested "managedFields" member with the very same value before the metadata's, which ends the object:
    # the cut could hit either, so the object is stripped by decoding and the nested member stays
    body = {"kind": "X", "spec": {"managedFields": [1]}, "metadata": {"name": "a", "managedFields": [1]}}
    stripped_obj = decode_object(orjson.dumps(body)).without_managed_fields()
    assert stripped_obj == {"kind": "X", "spec": {"managedFields": [1]}, "metadata": {"name": "a"}}
    other = {"kind": "X", "spec": {"managedFields": [2]}, "metadata": {"name": "a", "managedFields": [1]}}
    assert decode_object(orjson.dumps(other)).without_managed_fields() == {
        "kind": "X", "spec": {"managedFields": [2]}, "metadata": {"name": "a"}}


# -- managedFields cut while decoding: the very object decode-then-strip makes ----------------------------------

def assert_same(cut: LazyObject, expected: LazyObject) -> None:
    """``cut`` is ``expected`` in every observable way: bytes, values, fast fields, no managedFields."""
    assert cut.to_json() == expected.to_json()
    assert cut == expected and cut.to_dict() == expected.to_dict()
    assert (cut.key, cut.name, cut.namespace, cut.resource_version) == (
        expected.key, expected.name, expected.namespace, expected.resource_version)
    assert (cut._key, cut._name, cut._ns, cut._rv) == (expected._key, expected._name, expected._ns, expected._rv)
    assert not cut.has_managed_fields and type(cut.to_json()) is bytes


def decoded_then_stripped(raw: bytes) -> LazyObject:
    return decode_object(raw).without_managed_fields()


MF = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:data": {".": {}, "f:k": {}}}}]
CUT_CASES = {
    "no managedFields": {"kind": "K", "metadata": {"name": "a", "namespace": "n"}, "data": {"x": "1"}},
    "managedFields first": {"kind": "K", "metadata": {"managedFields": MF, "name": "a", "namespace": "n"}},
    "managedFields last": {"kind": "K", "metadata": {"name": "a", "namespace": "n", "managedFields": MF}},
    "managedFields only": {"kind": "K", "metadata": {"managedFields": MF}},
    "empty list": {"kind": "K", "metadata": {"name": "a", "managedFields": []}},
    "metadata last": {"kind": "K", "spec": {"x": 1}, "metadata": {"name": "a", "managedFields": MF}},
    "the word in strings": {"kind": "K", "metadata": {
        "name": "a", "annotations": {"note": '"managedFields":[]', "managedFields": "x"}, "managedFields": MF},
        "data": {"managedFields": "managedFields"}},
    "escapes": {"kind": "K", "metadata": {"name": "a\u00e9\"", "managedFields": [
        {"manager": 'm\\"x\u2028', "fieldsV1": {'f:"managedFields":': {}}}]}},
    "nested key, other value": {"kind": "K", "spec": {"managedFields": [2]},
                                "metadata": {"name": "a", "managedFields": [1]}},
    "nested key, same value before": {"kind": "K", "spec": {"managedFields": [1]},
                                      "metadata": {"name": "a", "managedFields": [1]}},
    "nested key, same value after": {"kind": "K", "metadata": {"name": "a", "managedFields": [1]},
                                     "spec": {"managedFields": [1]}},
    "cluster-scoped": {"kind": "Node", "metadata": {"name": "n1", "resourceVersion": "5", "managedFields": MF}},
    "no metadata": {"kind": "K", "data": {"managedFields": MF}},
    "null metadata": {"kind": "K", "metadata": None},
    "odd metadata": {"metadata": {"name": 5, "managedFields": []}, "x": 1},
}


@pytest.mark.parametrize("case", sorted(CUT_CASES))
def test_decode_without_managed_fields_is_decode_then_strip(case: str) -> None:
    for raw in (orjson.dumps(CUT_CASES[case]), json.dumps(CUT_CASES[case], indent=1).encode()):
        cut = decode_without_managed_fields(raw)
        assert_same(cut, decoded_then_stripped(raw))
        assert "managedFields" not in (cut.get("metadata") or {})


def test_decode_without_managed_fields_on_the_realistic_pod(pod: dict) -> None:
    raw = orjson.dumps(pod)
    assert pod["metadata"]["managedFields"]
    cut = decode_without_managed_fields(raw)
    assert_same(cut, decoded_then_stripped(raw))
    assert cut == stripped(pod) and len(cut.to_json()) < len(raw)
    assert not gc.is_tracked(cut)  # as without_managed_fields's compact copy


def test_decode_without_managed_fields_of_bad_json_raises_as_decoding_does() -> None:
    with pytest.raises(ValueError):
        decode_object(b'{"metadata":')
    with pytest.raises(ValueError):
        decode_without_managed_fields(b'{"metadata":')


_json_scalars = st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.text(max_size=8) | st.sampled_from(
    ["managedFields", '"managedFields":', "\\", '"', "\u00e9"])
_json = st.recursive(_json_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(["managedFields", "name", "a", "f:managedFields"]), inner, max_size=3), max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(before=st.dictionaries(st.sampled_from(["name", "namespace", "labels", "annotations", "uid"]),
                              st.text(max_size=5) | st.dictionaries(st.text(max_size=4), st.text(max_size=4)),
                              max_size=3),
       managed=st.none() | _json, spec=_json, metadata_first=st.booleans(), pretty=st.booleans())
def test_decode_without_managed_fields_equals_decode_then_strip_on_any_object(
        before: dict, managed: object, spec: object, metadata_first: bool, pretty: bool) -> None:
    meta = dict(before)
    if managed is not None:
        meta["managedFields"] = managed
    body = {"metadata": meta, "spec": spec} if metadata_first else {"spec": spec, "metadata": meta}
    raw = json.dumps(body, indent=1).encode() if pretty else orjson.dumps(body)
    assert_same(decode_without_managed_fields(raw), decoded_then_stripped(raw))


def test_decode_list_can_drop_managed_fields_as_it_decodes(pod: dict) -> None:
    item = {k: v for k, v in pod.items() if k not in ("kind", "apiVersion")}
    odd = {"metadata": {"name": 5, "managedFields": []}}
    body = orjson.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "42"},
                         "items": [item, pod, odd, {"metadata": {"name": "b"}}]})
    items, rv, _, _ = decode_list(body)
    cut, cut_rv, _, _ = decode_list(body, drop_managed_fields=True)
    assert rv == cut_rv == "42" and len(cut) == len(items) == 4
    for got, whole in zip(cut, items, strict=True):
        assert_same(got, whole.without_managed_fields())
    assert cut[0]["kind"] == "Pod" and cut[0] == stripped(pod)
