"""Server-side apply and managedFields bookkeeping."""

from __future__ import annotations

import copy
import json
import random
from types import SimpleNamespace
from typing import Any

import pytest

from kinformer.server.registry.apply import (
    ApplyConflict,
    fields_to_set,
    server_side_apply,
    set_to_fields,
    update_managed_fields,
)
from kinformer.server.registry.patch import PatchError
from testlib import Counted

NOW = "2026-01-01T00:00:00Z"


_GROUPS = {"Deployment": "apps", "StatefulSet": "apps", "DaemonSet": "apps", "ReplicaSet": "apps"}


def _info(kind: str, *, builtin: bool = True, schema: dict[str, Any] | None = None,
          subresources: tuple[str, ...] = ()) -> SimpleNamespace:
    group = _GROUPS.get(kind, "") if builtin else "example.com"
    return SimpleNamespace(group=group, version="v1", kind=kind, plural=kind.lower() + "s", singular=kind.lower(),
                           namespaced=True, short_names=[], categories=[], verbs=[], subresources=list(subresources),
                           schema=schema, builtin=builtin, selectable_fields=[])


CONFIGMAP = _info("ConfigMap")
DEPLOYMENT = _info("Deployment", subresources=("status", "scale"))


def _cm(data: dict[str, str], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default", **meta},
            "data": data}


def _apply(live: dict[str, Any] | None, applied: dict[str, Any], manager: str = "kubectl", *, force: bool = False,
           info: Any = CONFIGMAP) -> dict[str, Any]:
    before = copy.deepcopy((live, applied))
    result = server_side_apply(live, applied, manager=manager, force=force, info=info, now=NOW)
    assert (live, applied) == before, "inputs must not be mutated"
    return result


def _managers(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"]): e["fieldsV1"] for e in obj["metadata"].get("managedFields", [])}


def test_create_records_apply_entry() -> None:
    obj = _apply(None, _cm({"a": "1"}, labels={"app": "x"}))
    assert obj["data"] == {"a": "1"}
    assert obj["metadata"]["managedFields"] == [{
        "manager": "kubectl", "operation": "Apply", "apiVersion": "v1", "time": NOW, "fieldsType": "FieldsV1",
        "fieldsV1": {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:app": {}}}},
    }]


def test_reapply_is_idempotent() -> None:
    first = _apply(None, _cm({"a": "1"}))
    again = server_side_apply(first, _cm({"a": "1"}), manager="kubectl", force=False, info=CONFIGMAP,
                              now="2030-01-01T00:00:00Z")
    assert again == first


def test_removed_field_is_deleted_when_nobody_else_owns_it() -> None:
    first = _apply(None, _cm({"a": "1", "b": "2"}, labels={"x": "y"}))
    second = _apply(first, _cm({"a": "1"}))
    assert second["data"] == {"a": "1"}
    assert "labels" not in second["metadata"]
    assert _managers(second) == {("kubectl", "Apply"): {"f:data": {"f:a": {}}}}


def test_removed_field_survives_when_another_manager_owns_it() -> None:
    first = _apply(None, _cm({"a": "1", "b": "2"}))
    shared = _apply(first, _cm({"b": "2"}), manager="other")
    second = _apply(shared, _cm({"a": "1"}))
    assert second["data"] == {"a": "1", "b": "2"}
    assert _managers(second) == {("kubectl", "Apply"): {"f:data": {"f:a": {}}},
                                 ("other", "Apply"): {"f:data": {"f:b": {}}}}


def test_conflict_with_another_manager() -> None:
    created = update_managed_fields(None, _cm({"x": "1"}), manager="kubectl-client-side-apply", now=NOW)
    with pytest.raises(ApplyConflict) as err:
        _apply(created, _cm({"x": "2"}), manager="kubectl")
    assert err.value.code == 409
    assert str(err.value) == ('Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: '
                              ".data.x")
    assert err.value.causes == [{"reason": "FieldManagerConflict", "field": ".data.x",
                                 "message": 'conflict with "kubectl-client-side-apply" using v1: .data.x'}]


def test_same_value_is_shared_not_a_conflict() -> None:
    created = update_managed_fields(None, _cm({"x": "1"}), manager="editor", now=NOW)
    applied = _apply(created, _cm({"x": "1"}))
    assert _managers(applied) == {("editor", "Update"): {"f:data": {"f:x": {}}},
                                  ("kubectl", "Apply"): {"f:data": {"f:x": {}}}}


def test_force_takes_ownership() -> None:
    first = _apply(None, _cm({"x": "1", "y": "1"}), manager="one")
    forced = _apply(first, _cm({"x": "2"}), manager="two", force=True)
    assert forced["data"] == {"x": "2", "y": "1"}
    assert _managers(forced) == {("one", "Apply"): {"f:data": {"f:y": {}}},
                                 ("two", "Apply"): {"f:data": {"f:x": {}}}}


def test_multiple_conflicts_message() -> None:
    first = _apply(None, _cm({"a": "1", "b": "1"}), manager="one")
    with pytest.raises(ApplyConflict) as err:
        _apply(first, _cm({"a": "2", "b": "2"}), manager="two")
    assert str(err.value) == 'Apply failed with 2 conflicts: conflicts with "one":\n- .data.a\n- .data.b'
    assert [c["field"] for c in err.value.causes] == [".data.a", ".data.b"]


def _deployment(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"app": "d"}},
                     "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": list(containers)}}}}


