"""JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch."""

from __future__ import annotations

import copy
import json
import random
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinformer.server.registry.patch import (
    PatchError,
    json_merge_patch,
    json_patch,
    list_strategy,
    strategic_merge_patch,
)
from testlib import Counted

_GROUPS = {"Deployment": "apps", "StatefulSet": "apps", "DaemonSet": "apps", "ReplicaSet": "apps"}


def _info(kind: str, *, builtin: bool = True, schema: dict[str, Any] | None = None) -> SimpleNamespace:
    group = _GROUPS.get(kind, "") if builtin else "example.com"
    return SimpleNamespace(group=group, version="v1", kind=kind, plural=kind.lower() + "s", singular=kind.lower(),
                           namespaced=True, short_names=[], categories=[], verbs=[], subresources=[],
                           schema=schema, builtin=builtin, selectable_fields=[])


DEPLOYMENT = _info("Deployment")
POD = _info("Pod")

# ------------------------------------------------------------------------------------------ RFC 7386

RFC7386_CASES = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("original", "patch", "expected"), RFC7386_CASES)
def test_rfc7386_examples(original: Any, patch: Any, expected: Any) -> None:
    before = copy.deepcopy(original)
    assert json_merge_patch(original, patch) == expected
    assert original == before


def test_merge_patch_result_shares_nothing_with_inputs() -> None:
    original = {"keep": {"deep": [1]}, "change": {"x": 1}}
    patch = {"change": {"y": [2]}}
    result = json_merge_patch(original, patch)
    result["keep"]["deep"].append(9)
    result["change"]["y"].append(9)
    assert original == {"keep": {"deep": [1]}, "change": {"x": 1}}
    assert patch == {"change": {"y": [2]}}


_json_scalars = st.one_of(st.booleans(), st.integers(-5, 5), st.text(max_size=3))
_json_values = st.recursive(_json_scalars, lambda children: st.one_of(
    st.lists(children, max_size=3), st.dictionaries(st.text(max_size=2), children, max_size=3)), max_leaves=8)
_json_objects = st.dictionaries(st.text(max_size=2), _json_values, max_size=4)


