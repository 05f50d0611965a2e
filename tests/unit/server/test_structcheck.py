"""The typed one-pass check of a built-in's JSON body: True only where the schema walk finds the body fine."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given, settings
from test_schemas import BASES, mutated

from kinformer.server import schemas, structcheck
from kinformer.server.nesting import MAX_DEPTH, too_deep


def _fine(node: schemas.Node, obj: Any) -> bool:
    return node.fine(obj) and not too_deep(obj)


def test_the_bases_pass_the_fast_check() -> None:
    for gvk, base in BASES:
        node = schemas.kind_node(*gvk)
        assert node is not None
        body = orjson.dumps(base)
        # a recursive definition (JSONSchemaProps) has no typed check; an integral float (10.0) is the walk's
        expected = gvk[2] != "CustomResourceDefinition" and b".0," not in body and b".0}" not in body
        assert structcheck.body_fine(node, body) == expected, gvk
    assert any(gvk[2] == "Pod" and len(orjson.dumps(base)) > 4096 for gvk, base in BASES)  # the realistic pod


@settings(max_examples=400, deadline=None)
@given(mutated())
def test_the_fast_check_passes_only_what_the_walk_finds_fine(case: tuple[schemas.Node, Any]) -> None:
    node, obj = case
    assert not structcheck.body_fine(node, json.dumps(obj)) or _fine(node, obj)  # json: integers of any size


def test_duplicate_keys_are_checked_at_every_occurrence() -> None:
    node = schemas.kind_node("", "v1", "ConfigMap")
    assert node is not None
    last_good, last_bad = b'{"data":{"a":1,"a":"x"}}', b'{"data":{"a":"x","a":1}}'
    assert node.fine(orjson.loads(last_good)) and not node.fine(orjson.loads(last_bad))
    assert not structcheck.body_fine(node, last_good) and not structcheck.body_fine(node, last_bad)
    assert structcheck.body_fine(node, b'{"data":{"a":"y","a":"x"}}')


def _nested_objects(levels: int) -> Any:
    value: Any = {}
    for i in range(levels - 1):
        value = {f"f:{i}": value}
    return value


def test_free_form_values_are_bounded_so_the_depth_is() -> None:
    cm = schemas.kind_node("", "v1", "ConfigMap")
    assert cm is not None

    def body(fields_v1: Any) -> bytes:
        return orjson.dumps({"metadata": {"name": "a", "managedFields": [{"manager": "m", "fieldsV1": fields_v1}]}})

    assert structcheck.body_fine(cm, body(_nested_objects(10)))
    # deeper FieldsV1 (or any free-form value of other shapes) is left to the walk and the depth measure
    assert not structcheck.body_fine(cm, body(_nested_objects(MAX_DEPTH)))
    assert not structcheck.body_fine(cm, body({"f:a": [1]}))
    assert cm.fine(orjson.loads(body({"f:a": [1]})))
    assert not structcheck.body_fine(cm, b'{"data": {"a": 1.0}}') and not structcheck.body_fine(cm, b"[]")


def test_integral_floats_are_left_to_the_walk() -> None:
    node = schemas.kind_node("", "v1", "Pod")
    assert node is not None
    for value in (b"30", b"30.0"):
        body = b'{"spec":{"containers":[],"terminationGracePeriodSeconds":' + value + b"}}"
        assert structcheck.body_fine(node, body) == (value == b"30")
        assert node.fine(json.loads(body))
