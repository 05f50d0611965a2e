"""FakeSource behaves as an API server does where informers can tell the difference."""

from __future__ import annotations

from collections.abc import AsyncIterator

from kinformer.cache.fake import FakeSource
from kinformer.listwatch import ListOptions, WatchEvent


def cm(name: str, value: str = "0") -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "ns"}, "data": {"v": value}}


async def _next(watch: AsyncIterator[WatchEvent], n: int) -> list[tuple[str, str]]:
    return [(event.type, event.object["metadata"]["resourceVersion"]) for event in [await anext(watch)
                                                                                     for _ in range(n)]]


async def test_a_bookmark_is_sent_at_the_resource_version_the_watch_has_reached() -> None:
    """Asked for before later changes reach the watch, a bookmark still never goes below an event sent before it
    (a reflector resuming from it would otherwise replay those events)."""
    src = FakeSource()
    src.create(cm("a"))
    watch = src.watch(ListOptions(resource_version="1", allow_watch_bookmarks=True))
    src.put(cm("a", "1"))
    assert await _next(watch, 1) == [("MODIFIED", "2")]
    src.bookmark()
    src.put(cm("a", "2"))
    src.put(cm("a", "3"))
    assert await _next(watch, 3) == [("MODIFIED", "3"), ("MODIFIED", "4"), ("BOOKMARK", "4")]
    await watch.aclose()  # type: ignore[attr-defined]


async def test_a_bookmark_at_a_given_resource_version_is_sent_as_given() -> None:
    src = FakeSource()
    src.create(cm("a"))
    watch = src.watch(ListOptions(resource_version="1", allow_watch_bookmarks=True))
    src.put(cm("a", "1"))
    assert await _next(watch, 1) == [("MODIFIED", "2")]
    src.bookmark("garbage")
    src.put(cm("a", "2"))
    assert await _next(watch, 2) == [("MODIFIED", "3"), ("BOOKMARK", "garbage")]
    await watch.aclose()  # type: ignore[attr-defined]