def _merge_diff(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    diff: dict[str, Any] = {key: None for key in a if key not in b}
    for key, value in b.items():
        if key in a and isinstance(a[key], dict) and isinstance(value, dict):
            sub = _merge_diff(a[key], value)
            if sub:
                diff[key] = sub
        elif key not in a or a[key] != value or type(a[key]) is not type(value):
            diff[key] = value
    return diff


@settings(max_examples=100, deadline=None)
@given(_json_objects, _json_objects)
def test_merge_patch_applies_generated_diff(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert json_merge_patch(a, _merge_diff(a, b)) == b


@settings(max_examples=50, deadline=None)
@given(_json_objects)
def test_merge_patch_empty_patch_is_identity(a: dict[str, Any]) -> None:
    assert json_merge_patch(a, {}) == a


# ------------------------------------------------------------------------------------------ RFC 6902

RFC6902_CASES = [
    ({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}], {"baz": "qux", "foo": "bar"}),
    ({"foo": ["bar", "baz"]}, [{"op": "add", "path": "/foo/1", "value": "qux"}], {"foo": ["bar", "qux", "baz"]}),
    ({"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}], {"foo": "bar"}),
    ({"foo": ["bar", "qux", "baz"]}, [{"op": "remove", "path": "/foo/1"}], {"foo": ["bar", "baz"]}),
    ({"baz": "qux", "foo": "bar"}, [{"op": "replace", "path": "/baz", "value": "boo"}], {"baz": "boo", "foo": "bar"}),
    ({"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
     [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
     {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}}),
    ({"foo": ["all", "grass", "cows", "eat"]}, [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
     {"foo": ["all", "cows", "eat", "grass"]}),
    ({"baz": "qux", "foo": ["a", 2, "c"]},
     [{"op": "test", "path": "/baz", "value": "qux"}, {"op": "test", "path": "/foo/1", "value": 2}],
     {"baz": "qux", "foo": ["a", 2, "c"]}),
    ({"foo": "bar"}, [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
     {"foo": "bar", "child": {"grandchild": {}}}),
    ({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}], {"foo": "bar", "baz": "qux"}),
    ({"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": 10}], {"/": 9, "~1": 10}),
    ({"foo": ["bar"]}, [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}], {"foo": ["bar", ["abc", "def"]]}),
    ({"a": {"b": 1}}, [{"op": "copy", "from": "/a", "path": "/c"}], {"a": {"b": 1}, "c": {"b": 1}}),
    ({"a/b": 1, "m~n": 2}, [{"op": "replace", "path": "/a~1b", "value": 3}, {"op": "remove", "path": "/m~0n"}],
     {"a/b": 3}),
    ({"a": 1}, [{"op": "replace", "path": "", "value": [1]}], [1]),
]


@pytest.mark.parametrize(("original", "ops", "expected"), RFC6902_CASES)
def test_rfc6902_examples(original: Any, ops: list[dict[str, Any]], expected: Any) -> None:
    before = copy.deepcopy(original)
    assert json_patch(original, ops) == expected
    assert original == before


@pytest.mark.parametrize(("original", "ops"), [
    ({"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}]),
    ({"foo": "bar"}, [{"op": "add", "path": "/baz/bat", "value": "qux"}]),
    ({"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": "10"}]),
    ({"a": [1]}, [{"op": "remove", "path": "/a/5"}]),
    ({"a": 1}, [{"op": "remove", "path": "/b"}]),
    ({"a": 1}, [{"op": "replace", "path": "/b", "value": 2}]),
    ({"a": True}, [{"op": "test", "path": "/a", "value": 1}]),
    ({"a": {"b": 1}}, [{"op": "move", "from": "/a", "path": "/a/b/c"}]),
    ({"a": [1, 2]}, [{"op": "remove", "path": "/a/01"}]),
    ({"a": [1, 2]}, [{"op": "remove", "path": "/a/\u00b2"}]),
    ({"a": [1, 2]}, [{"op": "add", "path": "/a/-1", "value": 0}]),
])
def test_rfc6902_failures_are_422(original: Any, ops: list[dict[str, Any]]) -> None:
    with pytest.raises(PatchError) as err:
        json_patch(original, ops)
    assert err.value.code == 422
    assert err.value.reason == "Invalid"


def test_failed_test_op_message_is_kube_like() -> None:
    obj = {"metadata": {"resourceVersion": "5"}}
    with pytest.raises(PatchError) as err:
        json_patch(obj, [{"op": "test", "path": "/metadata/resourceVersion", "value": "4"},
                         {"op": "replace", "path": "/metadata/resourceVersion", "value": "x"}])
    assert err.value.message == "the server rejected our request due to an error in our request"
    assert err.value.causes[0]["message"] == "testing value /metadata/resourceVersion failed: test failed"
    assert obj == {"metadata": {"resourceVersion": "5"}}


@pytest.mark.parametrize("ops", [
    {"op": "add"},
    [{"op": "frobnicate", "path": "/a"}],
    [{"op": "add", "value": 1}],
    [{"op": "add", "path": "a", "value": 1}],
    ["not-an-op"],
])
def test_malformed_json_patch_is_400(ops: Any) -> None:
    with pytest.raises(PatchError) as err:
        json_patch({"a": 1}, ops)
    assert err.value.code == 400


def test_json_patch_operation_limit() -> None:
    with pytest.raises(PatchError) as err:
        json_patch({}, [{"op": "test", "path": "", "value": {}}] * 10001)
    assert err.value.code == 413


@settings(max_examples=100, deadline=None)
@given(_json_objects, st.text(max_size=4), _json_values)
def test_json_patch_add_then_remove_restores(doc: dict[str, Any], key: str, value: Any) -> None:
    pointer = "/" + key.replace("~", "~0").replace("/", "~1")
    if key in doc:
        return
    added = json_patch(doc, [{"op": "add", "path": pointer, "value": value}])
    assert added[key] == value
    assert json_patch(added, [{"op": "remove", "path": pointer}]) == doc


# ------------------------------------------------------------------------------------- strategic merge


def _deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "finalizers": ["a", "b"], "labels": {"app": "web"},
                     "ownerReferences": [{"uid": "u1", "name": "o1", "kind": "X", "apiVersion": "v1"}]},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {"name": "app", "image": "app:1",
                         "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                         "ports": [{"containerPort": 80}]},
                        {"name": "sidecar", "image": "side:1"},
                    ],
                    "tolerations": [{"key": "k1", "operator": "Exists"}],
                    "volumes": [{"name": "v1", "emptyDir": {}}],
                },
            },
        },
    }


