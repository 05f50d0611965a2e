"""The typed one-pass check of a built-in's decoded body: True only where the schema walk finds it fine."""

from __future__ import annotations

import copy
from typing import Any

import orjson
from hypothesis import given, settings
from test_schemas import BASES, FIXTURE, _ref_clean, _ref_valid, mutated

from kinformer.server.machinery.nesting import MAX_DEPTH, too_deep
from kinformer.server.schema import schemas, structcheck


def test_the_bases_pass_the_fast_check() -> None:
    for gvk, base in BASES:
        node = structcheck.typed_kind_node(*gvk)
        assert node is not None
        body = orjson.dumps(base)
        # a recursive definition (JSONSchemaProps) has no typed check; an integral float (10.0) is the walk's
        expected = gvk[2] != "CustomResourceDefinition" and b".0," not in body and b".0}" not in body
        assert structcheck.doc_fine(node, base) == expected, gvk
    if FIXTURE.exists():  # the realistic pod (beside the project, not in a clone of it alone)
        assert any(gvk[2] == "Pod" and len(orjson.dumps(base)) > 4096 for gvk, base in BASES)


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
    cm = structcheck.typed_kind_node("", "v1", "ConfigMap")
    assert cm is not None

    def doc(fields_v1: Any, **entry: Any) -> dict[str, Any]:
        return {"metadata": {"name": "a", "managedFields": [{"manager": "m", "fieldsV1": fields_v1, **entry}]}}

    # the kind's own managedFields: FieldsV1 of any content, measured (the document, metadata, the list, an entry)
    assert structcheck.doc_fine(cm, doc({"f:a": [1]}))
    assert structcheck.doc_fine(cm, doc(_nested_objects(MAX_DEPTH - 4)))
    assert not structcheck.doc_fine(cm, doc(_nested_objects(MAX_DEPTH - 3)))
    assert not structcheck.doc_fine(cm, doc({}, anything="the field manager's")) and cm.fine(doc({}, anything=1))
    assert not structcheck.doc_fine(cm, {"data": {"a": 1.0}}) and not structcheck.doc_fine(cm, [])
    # a template's: typed FieldsV1 (objects of objects, a few levels); other shapes are left to the walk
    deploy = structcheck.typed_kind_node("apps", "v1", "Deployment")
    assert deploy is not None

    def template(fields_v1: Any) -> dict[str, Any]:
        meta = {"managedFields": [{"manager": "m", "fieldsV1": fields_v1}]}
        return {"spec": {"selector": {}, "template": {"metadata": meta, "spec": {"containers": []}}}}

    assert structcheck.doc_fine(deploy, template(_nested_objects(10)))
    for odd in (template({"f:a": [1]}), template(_nested_objects(MAX_DEPTH - 10))):
        assert not structcheck.doc_fine(deploy, odd) and deploy.fine(odd)


def test_field_names_are_the_json_names() -> None:
    cm = structcheck.typed_kind_node("", "v1", "ConfigMap")
    assert cm is not None
    assert structcheck.doc_fine(cm, {"binaryData": {}, "immutable": True})
    assert not structcheck.doc_fine(cm, {"f0": {}}) and not cm.fine({"f0": {}})


def test_integral_floats_are_left_to_the_walk() -> None:
    node = structcheck.typed_kind_node("", "v1", "Pod")
    assert node is not None
    base: dict[str, Any] = {"spec": {"containers": [], "terminationGracePeriodSeconds": 30}}
    assert structcheck.doc_fine(node, base)
    floats = copy.deepcopy(base)
    floats["spec"]["terminationGracePeriodSeconds"] = 30.0
    assert not structcheck.doc_fine(node, floats) and node.fine(floats)


# ----------------------------------------------------------------- node.fine's conversion (any decoded object)

CRD = ("apiextensions.k8s.io", "v1", "CustomResourceDefinition")


def _converts(node: schemas.Node, obj: Any) -> bool:
    return structcheck._converts(structcheck._FINE_BUILDER.type_of(node)[0], obj)


def _integers(value: Any) -> Any:
    """``value`` with integral floats as integers (the bases hold a few, which only the walk accepts)."""
    if isinstance(value, dict):
        return {k: _integers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integers(v) for v in value]
    return int(value) if isinstance(value, float) and value.is_integer() else value


@settings(max_examples=400, deadline=None)
@given(mutated())
def test_what_the_conversion_accepts_the_walk_accepts(case: tuple[schemas.Node, Any]) -> None:
    node, obj = case
    if node is structcheck.typed_kind_node(*CRD):
        return  # recursive: the walk alone checks it (below)
    for value in (obj, _integers(obj)):
        if _converts(node, value):
            assert node.fine(value) and _ref_valid(node, value) and _ref_clean(node, value)


def test_valid_objects_pass_the_conversion() -> None:
    for gvk, base in BASES:
        node = structcheck.typed_kind_node(*gvk)
        assert node is not None
        if gvk != CRD:
            assert _converts(node, _integers(base)) and node.fine(_integers(base)), gvk


def test_a_recursive_kind_and_an_integral_float_are_the_walks() -> None:
    crd_node = structcheck.typed_kind_node(*CRD)
    assert crd_node is not None
    crd = next(b for g, b in BASES if g == CRD)
    assert crd_node.fine(crd) and not crd_node.fine({**crd, "spec": {**crd["spec"], "scope": 3}})
    svc_node = structcheck.typed_kind_node("", "v1", "Service")
    assert svc_node is not None
    svc = copy.deepcopy(next(b for g, b in BASES if g == ("", "v1", "Service")))
    svc["spec"]["ports"][0]["port"] = 80.0
    assert not _converts(svc_node, svc) and svc_node.fine(svc)
    svc["spec"]["ports"][0]["port"] = 80.5
    assert not svc_node.fine(svc)


def test_typed_kind_node_is_the_kind_node_with_the_typed_check_tried_first() -> None:
    node = structcheck.typed_kind_node("", "v1", "Secret")
    assert node is not None and node is schemas.kind_node("", "v1", "Secret")
    assert node.fine({"data": {"k": "dg=="}}) and not node.fine({"data": 1})
    assert node.compiled is not None and node.compiled.__qualname__.startswith("install_typed_check.")