def test_associative_lists_use_merge_keys() -> None:
    obj = _apply(None, _deployment({"name": "app", "image": "a:1"}, {"name": "side", "image": "s:1"}),
                 info=DEPLOYMENT)
    containers = _managers(obj)[("kubectl", "Apply")]["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert containers == {'k:{"name":"app"}': {".": {}, "f:image": {}, "f:name": {}},
                          'k:{"name":"side"}': {".": {}, "f:image": {}, "f:name": {}}}
    # Another manager adds a container; the applier's re-apply keeps it and drops only its own.
    edited = copy.deepcopy(obj)
    edited["spec"]["template"]["spec"]["containers"].append({"name": "debug", "image": "busybox"})
    edited = update_managed_fields(obj, edited, manager="kubectl-edit", info=DEPLOYMENT, now=NOW)
    reapplied = _apply(edited, _deployment({"name": "app", "image": "a:2"}), info=DEPLOYMENT)
    assert reapplied["spec"]["template"]["spec"]["containers"] == [{"name": "app", "image": "a:2"},
                                                                   {"name": "debug", "image": "busybox"}]


def test_ports_are_keyed_by_their_list_map_keys_with_the_protocol_defaulted() -> None:
    """kube 1.32 keys container ports by (containerPort, protocol), the patch merge key is containerPort alone;
    an applied port without protocol is keyed with its default, TCP."""
    obj = _apply(None, _deployment({"name": "app", "image": "a", "ports": [{"containerPort": 80}]}),
                 info=DEPLOYMENT)
    container = _managers(obj)[("kubectl", "Apply")]["f:spec"]["f:template"]["f:spec"]["f:containers"][
        'k:{"name":"app"}']
    assert container["f:ports"] == {'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}}
    live = copy.deepcopy(obj)  # the server defaults the protocol; the applier still owns that one port
    live["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "protocol": "TCP"},
                                                                  {"containerPort": 80, "protocol": "UDP"}]
    live = update_managed_fields(obj, live, manager="kubectl-edit", info=DEPLOYMENT, now=NOW)
    edit = _managers(live)[("kubectl-edit", "Update")]["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert edit['k:{"name":"app"}']["f:ports"] == {
        'k:{"containerPort":80,"protocol":"TCP"}': {"f:protocol": {}},
        'k:{"containerPort":80,"protocol":"UDP"}': {".": {}, "f:containerPort": {}, "f:protocol": {}}}
    reapplied = _apply(live, _deployment({"name": "app", "image": "a", "ports": [{"containerPort": 80,
                                                                               "name": "http"}]}),
                       info=DEPLOYMENT)
    assert reapplied["spec"]["template"]["spec"]["containers"][0]["ports"] == [
        {"containerPort": 80, "protocol": "TCP", "name": "http"}, {"containerPort": 80, "protocol": "UDP"}]


def test_status_is_not_owned_through_the_main_resource() -> None:
    applied = _deployment({"name": "app", "image": "a"})
    applied["status"] = {"replicas": 3}
    obj = _apply(None, applied, info=DEPLOYMENT)
    assert "f:status" not in _managers(obj)[("kubectl", "Apply")]


def test_custom_resource_list_map_keys_and_sets() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "proto"],
                  "items": {"type": "object"}},
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "args": {"type": "array", "items": {"type": "string"}}}}}}
    info = _info("Widget", builtin=False, schema=schema)
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "finalizers": ["f"]},
              "spec": {"ports": [{"port": 80, "proto": "TCP"}], "tags": ["a", "b"], "args": ["x"]}}
    fields = _managers(_apply(None, widget, info=info))[("kubectl", "Apply")]
    assert fields == {
        "f:metadata": {"f:finalizers": {'v:"f"': {}}},
        "f:spec": {"f:args": {}, "f:ports": {'k:{"port":80,"proto":"TCP"}': {".": {}, "f:port": {}, "f:proto": {}}},
                   "f:tags": {'v:"a"': {}, 'v:"b"': {}}},
    }


