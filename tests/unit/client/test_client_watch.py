"""Watch stream line splitting and incremental decoding, with random chunk boundaries."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from kinformer.client.objects import LazyObject
from kinformer.client.watch import LineSplitter, decode_watch_line, iter_event_batches, iter_events, iter_lines


def split_all(chunks: list[bytes]) -> list[bytes]:
    s = LineSplitter()
    out: list[bytes] = []
    for c in chunks:
        out.extend(s.feed(c))
    rest = s.flush()
    if rest:
        out.append(rest)
    return out


def random_chunks(data: bytes, rng: random.Random, max_size: int) -> list[bytes]:
    chunks, i = [], 0
    while i < len(data):
        n = rng.randint(1, max_size)
        chunks.append(data[i:i + n])
        i += n
    return chunks


@pytest.mark.parametrize("seed", range(8))
def test_random_chunking_preserves_lines(seed: int) -> None:
    rng = random.Random(seed)
    lines = [bytes(rng.choice(b"abcdefgh{}\":,") for _ in range(rng.choice([1, 5, 50, 3000])))
             for _ in range(200)]
    data = b"\n".join(lines) + b"\n"
    for max_size in (1, 7, 100, 5000, 70000):
        assert split_all(random_chunks(data, rng, max_size)) == lines


def test_huge_lines_split_over_many_chunks() -> None:
    rng = random.Random(1)
    big = b"x" * (3 * 1024 * 1024 + 17)
    lines = [b"small", big, b"mid" * 1000, big + b"y"]
    data = b"\n".join(lines) + b"\n"
    assert split_all(random_chunks(data, rng, 65536)) == lines
    assert split_all([data]) == lines


def test_partial_last_line_and_empty_lines() -> None:
    s = LineSplitter()
    assert s.feed(b"ab") == []
    assert s.feed(b"c\n\nde") == [b"abc"]
    assert s.feed(b"") == []
    assert s.feed(b"\n") == [b"de"]
    assert s.feed(b"\n\n") == []
    assert s.feed(b"tail") == []
    assert s.flush() == b"tail"
    assert s.flush() == b""


async def _agen(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for c in chunks:
        yield c


async def test_iter_lines_yields_unterminated_tail() -> None:
    assert [x async for x in iter_lines(_agen([b"a\nb", b"c"]))] == [b"a", b"bc"]


async def test_iter_events_decodes_each_line_once_with_random_chunks() -> None:
    rng = random.Random(7)
    events = []
    for i in range(300):
        obj = {"kind": "ConfigMap", "apiVersion": "v1",
               "metadata": {"name": f"cm-{i}", "namespace": "ns", "resourceVersion": str(i)},
               "data": {"k": "v" * rng.choice([1, 100, 200_000])}}
        events.append({"type": rng.choice(["ADDED", "MODIFIED", "DELETED"]), "object": obj})
    events.append({"type": "BOOKMARK", "object": {"kind": "ConfigMap", "apiVersion": "v1",
                                                   "metadata": {"resourceVersion": "999"}}})
    data = b"".join(orjson.dumps(e) + b"\n" for e in events)
    got = [e async for e in iter_events(_agen(random_chunks(data, rng, 40000)))]
    assert [(e.type, e.object) for e in got] == [(e["type"], e["object"]) for e in events]
    assert got[-1].object.resource_version == "999"


async def test_iter_events_bad_line_raises_value_error() -> None:
    agen = iter_events(_agen([b'{"type":"ADDED","object":{}}\n', b"not json\n"]))
    first = await agen.__anext__()
    assert first.type == "ADDED"
    with pytest.raises(ValueError):
        await agen.__anext__()


async def test_iter_event_batches_yields_one_list_per_chunk_that_completes_lines() -> None:
    def line(name: str, rv: int) -> bytes:
        obj = {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)}}
        return orjson.dumps({"type": "MODIFIED", "object": obj}) + b"\n"

    a, b, c = line("a", 1), line("b", 2), line("c", 3)
    chunks = [a + b + c[:5], c[5:20], c[20:], b"\n"]  # a chunk with no line end, a blank line at the end
    batches = [[(e.type, e.object["metadata"]["name"]) for e in batch]
               async for batch in iter_event_batches(_agen(chunks))]
    assert batches == [[("MODIFIED", "a"), ("MODIFIED", "b")], [("MODIFIED", "c")]]


# -- managedFields cut while decoding (drop_managed_fields) ------------------------------------------------------

POD = json.loads((Path(__file__).resolve().parents[3] / "bench" / "pod-realistic.json").read_text())
BOOKMARK = {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "9", "managedFields": []}}
STATUS = {"kind": "Status", "apiVersion": "v1", "code": 410, "reason": "Expired", "metadata": {}}


def assert_same_object(got: Any, expected: Any) -> None:
    assert type(got) is type(expected) and got == expected
    if isinstance(got, LazyObject):
        assert got.to_json() == expected.to_json() and got.key == expected.key
        assert got.resource_version == expected.resource_version


def stripped_event(line: bytes) -> tuple[str, Any]:
    """What the informer's default transform made of the line's event: object events' objects stripped."""
    ev = decode_watch_line(line)
    obj = ev.object
    return ev.type, obj.without_managed_fields() if ev.type in ("ADDED", "MODIFIED", "DELETED") else obj