def _smp(patch: dict[str, Any], obj: dict[str, Any] | None = None, info: Any = DEPLOYMENT) -> dict[str, Any]:
    original = obj if obj is not None else _deployment()
    before = copy.deepcopy(original)
    result = strategic_merge_patch(original, patch, info)
    assert original == before, "the original must not be mutated"
    return result


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return obj["spec"]["template"]["spec"]["containers"]


def test_smp_merges_containers_by_name() -> None:
    result = _smp({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:2"},
                                                                 {"name": "new", "image": "n:1"}]}}}})
    # Like kube-apiserver: patch items keep the patch's order; server-only items keep their original slots
    # relative to items they preceded, and items new to the list go before them.
    assert [(c["name"], c["image"]) for c in _containers(result)] == [
        ("app", "app:2"), ("new", "n:1"), ("sidecar", "side:1")]
    assert _containers(result)[0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]


def test_smp_merges_env_by_name_and_null_deletes_keys() -> None:
    result = _smp({"spec": {"replicas": None, "template": {"spec": {"containers": [
        {"name": "app", "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}]}]}}}})
    assert "replicas" not in result["spec"]
    assert _containers(result)[0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "20"},
                                             {"name": "C", "value": "3"}]


def test_smp_delete_directive_removes_list_item() -> None:
    result = _smp({"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}}})
    assert [c["name"] for c in _containers(result)] == ["app"]


def test_smp_replace_directive_on_list_and_map() -> None:
    containers = [{"$patch": "replace"}, {"name": "only", "image": "o"}]
    result = _smp({"spec": {"template": {"spec": {"containers": containers}},
                            "selector": {"$patch": "replace", "matchExpressions": []}}})
    assert _containers(result) == [{"name": "only", "image": "o"}]
    assert result["spec"]["selector"] == {"matchExpressions": []}


def test_smp_retain_keys_clears_other_fields() -> None:
    result = _smp({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}})
    assert result["spec"]["strategy"] == {"type": "Recreate"}


def test_smp_set_element_order() -> None:
    result = _smp({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}],
        "containers": [{"name": "app", "image": "app:3"}]}}}})
    assert [(c["name"], c["image"]) for c in _containers(result)] == [("sidecar", "side:1"), ("app", "app:3")]


def test_smp_primitive_list_merge_and_delete_from_primitive_list() -> None:
    result = _smp({"metadata": {"finalizers": ["c", "a"], "$deleteFromPrimitiveList/finalizers": ["b"]}})
    assert result["metadata"]["finalizers"] == ["c", "a"]
    ordered = _smp({"metadata": {"$setElementOrder/finalizers": ["b", "a"]}})
    assert ordered["metadata"]["finalizers"] == ["b", "a"]


def test_smp_set_element_order_interleaves_server_only_items() -> None:
    # Cases from apimachinery's strategic merge patch suite (three-way patch applied to the live object).
    info = _info("Deployment")
    live = {"spec": {"template": {"spec": {"containers": [{"name": "1", "image": "a"}, {"name": "3", "image": "c"}]}}}}
    patch = {"spec": {"template": {"spec": {"$setElementOrder/containers": [{"name": "1"}, {"name": "2"}],
                                            "containers": [{"name": "2", "image": "b"}]}}}}
    assert [c["name"] for c in _containers(_smp(patch, live, info))] == ["1", "2", "3"]
    pod = {"metadata": {"finalizers": ["1", "2", "3", "4"]}}
    patch = {"metadata": {"$setElementOrder/finalizers": ["1", "2", "4"], "$deleteFromPrimitiveList/finalizers": ["3"]}}
    assert _smp(patch, pod, POD)["metadata"]["finalizers"] == ["1", "2", "4"]


def test_smp_retain_keys_rejects_patch_keys_outside_the_list() -> None:
    with pytest.raises(PatchError, match="retainKeys"):
        _smp({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": {}}}})


def test_smp_lists_without_merge_key_are_replaced() -> None:
    result = _smp({"spec": {"template": {"spec": {"tolerations": [{"key": "k2", "operator": "Exists"}]}}}})
    assert result["spec"]["template"]["spec"]["tolerations"] == [{"key": "k2", "operator": "Exists"}]


def test_smp_owner_references_merge_by_uid() -> None:
    result = _smp({"metadata": {"ownerReferences": [{"uid": "u2", "name": "o2", "kind": "X", "apiVersion": "v1"},
                                                    {"uid": "u1", "name": "renamed"}]}})
    assert [(o["uid"], o["name"]) for o in result["metadata"]["ownerReferences"]] == [("u2", "o2"), ("u1", "renamed")]


def test_smp_pod_spec_paths_and_new_subtree_has_no_directives() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "i", "volumeMounts": [{"mountPath": "/a", "name": "v"}]}]}}
    result = _smp({"spec": {"containers": [{"name": "c", "volumeMounts": [{"mountPath": "/b", "name": "w"}]}],
                            "nodeSelector": {"$patch": "merge", "disk": "ssd"}}}, pod, POD)
    assert result["spec"]["containers"][0]["volumeMounts"] == [{"mountPath": "/b", "name": "w"},
                                                               {"mountPath": "/a", "name": "v"}]
    assert result["spec"]["nodeSelector"] == {"disk": "ssd"}


