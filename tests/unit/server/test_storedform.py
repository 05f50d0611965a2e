"""The stored and served forms of an object and the server-set values of a new one."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
import pytest

from kinformer.server.registry import storedform
from kinformer.server.registry.storedform import encode, encode_split, new_uid, served_bytes, stored_of_served


def test_new_uids_are_random_version_4_uuids() -> None:
    uids = {new_uid() for _ in range(2000)}
    assert len(uids) == 2000
    for text in uids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122
    assert {text[19] for text in uids} == set("89ab")


@pytest.mark.parametrize("meta", [{"name": "a"}, {"name": "a", "labels": {"resourceVersion": "x"}},
                                  {"annotations": {"a": '","resourceVersion":"1"}'}, "name": "é\u2028"}])
def test_one_encoding_cut_gives_the_stored_and_the_served_bytes(meta: dict[str, Any]) -> None:
    obj = {"kind": "Event", "metadata": {**meta, "resourceVersion": "7"},
           "involvedObject": {"resourceVersion": "7"}, "data": {"x": [1, None, "y"]}}
    split = encode_split(obj)
    assert split is not None
    obj["metadata"]["resourceVersion"] = "123"
    assert split[0] + split[1] == encode(obj)
    assert served_bytes(split, 123) == orjson.dumps(obj)


def test_an_encoding_that_holds_the_marker_elsewhere_is_not_cut() -> None:
    obj = {"metadata": {"name": "a", "resourceVersion": ""}, "data": {"copy": storedform._RV_MARK_TEXT}}
    assert encode_split(obj) is None
    obj = {"metadata": {"name": "a", "resourceVersion": "", "labels": {}}}  # not the last metadata field
    assert encode_split(obj) is None
    assert encode_split({"metadata": {"resourceVersion": ""}}) is None  # the only one: not cut


@pytest.mark.parametrize("meta", [{"name": "a"}, {"name": "a", "labels": {"resourceVersion": "x"}},
                                  {"annotations": {"a": '","resourceVersion":"7"}'}, "name": "é\u2028"}])
def test_the_stored_form_is_cut_from_the_served_bytes_exactly(meta: dict[str, Any]) -> None:
    obj = {"kind": "Event", "metadata": {**meta, "resourceVersion": "7"}, "data": {"x": [1.5, None, "y"]}}
    raw = orjson.dumps(obj)
    assert stored_of_served(raw, obj, 7) == encode(obj)


@pytest.mark.parametrize("obj", [
    # the field's text twice: the metadata's and the involved object's
    {"metadata": {"name": "a", "resourceVersion": "7"}, "involvedObject": {"uid": "u", "resourceVersion": "7"}},
    {"metadata": {"resourceVersion": "7"}},  # no field before it
    {"metadata": {"resourceVersion": "7", "name": "a"}},  # not the last field
    {"metadata": {"name": "a", "resourceVersion": "8"}},  # another revision
    {"metadata": "a"},
])
def test_served_bytes_that_could_be_cut_elsewhere_are_not_cut(obj: dict[str, Any]) -> None:
    assert stored_of_served(orjson.dumps(obj), obj, 7) is None