def test_first_apply_on_untracked_object_conflicts_with_before_first_apply() -> None:
    with pytest.raises(ApplyConflict, match="before-first-apply"):
        _apply(_cm({"a": "1"}), _cm({"a": "2"}))


def test_apply_requires_manager_and_rejects_managed_fields() -> None:
    with pytest.raises(PatchError):
        _apply(None, _cm({"a": "1"}), manager="")
    with pytest.raises(PatchError) as err:
        _apply(None, _cm({"a": "1"}, managedFields=[{"manager": "x"}]))
    assert err.value.code == 400


def test_update_transfers_ownership_and_drops_removed_fields() -> None:
    applied = _apply(None, _cm({"a": "1", "b": "1"}))
    updated = update_managed_fields(applied, {**applied, "data": {"a": "2"}}, manager="editor", now=NOW)
    assert updated["data"] == {"a": "2"}
    assert _managers(updated) == {("editor", "Update"): {"f:data": {"f:a": {}}}}
    # The editor took .data.a from the applier, so applying the old value again conflicts with the editor.
    with pytest.raises(ApplyConflict, match=r'conflict with "editor" using v1: \.data\.a'):
        _apply(updated, _cm({"a": "1"}))


def test_update_on_create_owns_everything_and_unchanged_update_adds_nothing() -> None:
    created = update_managed_fields(None, _cm({"a": "1"}, labels={"l": "v"}), manager="kubectl-create", now=NOW)
    assert _managers(created) == {("kubectl-create", "Update"): {"f:data": {"f:a": {}},
                                                                 "f:metadata": {"f:labels": {"f:l": {}}}}}
    same = update_managed_fields(created, copy.deepcopy(created), manager="controller", now=NOW)
    assert _managers(same) == _managers(created)


def test_user_can_clear_managed_fields() -> None:
    created = update_managed_fields(None, _cm({"a": "1"}), manager="one", now=NOW)
    cleared = copy.deepcopy(created)
    cleared["metadata"]["managedFields"] = [{}]
    assert "managedFields" not in update_managed_fields(created, cleared, manager="two", now=NOW)["metadata"]


def test_fields_v1_round_trip() -> None:
    fields = {"f:data": {".": {}, "f:a": {}}, "f:spec": {"f:c": {'k:{"name":"x"}': {".": {}, "f:name": {}}}}}
    assert set_to_fields(fields_to_set(fields)) == fields


def test_registry_infos_are_accepted() -> None:
    from kinformer.server.registry.resources import BUILTINS

    deployment = next(info for info in BUILTINS if info.kind == "Deployment")
    applied = _deployment({"name": "app", "image": "a"})
    applied["status"] = {"replicas": 1}
    obj = server_side_apply(None, applied, manager="m", force=False, info=deployment, now=NOW)
    fields = obj["metadata"]["managedFields"][0]["fieldsV1"]
    assert "f:status" not in fields
    assert 'k:{"name":"app"}' in fields["f:spec"]["f:template"]["f:spec"]["f:containers"]