def test_smp_service_ports_merge_by_port() -> None:
    service = {"kind": "Service", "spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]}}
    result = _smp({"spec": {"ports": [{"port": 443, "targetPort": 8443}]}}, service, _info("Service"))
    assert result["spec"]["ports"] == [{"port": 80, "name": "http"}, {"port": 443, "name": "https", "targetPort": 8443}]


def test_smp_missing_merge_key_is_400() -> None:
    with pytest.raises(PatchError) as err:
        _smp({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}})
    assert err.value.code == 400
    assert "merge key" in err.value.message


def test_smp_unknown_directive_is_400() -> None:
    with pytest.raises(PatchError) as err:
        _smp({"spec": {"$patch": "explode"}})
    assert err.value.code == 400


def test_smp_on_custom_resource_is_415() -> None:
    with pytest.raises(PatchError) as err:
        strategic_merge_patch({"spec": {}}, {"spec": {"a": 1}}, _info("Widget", builtin=False))
    assert err.value.code == 415
    assert err.value.reason == "UnsupportedMediaType"


def test_list_strategy_for_custom_resources_reads_schema() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "items": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["id"],
                  "items": {"type": "object", "properties": {"tags": {
                      "type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}}},
        "plain": {"type": "array", "items": {"type": "string"}}}}}}
    info = _info("Widget", builtin=False, schema=schema)
    assert list_strategy(info, ("spec", "items")).keys == ("id",)
    assert list_strategy(info, ("spec", "items", "tags")).kind == "set"
    assert list_strategy(info, ("spec", "plain")).kind == "atomic"
    assert list_strategy(info, ("metadata", "finalizers")).kind == "set"
    assert list_strategy(DEPLOYMENT, ("spec", "template", "spec", "containers", "env")).keys == ("name",)


def test_registry_infos_drive_merge_keys() -> None:
    from kinformer.server.registry.resources import BUILTINS

    infos = {info.kind: info for info in BUILTINS}
    pod = {"spec": {"containers": [{"name": "a", "image": "1"}]}}
    merged = strategic_merge_patch(pod, {"spec": {"containers": [{"name": "a", "image": "2"}]}}, infos["Pod"])
    assert merged["spec"]["containers"] == [{"name": "a", "image": "2"}]
    assert list_strategy(infos["ReplicaSet"], ("spec", "template", "spec", "volumes")).keys == ("name",)


_smp_keys = st.sampled_from(["spec", "template", "containers", "name", "image", "$patch", "$retainKeys",
                             "$setElementOrder/containers", "$deleteFromPrimitiveList/finalizers", "metadata",
                             "finalizers", "replace", "delete"])
