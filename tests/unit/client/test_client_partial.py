"""PartialObjectMetadata cut from whole objects (a server that ignores ``as=``), in one pass and losslessly."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from kinformer.client.objects import LazyObject
from kinformer.client.partial import _partial_by_cutting, partial_from_raw, to_partial_object_metadata
from kinformer.client.watch import decode_partial_watch_line, iter_events

FIXTURE = json.loads((Path(__file__).parents[3] / "bench" / "pod-realistic.json").read_text())


def expected(obj: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}


def test_whole_object_is_cut_to_its_metadata_with_fast_fields() -> None:
    raw = orjson.dumps(FIXTURE)
    md = FIXTURE["metadata"]
    fresh = partial_from_raw(raw)
    assert fresh.key == f"{md['namespace']}/{md['name']}" and fresh._data is None and fresh._md is None
    partial = partial_from_raw(raw)
    assert partial == expected(FIXTURE) and set(partial) == {"kind", "apiVersion", "metadata"}
    # the same bytes as cutting the metadata out raw: ObjectMeta's order kept, managedFields last
    assert partial.to_json() == _partial_by_cutting(raw).to_json()
    assert partial.resource_version == md["resourceVersion"] and partial.has_managed_fields
    stripped = partial.without_managed_fields()
    assert "managedFields" not in stripped["metadata"] and stripped["metadata"]["labels"] == md["labels"]


def test_object_without_managed_fields_or_metadata() -> None:
    obj = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "a", "namespace": "ns", "labels": {}},
           "data": {"k": "v"}}
    partial = partial_from_raw(orjson.dumps(obj))
    assert partial == expected(obj) and not partial.has_managed_fields and partial.key == "ns/a"
    assert to_partial_object_metadata({"kind": "X", "metadata": {}}) == expected({"metadata": {}})
    assert to_partial_object_metadata({"kind": "X"})["metadata"] == {}
    assert to_partial_object_metadata({"kind": "X", "metadata": None})["metadata"] is None


def test_unknown_metadata_field_takes_the_general_path_losslessly() -> None:
    obj = {"kind": "ConfigMap", "metadata": {"name": "a", "futureField": {"x": [1, 2]}, "managedFields": []}}
    partial = to_partial_object_metadata(LazyObject(orjson.dumps(obj)))
    assert partial == expected(obj) and partial.key == "a"


def test_object_the_server_already_cut_is_kept() -> None:
    raw = orjson.dumps(expected(FIXTURE))
    partial = partial_from_raw(raw)
    assert partial._raw is raw and partial == expected(FIXTURE)


def test_watch_line_of_a_whole_object_decodes_as_partial() -> None:
    line = orjson.dumps({"type": "MODIFIED", "object": FIXTURE})
    ev = decode_partial_watch_line(line)
    assert ev.type == "MODIFIED" and ev.object == expected(FIXTURE)
    spaced = json.dumps({"type": "DELETED", "object": FIXTURE}).encode()  # not the exact form: general path
    assert decode_partial_watch_line(spaced).object == expected(FIXTURE)
    bookmark = {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "7"}}
    assert decode_partial_watch_line(orjson.dumps({"type": "BOOKMARK", "object": bookmark})).object == bookmark
    status = {"kind": "Status", "code": 410}
    assert decode_partial_watch_line(orjson.dumps({"type": "ERROR", "object": status})).object == status
    with pytest.raises(ValueError):
        decode_partial_watch_line(b'{"type":"ADDED","object":{"metadata":{"name":1}')


async def _agen(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


async def test_iter_events_as_metadata_cuts_every_object_event() -> None:
    objs = [dict(FIXTURE, metadata=dict(FIXTURE["metadata"], name=f"p{i}")) for i in range(5)]
    data = b"".join(orjson.dumps({"type": "ADDED", "object": o}) + b"\n" for o in objs)
    chunks = [data[i:i + 1000] for i in range(0, len(data), 1000)]
    got = [ev.object async for ev in iter_events(_agen(chunks), as_metadata=True)]
    assert got == [expected(o) for o in objs]
    assert [ev.object async for ev in iter_events(_agen(chunks))] == objs


# -- managedFields dropped while cutting down (drop_managed_fields): the very object cut-then-strip makes --------

def assert_same(got: LazyObject, expected_obj: LazyObject) -> None:
    assert got.to_json() == expected_obj.to_json() and got == expected_obj
    assert (got._key, got._name, got._ns, got._rv) == (expected_obj._key, expected_obj._name, expected_obj._ns,
                                                       expected_obj._rv)
    assert not got.has_managed_fields


PARTIAL_CASES = {
    "realistic pod": FIXTURE,
    "no managedFields": {"kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}, "data": {"k": "v"}},
    "managedFields only": {"kind": "ConfigMap", "metadata": {"managedFields": [{"manager": "m"}]}},
    "annotation named managedFields": {"kind": "ConfigMap", "metadata": {
        "name": "a", "annotations": {"managedFields": "x"}, "managedFields": [{"manager": "m"}]}},
    "owner reference holding the key": {"kind": "ConfigMap", "metadata": {
        "name": "a", "ownerReferences": [{"managedFields": [1]}], "managedFields": [1]}},
    "unknown metadata field": {"kind": "ConfigMap", "metadata": {"name": "a", "future": 1, "managedFields": []}},
    "no metadata": {"kind": "ConfigMap"},
    "already partial": expected(FIXTURE),
}


@pytest.mark.parametrize("case", sorted(PARTIAL_CASES))
def test_partial_dropping_managed_fields_is_partial_then_strip(case: str) -> None:
    raw = orjson.dumps(PARTIAL_CASES[case])
    got = partial_from_raw(raw, drop_managed_fields=True)
    assert_same(got, partial_from_raw(raw).without_managed_fields())
    assert_same(to_partial_object_metadata(LazyObject(raw), drop_managed_fields=True), got)
    assert "managedFields" not in (got["metadata"] or {})


def test_watch_line_as_partial_dropping_managed_fields() -> None:
    for line in (orjson.dumps({"type": "MODIFIED", "object": FIXTURE}),  # the exact form
                 json.dumps({"type": "DELETED", "object": FIXTURE}).encode()):  # the general path
        ev = decode_partial_watch_line(line, drop_managed_fields=True)
        assert_same(ev.object, decode_partial_watch_line(line).object.without_managed_fields())
    bookmark = {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "7", "managedFields": []}}
    line = orjson.dumps({"type": "BOOKMARK", "object": bookmark})
    assert decode_partial_watch_line(line, drop_managed_fields=True).object == bookmark  # as it came


async def test_iter_events_as_metadata_dropping_managed_fields() -> None:
    objs = [dict(FIXTURE, metadata=dict(FIXTURE["metadata"], name=f"p{i}")) for i in range(5)]
    data = b"".join(orjson.dumps({"type": "ADDED", "object": o}) + b"\n" for o in objs)
    chunks = [data[i:i + 1000] for i in range(0, len(data), 1000)]
    got = [ev.object async for ev in iter_events(_agen(chunks), as_metadata=True, drop_managed_fields=True)]
    kept = [ev.object async for ev in iter_events(_agen(chunks), as_metadata=True)]
    assert len(got) == len(kept) == 5
    for cut, whole in zip(got, kept, strict=True):
        assert whole.has_managed_fields
        assert_same(cut, whole.without_managed_fields())
