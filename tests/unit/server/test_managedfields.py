"""The fast managed-fields paths agree with the plain definitions they replace, on many random objects."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest

from kinformer.server.registry import managedfields
from kinformer.server.registry.managedfields import (
    changed_paths,
    field_set,
    field_values,
    fields_to_set,
    object_fields,
    set_to_fields,
    update_managed_fields,
)
from kinformer.server.registry.resources import Registry
from testlib import cyclic_garbage

FIXTURE = Path(__file__).resolve().parents[3] / "bench" / "pod-realistic.json"
REGISTRY = Registry()
POD = REGISTRY.get("", "v1", "pods")
VALUES: list[Any] = [1, 1.0, True, False, "s", "", None, {}, [], {"q": 1}, ["a", "b"], [{"name": "n", "v": 1}],
                     [{"name": "n"}, {"name": "n"}], 10**20]


def pod() -> dict[str, Any]:
    """The realistic pod: two other managers' entries (kube-controller-manager's, the kubelet's status) included."""
    return json.loads(FIXTURE.read_text())


def mutate(rnd: random.Random, node: Any) -> None:
    """One random change somewhere below ``node`` (a dict or a list)."""
    if isinstance(node, dict):
        if not node or rnd.random() < 0.2:
            node[rnd.choice(["a", "name", "x"])] = copy.deepcopy(rnd.choice(VALUES))
            return
        key = rnd.choice(list(node))
        if rnd.random() < 0.15:
            del node[key]
        elif isinstance(node[key], dict | list) and rnd.random() < 0.8:
            mutate(rnd, node[key])
        else:
            node[key] = copy.deepcopy(rnd.choice(VALUES))
    elif isinstance(node, list):
        if not node or rnd.random() < 0.2:
            node.append(copy.deepcopy(rnd.choice(node)) if node and rnd.random() < 0.5 else {"name": "new"})
            return
        i = rnd.randrange(len(node))
        if rnd.random() < 0.15:
            node.pop(i)
        elif isinstance(node[i], dict | list):
            mutate(rnd, node[i])
        else:
            node[i] = rnd.choice(["s", 2])


def naive_changed(old: dict[str, Any], new: dict[str, Any], sub: str | None) -> tuple[set[Any], set[Any]]:
    before, after = field_values(old, POD, sub), field_values(new, POD, sub)
    changed = {p for p, v in after.items() if p not in before or before[p] != v or type(before[p]) is not type(v)}
    return changed, before.keys() - after.keys()


@pytest.mark.parametrize("seed", range(60))
def test_one_walk_diff_and_tree_match_the_path_set_definitions(seed: int) -> None:
    rnd = random.Random(seed)
    old = pod()
    for _ in range(rnd.randint(0, 3)):
        mutate(rnd, old)
    new = copy.deepcopy(old)
    for _ in range(rnd.randint(0, 5)):
        mutate(rnd, new)
    sub = rnd.choice([None, "status"])
    changes, removed = changed_paths(old, new, POD, sub)
    assert (changes, removed) == naive_changed(old, new, sub)
    assert object_fields(new, POD, sub) == set_to_fields(field_set(new, POD, sub))
    tree = managedfields.changes_tree(changes, POD)  # the changes rendered from their new subtrees
    assert tree is None or json.dumps(tree) == json.dumps(set_to_fields(changes))  # key order included


def test_an_associative_list_diff_skips_unchanged_items_and_takes_new_ones_whole() -> None:
    # a kubelet's first status: PodScheduled as it was (an equal copy), Initialized changed, Ready new (a null
    # field sets nothing), a condition removed; as the path-set definition has it, with the new fields as wholes
    def cond(kind: str, **fields: Any) -> dict[str, Any]:
        return {"type": kind, "status": "True", "lastTransitionTime": "t", **fields}

    old = {"metadata": {"name": "p"}, "status": {"conditions": [cond("PodScheduled", lastProbeTime=None),
                                                                cond("Initialized"), cond("Gone")]}}
    new = {"metadata": {"name": "p"}, "status": {"conditions": [
        copy.deepcopy(cond("PodScheduled", lastProbeTime=None)), cond("Initialized", status="False"),
        cond("Ready", reason=None, message="m")]}}
    changes, removed = changed_paths(old, new, POD, "status")
    assert (changes, removed) == naive_changed(old, new, "status")
    ready = ("f:status", "f:conditions", 'k:{"type":"Ready"}')
    assert {path for path, _, _ in changes.wholes} == {(*ready, f"f:{f}") for f in
                                                       ("type", "status", "lastTransitionTime", "message")}
    assert ready in changes.singles and all("PodScheduled" not in "".join(p) for p in changes)
    # leaves on both sides: a changed value or type is one changed path, an equal one none
    for before, after, changed in (("Pending", "Running", True), (1, 1.0, True), (1, True, True), ({}, [], True),
                                   ("x", "x", False), ({}, {}, False)):
        old["status"]["phase"], new["status"]["phase"] = before, after
        changes, removed = changed_paths(old, new, POD, "status")
        assert (changes, removed) == naive_changed(old, new, "status")
        assert (("f:status", "f:phase") in changes) is changed