def test_changing_a_shared_list_item_conflicts_only_on_its_fields() -> None:
    created = update_managed_fields(None, _deployment({"name": "nginx", "image": "nginx", "ports": [
        {"containerPort": 80}]}), manager="kubectl-create", info=DEPLOYMENT, now=NOW)
    with pytest.raises(ApplyConflict) as err:
        _apply(created, _deployment({"name": "nginx", "image": "nginx:2"}), info=DEPLOYMENT)
    assert [c["field"] for c in err.value.causes] == ['.spec.template.spec.containers[name="nginx"].image']
    forced = _apply(created, _deployment({"name": "nginx", "image": "nginx:2"}), force=True, info=DEPLOYMENT)
    assert forced["spec"]["template"]["spec"]["containers"] == [
        {"name": "nginx", "image": "nginx:2", "ports": [{"containerPort": 80}]}]
    owners = _managers(forced)
    create_fields = owners[("kubectl-create", "Update")]["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert "f:image" not in create_fields['k:{"name":"nginx"}']


# ------------------------------------------------------------------------------------ large lists

def _finalizers(numbers: range, kind: type = str) -> list[str]:
    return [kind(f"example.com/f{i}") for i in numbers]


def _refs(numbers: range, kind: type = str) -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "ConfigMap", "name": f"o{i}", "uid": kind(f"u{i}")} for i in numbers]


N = 2000
APPLIES = {
    "another manager reorders a set": ("finalizers", _finalizers, lambda items: items[::-1], "other"),
    "another manager reorders a keyed list": ("ownerReferences", _refs, lambda items: items[::-1], "other"),
    "the owner drops half a set": ("finalizers", _finalizers, lambda items: items[::2], "kubectl"),
    "the owner drops half a keyed list": ("ownerReferences", _refs, lambda items: items[::2], "kubectl"),
}


@pytest.mark.parametrize("case", APPLIES)
def test_apply_finds_list_items_instead_of_scanning(case: str) -> None:
    """Merging, conflict checks and removal of abandoned items look list items up by hash: the comparisons made
    are a small multiple of the items, never their product (N * N / 2 for a scan per item)."""
    field, make, change, manager = APPLIES[case]
    live = server_side_apply(None, _cm({}, **{field: make(range(N), Counted)}), manager="kubectl", force=False,
                             info=CONFIGMAP, now=NOW)
    Counted.comparisons = 0
    server_side_apply(live, _cm({}, **{field: change(make(range(N), Counted))}), manager=manager, force=False,
                      info=CONFIGMAP, now=NOW)
    assert Counted.comparisons <= 10 * N


def test_apply_of_large_lists_keeps_ownership_and_order() -> None:
    n = 20_000
    live = _apply(None, _cm({}, finalizers=_finalizers(range(n)), ownerReferences=_refs(range(n))))
    reordered = _apply(live, _cm({}, finalizers=_finalizers(range(n))[::-1], ownerReferences=_refs(range(n))[::-1]),
                       "other")
    assert reordered["metadata"]["finalizers"] == _finalizers(range(n))  # a set keeps the live order
    assert reordered["metadata"]["ownerReferences"] == _refs(range(n))
    both = _managers(reordered)
    assert both[("kubectl", "Apply")] == both[("other", "Apply")]
    assert len(both[("other", "Apply")]["f:metadata"]["f:finalizers"]) == n
    shared = _apply(reordered, _cm({}, finalizers=_finalizers(range(0, n, 2)), ownerReferences=_refs(range(0, n, 2))))
    assert shared["metadata"]["finalizers"] == _finalizers(range(n))  # "other" still owns them all
    dropped = _apply(shared, _cm({}), "other")
    assert dropped["metadata"]["finalizers"] == _finalizers(range(0, n, 2))
    assert dropped["metadata"]["ownerReferences"] == _refs(range(0, n, 2))

