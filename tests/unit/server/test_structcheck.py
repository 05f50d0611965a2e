"""The typed one-pass check of a built-in's decoded body: True only where the schema walk finds it fine."""

from __future__ import annotations

import copy
from typing import Any

import orjson
from hypothesis import given, settings
from test_schemas import BASES, mutated

from kinformer.server import schemas, structcheck
from kinformer.server.nesting import MAX_DEPTH, too_deep


def test_the_bases_pass_the_fast_check() -> None:
    for gvk, base in BASES:
        node = schemas.kind_node(*gvk)
        assert node is not None
        body = orjson.dumps(base)
        # a recursive definition (JSONSchemaProps) has no typed check; an integral float (10.0) is the walk's
        expected = gvk[2] != "CustomResourceDefinition" and b".0," not in body and b".0}" not in body
        assert structcheck.doc_fine(node, base) == expected, gvk
    assert any(gvk[2] == "Pod" and len(orjson.dumps(base)) > 4096 for gvk, base in BASES)  # the realistic pod


@settings(max_examples=400, deadline=None)
@given(mutated())
def test_the_fast_check_passes_only_what_the_walk_finds_fine(case: tuple[schemas.Node, Any]) -> None:
    node, obj = case
    assert not structcheck.doc_fine(node, obj) or (node.fine(obj) and not too_deep(obj))


def _nested_objects(levels: int) -> Any:
    value: Any = {}
    for i in range(levels - 1):
        value = {f"f:{i}": value}
    return value


def test_free_form_values_are_bounded_so_the_depth_is() -> None:
    cm = schemas.kind_node("", "v1", "ConfigMap")
    assert cm is not None

    def doc(fields_v1: Any, **entry: Any) -> dict[str, Any]:
        return {"metadata": {"name": "a", "managedFields": [{"manager": "m", "fieldsV1": fields_v1, **entry}]}}

    assert structcheck.doc_fine(cm, doc(_nested_objects(10)))
    # deeper FieldsV1, free-form values of other shapes: left to the walk (which takes them) and the depth measure
    for odd in (doc(_nested_objects(MAX_DEPTH)), doc({"f:a": [1]}), doc({}, anything="the field manager's")):
        assert not structcheck.doc_fine(cm, odd) and cm.fine(odd)
    assert not structcheck.doc_fine(cm, {"data": {"a": 1.0}}) and not structcheck.doc_fine(cm, [])


def test_field_names_are_the_json_names() -> None:
    cm = schemas.kind_node("", "v1", "ConfigMap")
    assert cm is not None
    assert structcheck.doc_fine(cm, {"binaryData": {}, "immutable": True})
    assert not structcheck.doc_fine(cm, {"f0": {}}) and not cm.fine({"f0": {}})


def test_integral_floats_are_left_to_the_walk() -> None:
    node = schemas.kind_node("", "v1", "Pod")
    assert node is not None
    base: dict[str, Any] = {"spec": {"containers": [], "terminationGracePeriodSeconds": 30}}
    assert structcheck.doc_fine(node, base)
    floats = copy.deepcopy(base)
    floats["spec"]["terminationGracePeriodSeconds"] = 30.0
    assert not structcheck.doc_fine(node, floats) and node.fine(floats)