def test_sorted_insertion_renders_owned_nodes_with_a_dot_first() -> None:
    paths = {("f:a",), ("f:a", "f:b"), ("f:c", "k:{\"name\":\"x\"}"), ("f:c", "k:{\"name\":\"x\"}", "f:name"),
             ("-foreign",), ("-foreign", "f:z")}
    fields = set_to_fields(paths)
    assert fields == {"-foreign": {".": {}, "f:z": {}}, "f:a": {".": {}, "f:b": {}},
                      "f:c": {"k:{\"name\":\"x\"}": {".": {}, "f:name": {}}}}
    assert list(fields) == sorted(fields) and list(fields["f:a"]) == [".", "f:b"]
    assert fields_to_set(fields) == paths


def test_create_with_client_entries_keeps_what_the_object_does_not_set() -> None:
    obj = pod()
    obj["metadata"]["managedFields"] = [
        {"manager": "old", "operation": "Update", "apiVersion": "v1",
         "fieldsV1": {"f:metadata": {"f:labels": {"f:gone": {}, "f:app": {}}}, "f:spec": {"f:x": {}}}}]
    obj["metadata"]["labels"] = {"app": "web"}
    out = update_managed_fields(None, obj, manager="me", info=POD, now="T")
    entries = {e["manager"]: e["fieldsV1"] for e in out["metadata"]["managedFields"]}
    assert entries["old"] == {"f:metadata": {"f:labels": {"f:gone": {}}}, "f:spec": {"f:x": {}}}
    assert entries["me"] == set_to_fields(field_set(obj, POD, None))


@pytest.mark.parametrize("seed", range(20))
def test_a_remembered_create_renders_what_a_computed_one_does_in_fresh_dicts(seed: int) -> None:
    rnd = random.Random(seed)
    obj = pod()
    for _ in range(rnd.randint(0, 4)):
        mutate(rnd, obj)
    if not isinstance(obj.get("metadata"), dict):
        obj["metadata"] = {}
    if rnd.random() < 0.5:
        obj["metadata"].pop("managedFields", None)
    managedfields._creates.clear()
    managedfields._flat_creates.clear()
    computed = update_managed_fields(None, copy.deepcopy(obj), manager="me", info=POD, now="T1")
    twin = copy.deepcopy(obj)
    twin["metadata"]["name"] = "another-name"  # ignored metadata: the same shape
    first = update_managed_fields(None, twin, manager="me", info=POD, now="T2")
    second = update_managed_fields(None, copy.deepcopy(twin), manager="me", info=POD, now="T2")
    assert len(managedfields._creates) + len(managedfields._flat_creates) == 1  # one memo or the other: no array
    want = computed["metadata"].get("managedFields")
    for entry in [e for e in want or () if e["manager"] == "me"]:
        entry["time"] = "T2"
    assert first["metadata"].get("managedFields") == second["metadata"].get("managedFields") == want
    assert json.dumps(first) == json.dumps(second)  # same key order too
    if want:
        assert first["metadata"]["managedFields"][-1] is not second["metadata"]["managedFields"][-1]


