"""The msgspec fast path of built-in kinds' schema checks: never more lenient than the walk, the same answers."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings

from kinformer.server import nativeschemas, schemas
from unit.server.test_schemas import BASES, _ref_clean, _ref_valid, mutated

CRD = ("apiextensions.k8s.io", "v1", "CustomResourceDefinition")


def _accepted(node: schemas.Node, obj: Any) -> bool:
    try:
        msgspec.convert(obj, nativeschemas._type(node, set()))
    except msgspec.ValidationError:
        return False
    return True


def _integers(value: Any) -> Any:
    """``value`` with integral floats as integers (the bases hold a few, which only the walk accepts)."""
    if isinstance(value, dict):
        return {k: _integers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integers(v) for v in value]
    return int(value) if isinstance(value, float) and value.is_integer() else value


@settings(max_examples=600, deadline=None)
@given(mutated())
def test_what_msgspec_accepts_the_walk_accepts(case: tuple[schemas.Node, Any]) -> None:
    node, obj = case
    if node is schemas.kind_node(*CRD):
        return  # recursive: the walk alone checks it (below)
    for value in (obj, _integers(obj)):
        if _accepted(node, value):
            assert _ref_valid(node, value) and _ref_clean(node, value)


@pytest.mark.parametrize("gvk", sorted({gvk for gvk, _ in BASES if gvk != CRD}))
def test_valid_bodies_are_accepted_in_c(gvk: tuple[str, str, str]) -> None:
    node = schemas.kind_node(*gvk)
    assert node is not None
    for base in (_integers(b) for g, b in BASES if g == gvk):
        assert _accepted(node, base) and node.fine(base)


def test_a_recursive_kind_is_checked_by_the_walk_alone() -> None:
    node = schemas.kind_node(*CRD)
    assert node is not None
    with pytest.raises(nativeschemas._Unsupported):
        nativeschemas._type(node, set())
    crd = next(b for g, b in BASES if g == CRD)
    assert node.fine(crd)
    bad = copy.deepcopy(crd)
    bad["spec"]["scope"] = 3
    assert not node.fine(bad)


def test_what_only_the_walk_accepts_is_still_accepted() -> None:
    """An integral float for an integer (Go's decoder takes ``80.0``): msgspec refuses it, the walk decides."""
    node = schemas.kind_node("", "v1", "Service")
    assert node is not None
    svc = copy.deepcopy(next(b for g, b in BASES if g == ("", "v1", "Service")))
    svc["spec"]["ports"][0]["port"] = 80.0
    assert not _accepted(node, svc) and node.fine(svc)
    svc["spec"]["ports"][0]["port"] = 80.5
    assert not node.fine(svc)