def test_set_members_conflict_only_where_presence_changes() -> None:
    """Another manager's finalizers, re-applied in another order, are shared (no conflict); one it owns that the
    object no longer holds (stale ownership), applied again, conflicts: presence changes there alone."""
    first = _apply(_cm({}), _cm({}, finalizers=["a.io/x", "a.io/y", "a.io/z"]), manager="first")
    second = _apply(first, _cm({}, finalizers=["a.io/z", "a.io/x"]), manager="second")
    assert second["metadata"]["finalizers"] == ["a.io/x", "a.io/y", "a.io/z"]
    stale = copy.deepcopy(first)
    stale["metadata"]["finalizers"] = ["a.io/x", "a.io/z"]  # the managedFields still name a.io/y
    with pytest.raises(ApplyConflict) as err:
        _apply(stale, _cm({}, finalizers=["a.io/y", "a.io/x"]), manager="second")
    assert err.value.causes == [{"reason": "FieldManagerConflict", "field": '.metadata.finalizers[="a.io/y"]',
                                 "message": 'conflict with "first": .metadata.finalizers[="a.io/y"]'}]


def test_set_members_are_compared_as_sets_not_checked_for_each_manager(monkeypatch: pytest.MonkeyPatch) -> None:
    """A configuration's list of strings is compared with the live one as a whole (its members whose presence
    flips), never member by member for each manager that owns some: the paths checked one by one are the
    configuration's other fields, however long the list and however many managers share it."""
    from kinformer.server.registry import apply

    checked: list[int] = []
    real = apply._changed

    def spy(live: Any, merged: Any, paths: Any, finder: Any, flips: Any) -> set[Any]:
        checked.append(len(paths))
        return real(live, merged, paths, finder, flips)

    live = _apply(None, _cm({"x": "1"}, finalizers=_finalizers(range(N))))
    live = _apply(live, _cm({"x": "1"}, finalizers=_finalizers(range(0, N, 2))), "half")
    monkeypatch.setattr(apply, "_changed", spy)
    other = _apply(live, _cm({"x": "1"}, finalizers=_finalizers(range(N + 1))[::-1]), "other")
    assert other["metadata"]["finalizers"] == _finalizers(range(N + 1))
    assert checked == [1, 1]  # data.x, for "kubectl" and "half"
    with pytest.raises(ApplyConflict):  # the flip is still seen: a member one manager owns, gone from the object
        stale = copy.deepcopy(live)
        stale["metadata"]["finalizers"] = _finalizers(range(1, N))
        _apply(stale, _cm({}, finalizers=_finalizers(range(N))), "other")


def _apply_sequence(seed: int, kind: type) -> list[str]:
    """A random history of applies (three managers, forced or not) and updates of one ConfigMap whose
    finalizers and ownerReferences are lists of ``kind`` strings: each outcome (the object, or the conflict)."""
    rnd = random.Random(seed)
    live: dict[str, Any] | None = None
    outcomes = []
    for _ in range(rnd.randint(2, 6)):
        meta = {"finalizers": [kind(f) for f in rnd.sample(["a", "b", "c", "d", "e"], rnd.randint(0, 5))],
                "ownerReferences": _refs(range(rnd.randint(0, 3)), kind)}
        config = _cm({k: rnd.choice(["1", "2"]) for k in rnd.sample(["x", "y"], rnd.randint(0, 2))},
                     **{k: v for k, v in meta.items() if rnd.random() < 0.7})
        try:
            if live is not None and rnd.random() < 0.25:
                live = update_managed_fields(live, {**live, "metadata": {**live["metadata"], **meta}},
                                             manager="editor", info=CONFIGMAP, now=NOW)
            else:
                live = server_side_apply(live, config, manager=rnd.choice(["m1", "m2", "m3"]),
                                         force=rnd.random() < 0.3, info=CONFIGMAP, now=NOW)
            outcomes.append(json.dumps(live))
        except ApplyConflict as err:
            outcomes.append(err.message)
    return outcomes


@pytest.mark.parametrize("seed", range(80))
def test_random_applies_come_out_alike_with_and_without_the_shortcuts_for_large_lists(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lists of plain strings take the shortcuts (members compared as sets, merged by themselves), a str
    subclass the general per-item paths; with ``MEMO_PATHS`` 0 every configuration's entry is rendered from
    the object rather than from its paths. Objects, managedFields and conflicts are the same, byte for byte."""
    from kinformer.server.registry import apply, managedfields

    plain = _apply_sequence(seed, str)
    assert _apply_sequence(seed, Counted) == plain
    monkeypatch.setattr(apply, "MEMO_PATHS", 0)
    monkeypatch.setattr(managedfields, "MEMO_PATHS", 0)
    assert _apply_sequence(seed, str) == plain