def test_creates_whose_content_encodes_to_one_length_are_remembered_apart() -> None:
    """Shapes of one encoded length share a memo key; each still gets the managedFields of its own content."""
    def shaped(port: int) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": port}]}]}}

    ports = [8081, 8082, 8083, 8084, 8085, 8086]  # more shapes than one key keeps
    managedfields._creates.clear()
    computed = {}
    for port in ports:
        computed[port] = update_managed_fields(None, shaped(port), manager="me", info=POD, now="T")
        managedfields._creates.clear()
    for port in ports * 3:
        got = update_managed_fields(None, shaped(port), manager="me", info=POD, now="T")
        assert json.dumps(got) == json.dumps(computed[port])
    assert len(managedfields._creates) == 1
    assert len(next(iter(managedfields._creates.values()))) == managedfields.CREATE_KEY_SHAPES


def test_a_create_keyed_by_the_encoding_of_its_measured_entries_renders_what_a_computed_one_does() -> None:
    """The client's entries encoded by the body's depth measure key the memo as their own encoding does: an equal
    create hits; one whose entries differ (measured or not) does not; where they sit in the metadata is no part."""
    from kinformer.server.machinery.nesting import too_deep_at

    def created(obj: dict[str, Any], measure: bool) -> bytes:
        if measure:
            assert not too_deep_at(obj["metadata"]["managedFields"], 3)
        return json.dumps(update_managed_fields(None, obj, manager="me", info=POD, now="T")).encode()

    managedfields._creates.clear()
    want = created(pod(), False)
    managedfields._creates.clear()
    assert created(pod(), True) == want and created(pod(), False) == want and created(pod(), True) == want
    assert len(managedfields._creates) == 1
    other = pod()
    other["metadata"]["managedFields"][0]["manager"] = "another"
    managedfields._creates.clear()
    want_other = created(copy.deepcopy(other), False)
    for measure in (True, False):
        assert created(copy.deepcopy(other), measure) == want_other and created(pod(), measure) == want
    moved = pod()
    entries = moved["metadata"].pop("managedFields")
    moved["metadata"] = {"managedFields": entries, **moved["metadata"]}
    assert json.loads(created(moved, True))["metadata"]["managedFields"] == json.loads(want)["metadata"][
        "managedFields"]


def test_a_create_starts_from_the_client_entries_that_name_a_manager_unless_one_is_the_creators() -> None:
    def create(*entries: dict[str, Any]) -> list[dict[str, Any]]:
        obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "managedFields": list(entries)},
               "data": {"a": "1", "b": "2"}}
        managedfields._creates.clear()
        out = update_managed_fields(None, obj, manager="me", info=REGISTRY.get("", "v1", "configmaps"), now="T")
        return out["metadata"]["managedFields"]

    other = {"manager": "other", "operation": "Update", "apiVersion": "v1",
             "fieldsV1": {"f:data": {"f:a": {}, "f:z": {}}}}
    nameless = {"operation": "Update", "fieldsV1": {"f:data": {"f:z": {}}}}
    got = create(nameless, other)
    assert [(e["manager"], e["fieldsV1"]) for e in got] == [
        ("other", {"f:data": {"f:z": {}}}), ("me", {"f:data": {"f:a": {}, "f:b": {}}})]
    mine = {"manager": "me", "operation": "Update", "apiVersion": "v1", "fieldsV1": {"f:data": {"f:z": {}}}}
    got = create(other, mine)  # the creator's own entry: the general path, its claims kept
    assert [e["manager"] for e in got] == ["other", "me"]
    assert got[1]["fieldsV1"] == {"f:data": {"f:a": {}, "f:b": {}, "f:z": {}}}


_ELEMENT_STRINGS = ["", "a", 'say "hi"', "back\\slash", "tab\there", "\x00", "\x7f", "é", "日本", "\U0001f600",
                    '","', "a/b", "</script>", "x" * 300]


@pytest.mark.parametrize("strings", [_ELEMENT_STRINGS, [s for s in _ELEMENT_STRINGS if s.isascii() and s.isalnum()],
                                     ["", ""], ['","', ""], ["solo"]])
def test_list_elements_encoded_in_one_go_are_those_encoded_one_by_one(strings: list[str]) -> None:
    """``v:`` and ``k:`` elements of a long list come from one encoding of the list when it holds plain strings;
    they must be exactly the elements of each item on its own (json's compact, key-sorted form)."""
    values: list[Any] = [*strings, *VALUES[:7]]
    for items in (strings, values):
        assert managedfields.value_elements(items) == [managedfields.value_element(i) for i in items]
    for keys in (("name",), ("containerPort", "protocol")):
        rows: list[dict[str, Any]] = [{"name": s, "containerPort": 80} for s in strings]
        assert managedfields.key_elements(rows, keys) == [managedfields.key_element(r, keys) for r in rows]
    odd: list[dict[str, Any]] = [{"name": s} for s in strings] + [{"name": 1}, {"protocol": None}]
    assert managedfields.key_elements(odd, ("name",)) == [managedfields.key_element(r, ("name",)) for r in odd]


