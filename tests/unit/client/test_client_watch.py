"""Watch stream line splitting and incremental decoding, with random chunk boundaries."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import orjson
import pytest

from kinformer.client.watch import LineSplitter, iter_event_batches, iter_events, iter_lines


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