LINES = {
    "exact form": orjson.dumps({"type": "MODIFIED", "object": POD}),
    "general form": json.dumps({"type": "ADDED", "object": POD}).encode(),
    "members swapped": orjson.dumps({"object": POD, "type": "DELETED"}),
    "no managedFields": orjson.dumps({"type": "ADDED", "object": {"metadata": {"name": "a", "namespace": "n"}}}),
    "no metadata": orjson.dumps({"type": "ADDED", "object": {"kind": "K"}}),
    "bookmark": orjson.dumps({"type": "BOOKMARK", "object": BOOKMARK}),
    "error": orjson.dumps({"type": "ERROR", "object": STATUS}),
    "unknown type": orjson.dumps({"type": "SOMETHING", "object": POD}),
}


@pytest.mark.parametrize("case", sorted(LINES))
def test_decode_watch_line_drop_managed_fields_is_decode_then_strip(case: str) -> None:
    line = LINES[case]
    ev = decode_watch_line(line, drop_managed_fields=True)
    kind, expected = stripped_event(line)
    assert ev.type == kind
    assert_same_object(ev.object, expected)


def test_drop_managed_fields_cuts_object_events_only() -> None:
    cut = decode_watch_line(LINES["exact form"], drop_managed_fields=True).object
    assert not cut.has_managed_fields and cut == {**POD, "metadata": {
        k: v for k, v in POD["metadata"].items() if k != "managedFields"}}
    assert type(cut._raw) is bytes  # its own bytes: the line is not kept alive by the cached object
    assert decode_watch_line(LINES["exact form"]).object.has_managed_fields  # the flag off: as it came
    bookmark = decode_watch_line(LINES["bookmark"], drop_managed_fields=True).object
    assert bookmark["metadata"]["managedFields"] == []  # bookmarks are not objects to cache: as they came
    with pytest.raises(ValueError):
        decode_watch_line(b'{"type":"ADDED","object":', drop_managed_fields=True)


async def test_iter_event_batches_drop_managed_fields_on_and_off_with_random_chunks() -> None:
    rng = random.Random(3)
    lines = [LINES[rng.choice(sorted(LINES))] for _ in range(60)]
    data = b"\n".join(lines)  # the last line unterminated: the flushed rest is decoded the same way
    chunks = random_chunks(data, rng, 5000)
    got = [ev for batch in [b async for b in iter_event_batches(_agen(chunks), drop_managed_fields=True)]
           for ev in batch]
    assert len(got) == len(lines)
    for ev, line in zip(got, lines, strict=True):
        kind, expected = stripped_event(line)
        assert ev.type == kind
        assert_same_object(ev.object, expected)
    plain = [ev async for ev in iter_events(_agen(chunks))]  # the flag off: every object as it came
    assert [(ev.type, ev.object) for ev in plain] == [(e.type, e.object) for e in map(decode_watch_line, lines)]
    assert any(isinstance(ev.object, LazyObject) and ev.object.has_managed_fields for ev in plain)