def test_a_rendered_tree_is_the_callers_own_whether_remembered_or_not() -> None:
    """A render memo miss hands out the tree it rendered, a hit a decoding of the remembered one: both the
    canonical tree, and changing one changes no later answer."""
    paths = frozenset({("f:status", "f:podIPs", 'k:{"ip":"10.9.8.7"}'), ("f:status", "f:podIPs", 'k:{"ip":"10.9.8.7"}',
                                                                         "f:ip"), ("f:status", "f:phase")})
    managedfields._rendered.pop(paths, None)
    first = managedfields.render_fields({}, paths)
    assert first == set_to_fields(paths) and paths in managedfields._rendered
    first["f:status"]["f:phase"]["mutated"] = {}
    second = managedfields.render_fields({}, paths)
    assert second == set_to_fields(paths) and second is not first


@pytest.mark.parametrize("key", ["ip", "type", 'na"me', "é", "a b"])
def test_a_single_string_key_element_is_the_encoding_of_the_key(key: str) -> None:
    """A list item keyed by one string field (a condition's type, a pod IP) is written without an encoder when
    the strings need no escape; it must be exactly what the encoding gives."""
    for value in [*_ELEMENT_STRINGS, " ", "~", "\x1f", "10.244.1.2", "PodReadyToStartContainers"]:
        assert managedfields.key_element({key: value}, (key,)) == "k:" + managedfields._json_element({key: value})
    assert managedfields.key_element({key: 1}, (key,)) == "k:" + managedfields._json_element({key: 1})


def test_a_short_list_is_judged_keyed_item_by_item_as_a_long_one_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every item an object with each key (a defaulted key may be missing): a short list's loop answers what
    the item-free checks of a long list answer."""
    class Row(dict[str, Any]):
        pass

    cases: list[tuple[list[Any], tuple[str, ...]]] = [
        ([], ("name",)), ([{"name": "a"}], ("name",)), ([{"name": "a"}, {"nam": "b"}], ("name",)),
        ([{"name": "a"}, "b"], ("name",)), ([Row(name="a")], ("name",)), ([{"port": 1}], ("port", "protocol")),
        ([{"protocol": "UDP"}], ("port", "protocol")), ([None], ("name",)), ([[1]], ("name",))]
    short = [managedfields.all_keyed(items, keys) for items, keys in cases]
    monkeypatch.setattr(managedfields, "_SHORT_LIST", -1)
    assert short == [managedfields.all_keyed(items, keys) for items, keys in cases]
    assert short == [True, True, False, False, True, True, False, False, False]


def test_large_field_sets_are_rendered_without_being_remembered() -> None:
    """A field set of a long list renders to the same tree as a small one would, and the render memo (bounded
    by count, not size) does not keep it."""
    paths = {("f:metadata", "f:finalizers", f'v:"example.com/f{i}"') for i in range(managedfields.MEMO_PATHS + 1)}
    remembered = dict(managedfields._rendered)
    tree = managedfields.render_fields({}, frozenset(paths))
    assert tree == set_to_fields(paths) and fields_to_set(tree) == paths
    assert managedfields._rendered == remembered


@pytest.mark.parametrize("seed", range(30))
def test_an_update_renders_the_writers_new_subtrees_as_their_paths_would(seed: int,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer owns what it owned and what it changed; a large such set is rendered from the new subtrees'
    values (``changes_tree``), which must give the tree of the paths, key order included; the paths of a
    long new list are never listed unless a manager claims something at or below it."""
    rnd = random.Random(seed)
    old = update_managed_fields(None, pod(), manager="owner", info=POD, now="T0")
    writer = rnd.choice(["writer", "owner"])
    if rnd.random() < 0.6:  # a stale claim of the owner below a subtree the write adds (a list's, deferred)
        fields = old["metadata"]["managedFields"][0]["fieldsV1"] = copy.deepcopy(
            old["metadata"]["managedFields"][0]["fieldsV1"])
        if rnd.random() < 0.5:
            fields["f:spec"]["f:extra"] = {"f:b": {"f:stale": {}}}
        else:
            fields["f:metadata"]["f:finalizers"] = {'v:"example.com/f1"': {}, 'v:"stale"': {}}
    new = copy.deepcopy(old)
    container = new["spec"]["containers"][0]
    container["env"] = [{"name": f"E{i}", "value": rnd.choice(["v", None])} for i in range(rnd.randint(1, 6))]
    container["ports"] = [{"containerPort": 80 + i, "name": f"p{i}"} for i in range(rnd.randint(0, 3))]
    new["spec"]["extra"] = {"b": {"z": 1, "a": [1, {"q": None}]}, "a": rnd.choice(VALUES)}
    new["metadata"]["finalizers"] = [f"example.com/f{i}" for i in rnd.sample(range(20), rnd.randint(1, 5))]
    for _ in range(rnd.randint(0, 4)):
        mutate(rnd, new)
    renders = []
    for memo_paths in (10**9, 0):  # rendered from the paths, then from the subtrees
        monkeypatch.setattr(managedfields, "MEMO_PATHS", memo_paths)
        renders.append(json.dumps(update_managed_fields(old, copy.deepcopy(new), manager=writer, info=POD,
                                                        now="T")))
    assert renders[0] == renders[1]