_smp_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.sampled_from(["a", "replace", "delete", "merge"])),
    lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(_smp_keys, c, max_size=3)), max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_smp_keys, _smp_values, max_size=3), st.dictionaries(_smp_keys, _smp_values, max_size=3))
def test_strategic_merge_patch_only_raises_patch_errors(original: dict[str, Any], patch: dict[str, Any]) -> None:
    before = copy.deepcopy(original)
    try:
        strategic_merge_patch(original, patch, DEPLOYMENT)
    except PatchError as err:
        assert err.code == 400
    assert original == before


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_smp_keys, _smp_values, max_size=3), st.dictionaries(_smp_keys, _smp_values, max_size=3))
def test_strategic_merge_patch_shared_gives_the_independent_result_and_changes_neither_side(
        original: dict[str, Any], patch: dict[str, Any]) -> None:
    before, patch_before = copy.deepcopy(original), copy.deepcopy(patch)
    try:
        independent = strategic_merge_patch(original, patch, DEPLOYMENT)
    except PatchError:
        return
    assert strategic_merge_patch(original, patch, DEPLOYMENT, share=True) == independent
    assert original == before and patch == patch_before


@settings(max_examples=100, deadline=None)
@given(_json_objects, _json_objects)
def test_merge_patch_shared_gives_the_independent_result_and_changes_neither_side(a: dict[str, Any],
                                                                                 b: dict[str, Any]) -> None:
    patch = _merge_diff(a, b)
    before, patch_before = copy.deepcopy(a), copy.deepcopy(patch)
    assert json_merge_patch(a, patch, share=True) == json_merge_patch(a, patch) == b
    assert a == before and patch == patch_before


POD_WITH_STATUS = {"metadata": {"name": "p", "labels": {"a": "b"}},
                   "spec": {"containers": [{"name": "c", "image": "i"}]},
                   "status": {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}],
                              "hostIP": "10.0.0.1"}}
STATUS_PATCH = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


@pytest.mark.parametrize("merge", [lambda o, p, **kw: strategic_merge_patch(o, p, POD, **kw), json_merge_patch],
                         ids=["strategic", "merge"])
def test_a_shared_patch_result_copies_what_the_patch_reaches_and_only_that(merge: Any) -> None:
    original = copy.deepcopy(POD_WITH_STATUS)
    shared = merge(original, STATUS_PATCH, share=True)
    assert shared["status"]["phase"] == "Running" and shared["status"]["hostIP"] == "10.0.0.1"
    assert shared is not original and shared["status"] is not original["status"]
    assert shared["spec"] is original["spec"] and shared["metadata"] is original["metadata"]
    independent = merge(original, STATUS_PATCH)
    assert independent == shared and independent["spec"] is not original["spec"]
    assert original == POD_WITH_STATUS

# ------------------------------------------------------------------------------------------ limits

def test_json_patch_copy_amplification_is_bounded_by_the_accumulated_copy_size() -> None:
    from kinformer.server.registry.patch import MAX_COPY_BYTES

    doc = {"data": {"k": "v" * 1000}}
    ops = [{"op": "copy", "from": "/data", "path": f"/data/c{i}"} for i in range(18)]  # doubles /data each time
    with pytest.raises(PatchError) as info:
        json_patch(doc, ops)
    err = info.value
    assert err.code == 422
    detail = err.causes[0]["message"]
    assert detail.startswith("Unable to complete the copy, the accumulated size increase of copy is ")
    assert detail.endswith(f"exceeding the limit {MAX_COPY_BYTES}")
    assert doc == {"data": {"k": "v" * 1000}}
    assert json_patch(doc, ops[:3])["data"]["c2"]["c1"]["c0"] == {"k": "v" * 1000}  # small copies still apply


def test_json_patch_operation_count_is_bounded() -> None:
    from kinformer.server.registry.patch import MAX_JSON_PATCH_OPERATIONS

    ops = [{"op": "test", "path": "/a", "value": 1}] * (MAX_JSON_PATCH_OPERATIONS + 1)
    with pytest.raises(PatchError) as info:
        json_patch({"a": 1}, ops)
    assert info.value.code == 413 and info.value.reason == "RequestEntityTooLarge"
    assert json_patch({"a": 1}, ops[:MAX_JSON_PATCH_OPERATIONS]) == {"a": 1}