@pytest.mark.parametrize("memo_paths", [10**9, 0])
def test_a_write_that_only_adds_a_long_list_stamps_the_writers_entry(memo_paths: int,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer's set grows by the new list's members alone (with ``MEMO_PATHS`` 0, a deferred list whose
    paths are never listed): its entry is stamped with the write's time and renders them."""
    monkeypatch.setattr(managedfields, "MEMO_PATHS", memo_paths)
    old = update_managed_fields(None, pod(), manager="owner", info=POD, now="T0")
    new = copy.deepcopy(old)
    new["metadata"]["finalizers"] = ["example.com/b", "example.com/a"]
    out = update_managed_fields(old, new, manager="owner", info=POD, now="T1")
    others = [e for e in old["metadata"]["managedFields"] if e["manager"] != "owner"]
    *unchanged, entry = out["metadata"]["managedFields"]
    assert unchanged == others
    assert entry["manager"] == "owner" and entry["time"] == "T1"
    assert entry["fieldsV1"]["f:metadata"]["f:finalizers"] == {'v:"example.com/a"': {}, 'v:"example.com/b"': {}}
    owned_by_others = set().union(*(fields_to_set(e["fieldsV1"]) for e in others))
    assert fields_to_set(entry["fieldsV1"]) == field_set(new, POD, None) - owned_by_others


def test_a_status_write_compares_the_subtrees_it_shares_with_the_old_version_without_encoding_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    statuses = [{"name": "c", "ready": True, "restartCount": 0, "state": {"running": {"startedAt": "t"}}}]
    old = {"metadata": {"name": "p"}, "status": {"phase": "Pending", "containerStatuses": statuses}}
    new = {"metadata": {"name": "p"}, "status": {"phase": "Running", "containerStatuses": statuses}}
    encoded: list[Any] = []
    dumps = managedfields.orjson.dumps

    def counting(value: Any, *args: Any, **kwargs: Any) -> bytes:
        encoded.append(value)
        return dumps(value, *args, **kwargs)

    monkeypatch.setattr(managedfields.orjson, "dumps", counting)
    changes, removed = changed_paths(old, new, POD, "status")
    assert set(changes) == {("f:status", "f:phase")} and not removed
    assert not any(value is statuses for value in encoded)


def test_an_update_keeps_the_tree_of_an_entry_it_leaves_as_it_was_when_that_tree_is_canonical() -> None:
    """An entry whose set the write leaves alone keeps its very tree when the tree is its set's canonical
    rendering; a tree in another key order is rendered canonically, as before."""
    old = update_managed_fields(None, pod(), manager="owner", info=POD, now="T0")
    trees = [entry["fieldsV1"] for entry in old["metadata"]["managedFields"]]
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {**(new["metadata"].get("labels") or {}), "added": "x"}
    out = update_managed_fields(old, new, manager="writer", info=POD, now="T1")
    *kept, writer = out["metadata"]["managedFields"]
    assert [entry["fieldsV1"] for entry in kept] == trees
    assert all(entry["fieldsV1"] is tree for entry, tree in zip(kept, trees, strict=True))
    assert writer["manager"] == "writer" and writer["fieldsV1"] == {"f:metadata": {"f:labels": {"f:added": {}}}}
    shuffled = dict(reversed(list(trees[0].items())))
    old["metadata"]["managedFields"][0] = {**old["metadata"]["managedFields"][0], "fieldsV1": shuffled}
    new["metadata"]["managedFields"] = old["metadata"]["managedFields"]
    out = update_managed_fields(old, new, manager="writer", info=POD, now="T1")
    rendered = out["metadata"]["managedFields"][0]["fieldsV1"]
    assert rendered == trees[0] and list(rendered) == list(trees[0]) and rendered is not shuffled


def test_fields_to_set_leaves_no_cyclic_garbage():
    fields = object_fields(pod(), POD, None)
    assert len(fields_to_set(fields)) > 5  # the walk recursed
    with cyclic_garbage() as garbage:
        fields_to_set(fields)
    assert garbage == []


def _random_flat_event(rnd: random.Random) -> dict[str, Any]:
    """An Event-like object without arrays (now and then an empty one): nested objects, nulls, falsy scalars,
    empty objects, ignored and null metadata."""
    def value(depth: int) -> Any:
        if depth < 2 and rnd.random() < 0.3:
            return {rnd.choice("abcd"): value(depth + 1) for _ in range(rnd.randint(0, 3))}
        return rnd.choice(["s", "", 0, 1, False, None, {}, [], {"x": None}])

    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Event",
                           "metadata": {"name": f"e{rnd.randint(0, 9)}", "namespace": "default",
                                        rnd.choice(["labels", "annotations", "uid"]): value(1)}}
    for name in rnd.sample(["involvedObject", "reason", "message", "source", "count", "series", "related"], 4):
        obj[name] = value(0)
    return obj


@pytest.mark.parametrize("seed", range(40))
def test_a_create_without_arrays_owns_the_tree_of_its_shape_as_computed(seed: int) -> None:
    """An array-free create's tree comes from the shape memo: equal to the set's tree computed afresh, and
    objects of one shape (other values, other ignored metadata) share it; the entry is the writer's alone."""
    events = REGISTRY.get("", "v1", "events")
    rnd = random.Random(seed)
    for memo in (managedfields._flat_creates, managedfields._creates, managedfields._arrayed):
        memo.clear()
    for obj in [_random_flat_event(rnd) for _ in range(6)]:
        want = set_to_fields(field_set(obj, events, None))
        twin = json.loads(json.dumps(obj).replace('"s"', '"t"'))
        twin["metadata"]["name"] = "other"
        for created in (update_managed_fields(None, obj, manager="me", info=events, now="T"),
                        update_managed_fields(None, twin, manager="me", info=events, now="T")):
            entries = created["metadata"].get("managedFields")
            if not want:
                assert entries is None
                continue
            assert entries == [{"manager": "me", "operation": "Update", "apiVersion": "v1", "time": "T",
                                "fieldsType": "FieldsV1", "fieldsV1": want}]
            assert json.dumps(entries[0]["fieldsV1"]) == json.dumps(want)  # canonical order
    assert not managedfields._creates
    assert 0 < len(managedfields._flat_creates) <= 6


def test_a_kind_once_created_with_an_array_takes_the_encoding_memo_with_the_same_result() -> None:
    """After a create of a kind held an array, that kind's array-free creates skip the shape walk (the encoding
    memo answers them) and own the same managedFields."""
    def cm(data: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data}

    info = REGISTRY.get("", "v1", "configmaps")
    for memo in (managedfields._flat_creates, managedfields._creates, managedfields._arrayed):
        memo.clear()
    flat = update_managed_fields(None, cm({"a": "1"}), manager="me", info=info, now="T")
    assert managedfields._flat_creates and not managedfields._creates and not managedfields._arrayed
    update_managed_fields(None, {**cm({}), "odd": [1]}, manager="me", info=info, now="T")
    assert ("", "v1", "ConfigMap") in managedfields._arrayed
    again = update_managed_fields(None, cm({"a": "1"}), manager="me", info=info, now="T")
    assert json.dumps(again) == json.dumps(flat)
    assert len(managedfields._creates) == 2
    managedfields._arrayed.clear()