def test_patch_results_deeper_than_the_limit_are_refused() -> None:
    from kinformer.server.endpoints.bodies import MAX_DEPTH

    # copying a value into its own child nests one level deeper each time; JSON could not even encode 300 levels
    ops = [{"op": "copy", "from": "/a", "path": "/a/a"}] * 300
    with pytest.raises(PatchError) as info:
        json_patch({"a": {}}, ops)
    assert info.value.code == 422 and f"deeper than {MAX_DEPTH} levels" in info.value.causes[0]["message"]
    half = MAX_DEPTH // 2 + 1
    nested = _deep(half)
    for apply in (lambda: json_patch({"a": copy.deepcopy(nested)},
                                     [{"op": "add", "path": "/a" + "/n" * (half - 1) + "/x", "value": nested}]),
                  lambda: json_merge_patch({}, _deep(MAX_DEPTH))):
        with pytest.raises(PatchError) as info:
            apply()
        assert info.value.code == 422 and "deeper" in info.value.causes[0]["message"]
    assert json_merge_patch({}, _deep(MAX_DEPTH - 1)) == _deep(MAX_DEPTH - 1)


def _deep(levels: int) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for _ in range(levels):
        doc = {"n": doc}
    return doc


def test_patch_results_larger_than_the_limit_are_refused() -> None:
    from kinformer.server.registry.patch import MAX_PATCHED_BYTES

    original = {"a": "x" * (MAX_PATCHED_BYTES // 2)}
    patch = {"b": "y" * (MAX_PATCHED_BYTES // 2)}
    for apply in (lambda: json_merge_patch(original, patch),
                  lambda: strategic_merge_patch(original, patch, DEPLOYMENT),
                  lambda: json_patch(original, [{"op": "add", "path": "/b", "value": patch["b"]}])):
        with pytest.raises(PatchError) as info:
            apply()
        assert info.value.code == 413 and info.value.reason == "RequestEntityTooLarge"


def test_builtin_list_strategies_come_from_kube_schemas() -> None:
    service = SimpleNamespace(**{**vars(_info("Service")), "group": ""})
    assert list_strategy(service, ("spec", "ports")).keys == ("port",)
    job = SimpleNamespace(**{**vars(_info("CronJob")), "group": "batch"})
    path = ("spec", "jobTemplate", "spec", "template", "spec", "containers", "volumeMounts")
    assert (list_strategy(job, path).kind, list_strategy(job, path).keys) == ("map", ("mountPath",))
    assert list_strategy(POD, ("spec", "tolerations")).kind == "atomic"
    assert list_strategy(POD, ("metadata", "finalizers")).kind == "set"
    assert list_strategy(POD, ("metadata", "ownerReferences")).keys == ("uid",)
    ingress = SimpleNamespace(**{**vars(_info("Ingress")), "group": "networking.k8s.io"})
    assert list_strategy(ingress, ("spec", "rules")).kind == "atomic"
    widget = _info("Widget", builtin=False, schema={"type": "object"})
    assert list_strategy(widget, ("metadata", "ownerReferences")).keys == ("uid",)


# ------------------------------------------------------------------------------------ large lists

def _names(prefix: str, numbers: range) -> list[str]:
    return [f"example.com/{prefix}{i}" for i in numbers]


def _refs(numbers: range, **extra: Any) -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "ConfigMap", "name": f"o{i}", "uid": Counted(f"u{i}"), **extra}
            for i in numbers]


N = 2000
LIST_MERGES = {
    "set union": ({"finalizers": _names("f", range(N))},
                  {"metadata": {"finalizers": [Counted(f) for f in _names("f", range(N // 2, 2 * N))]}}),
    "delete from a set": ({"finalizers": _names("f", range(N))},
                          {"metadata": {"$deleteFromPrimitiveList/finalizers": [Counted(f) for f in
                                                                               _names("f", range(0, N, 2))]}}),
    "keyed merge": ({"ownerReferences": _refs(range(N))},
                    {"metadata": {"ownerReferences": _refs(range(N // 2, 2 * N), blockOwnerDeletion=True)}}),
    "keyed deletes": ({"ownerReferences": _refs(range(N))},
                      {"metadata": {"ownerReferences": [{"uid": Counted(f"u{i}"), "$patch": "delete"}
                                                        for i in range(0, N, 2)]}}),
    "set element order": ({"finalizers": _names("f", range(N))},
                          {"metadata": {"$setElementOrder/finalizers": _names("f", range(N))[::-1]}}),
}


@pytest.mark.parametrize("case", LIST_MERGES)
def test_smp_list_merges_look_items_up_instead_of_scanning(case: str) -> None:
    """Membership goes by hash: the comparisons made are a small multiple of the items, never their product
    (a scan of the stored list for each patch item makes N * N / 2 of them)."""
    meta, patch = LIST_MERGES[case]
    Counted.comparisons = 0
    strategic_merge_patch({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", **meta}}, patch,
                          _info("ConfigMap"))
    assert Counted.comparisons <= 10 * N


def test_smp_merges_large_lists_as_small_ones() -> None:
    stored = _names("f", range(70_000))
    patched = _smp({"metadata": {"finalizers": _names("f", range(35_000, 140_000))}},
                   {**_deployment(), "metadata": {"name": "web", "finalizers": stored}})
    assert patched["metadata"]["finalizers"] == _names("f", range(140_000))  # server-only first, then the patch's
    reordered = _smp({"metadata": {"$setElementOrder/finalizers": stored[::-1]}}, patched)
    assert reordered["metadata"]["finalizers"] == stored[::-1] + _names("f", range(70_000, 140_000))
    deleted = _smp({"metadata": {"$deleteFromPrimitiveList/finalizers": _names("f", range(0, 140_000, 2))}}, patched)
    assert deleted["metadata"]["finalizers"] == _names("f", range(1, 140_000, 2))


def test_smp_merges_a_large_keyed_list_by_its_key() -> None:
    env = [{"name": f"E{i}", "value": "old"} for i in range(70_000)]
    obj = _deployment()
    _containers(obj)[0]["env"] = env
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "app", "env": [
        {"name": f"E{i}", "value": "new"} for i in range(35_000, 140_000)] + [
        {"name": f"E{i}", "$patch": "delete"} for i in range(0, 35_000, 2)]}]}}}}
    merged = _containers(_smp(patch, obj))[0]["env"]
    assert merged == [{"name": f"E{i}", "value": "old"} for i in range(1, 35_000, 2)] + \
        [{"name": f"E{i}", "value": "new"} for i in range(35_000, 140_000)]


def test_smp_into_an_empty_list_keeps_the_patch_order_of_first_mentions() -> None:
    """A list merged into none comes out in the order the patch first names each item (sets deduplicated,
    keyed items merged into the first with their key), as when the merged list is reordered."""
    obj = _deployment()
    obj["metadata"].pop("finalizers")
    _containers(obj)[0].pop("env", None)
    patched = _smp({"metadata": {"finalizers": ["b", "a", "b", 1, {"x": 1}, {"x": 1}]}}, obj)
    assert patched["metadata"]["finalizers"] == ["b", "a", 1, {"x": 1}]
    name = _containers(obj)[0]["name"]
    env = [{"name": "B", "value": "1"}, {"name": "A"}, {"name": "B", "value": "2"}, {"name": "C", "$patch": "delete"}]
    merged = _smp({"spec": {"template": {"spec": {"containers": [{"name": name, "env": env}]}}}}, obj)
    assert _containers(merged)[0]["env"] == [{"name": "B", "value": "2"}, {"name": "A"}]


def test_smp_items_new_to_a_keyed_list_go_before_the_servers_own() -> None:
    """Patch items whose keys the list lacks come first, in the patch's order, then the server's items in
    theirs (kube's normalized order: a kubelet's first conditions before the scheduler's PodScheduled); the
    server's items with a repeated key gather at the first one's place, as the general reordering puts them."""
    def conditions(*types: str) -> list[dict[str, Any]]:
        return [{"type": t, "status": "True"} for t in types]

    def merged(server: list[dict[str, Any]], patch: list[dict[str, Any]]) -> list[str]:
        return [c["type"] for c in _smp({"status": {"conditions": patch}}, {"status": {"conditions": server}},
                                        POD)["status"]["conditions"]]

    assert merged(conditions("PodScheduled"), conditions("Initialized", "Ready")) == \
        ["Initialized", "Ready", "PodScheduled"]
    assert merged(conditions("A", "B", "A"), conditions("C")) == ["C", "A", "A", "B"]
    assert merged(conditions("A", "B"), conditions("C", "B")) == ["C", "A", "B"]  # B named: the general order
    assert merged(conditions("A"), conditions("C", "D", "C")) == ["C", "D", "A"]


def test_smp_new_nested_items_drop_nulls_at_every_depth_and_keep_their_key_order() -> None:
    """A keyed item merged into nothing is copied with its nested objects merged into nothing too (nulls
    dropped at each depth, directives applied, keys in the patch's order), as the general merge builds it."""
    status = {"name": "web", "state": {"running": {"startedAt": "T", "x": None}}, "lastState": {},
              "ready": True, "extra": {"$patch": "delete", "a": 1}, "z": None}
    pod = {"metadata": {"name": "p"}, "status": {"phase": "Pending"}}
    merged = _smp({"status": {"initContainerStatuses": [status]}}, pod, POD)["status"]["initContainerStatuses"]
    assert merged == [{"name": "web", "state": {"running": {"startedAt": "T"}}, "lastState": {}, "ready": True,
                       "extra": {}}]
    assert list(merged[0]) == ["name", "state", "lastState", "ready", "extra"]


def _random_smp_case(rnd: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    """A Deployment and a patch of its finalizers (a set: strings, now and then another value) and of a
    container's env (keyed by name: scalars, nulls, now and then a nested value or a directive)."""
    def members() -> list[Any]:
        return [rnd.choice(["a", "b", "c", "d", "example.com/f", 1, None] if rnd.random() < 0.2 else ["a", "b", "c"])
                for _ in range(rnd.randint(0, 5))]

    def env() -> list[dict[str, Any]]:
        items = []
        for _ in range(rnd.randint(0, 4)):
            item: dict[str, Any] = {"name": rnd.choice(["A", "B", "C"])}
            for key in rnd.sample(["value", "x", "$patch", "valueFrom"], rnd.randint(0, 2)):
                item[key] = "delete" if key == "$patch" else rnd.choice(["v", None, 2, {"k": None}])
            items.append(item)
        return items

    original = _deployment()
    original["metadata"]["finalizers"] = members()
    original["spec"]["template"]["spec"]["containers"][0]["env"] = env()  # the container "app"
    patch: dict[str, Any] = {"metadata": {"finalizers": members()}}
    if rnd.random() < 0.3:
        patch["metadata"]["$deleteFromPrimitiveList/finalizers"] = members()
    if rnd.random() < 0.3:
        patch["metadata"]["$setElementOrder/finalizers"] = members()
    patch["spec"] = {"template": {"spec": {"containers": [{"name": rnd.choice(["app", "new"]), "env": env()}]}}}
    return original, patch


@pytest.mark.parametrize("seed", range(200))
def test_smp_shortcuts_for_strings_and_flat_items_merge_as_the_general_merge(seed: int) -> None:
    """Lists of strings merge and delete through themselves, new flat items are copied in one pass: the
    results (order, types and errors included) are those of the general merge."""
    from kinformer.server.registry import patch as patches

    original, patch = _random_smp_case(random.Random(seed))

    def merge() -> str:
        try:
            return json.dumps(strategic_merge_patch(copy.deepcopy(original), patch, DEPLOYMENT))
        except PatchError as err:
            return f"{err.code} {err.message}"

    fast = merge()
    with pytest.MonkeyPatch.context() as general:
        general.setattr(patches, "only_strings", lambda values: False)
        general.setattr(patches._StrategicMerger, "new_map", lambda self, p, path: self.merge_map({}, p, path))
        keyed = patches._StrategicMerger._merge_keyed
        general.setattr(patches._StrategicMerger, "_merge_keyed", lambda self, *args: (keyed(self, *args)[0], False))
        assert merge() == fast
