"""Transforms and :func:`decoding_transform`: which (ListerWatcher, transform) pair a reflector uses."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from kinformer.cache.fake import FakeSource
from kinformer.cache.reflector import Reflector
from kinformer.cache.transforms import (
    LAST_APPLIED_ANNOTATION,
    _drop_last_applied,
    decoding_transform,
    strip_last_applied,
    strip_managed_fields,
)
from kinformer.client.objects import LazyObject
from kinformer.listwatch import ListOptions, ListResult, TweakedListerWatcher, WatchEvent


class Decoding:
    """A ListerWatcher with a form that decodes without managedFields (or refuses to: ``offer=False``)."""

    def __init__(self, offer: bool = True, dropping: bool = False) -> None:
        self.offer = offer
        self.dropping = dropping

    async def list(self, options: ListOptions) -> ListResult:
        return ListResult([], "1")

    def watch(self, options: ListOptions) -> AsyncIterator[WatchEvent]:
        raise NotImplementedError

    def without_managed_fields(self) -> Decoding | None:
        return Decoding(dropping=True) if self.offer else None


def test_the_default_transforms_move_into_a_list_watcher_that_offers_it() -> None:
    lw = Decoding()
    used, rest = decoding_transform(lw, strip_managed_fields)
    assert isinstance(used, Decoding) and used.dropping and rest is None
    used, rest = decoding_transform(lw, strip_last_applied)
    assert isinstance(used, Decoding) and used.dropping and rest is _drop_last_applied


def test_a_user_transform_or_a_list_watcher_without_the_form_keeps_the_plain_path() -> None:
    def mine(obj: Any) -> Any:
        return obj

    lw = Decoding()
    for transform in (mine, None, lambda obj: strip_managed_fields(obj)):
        assert decoding_transform(lw, transform) == (lw, transform)
    refusing = Decoding(offer=False)
    assert decoding_transform(refusing, strip_managed_fields) == (refusing, strip_managed_fields)
    fake = FakeSource().lister_watcher()  # no such method at all
    assert decoding_transform(fake, strip_managed_fields) == (fake, strip_managed_fields)


def test_a_tweaked_list_watcher_forwards_the_form_of_the_one_it_wraps() -> None:
    def tweak(options: ListOptions) -> None:
        options.label_selector = "a=b"

    used, rest = decoding_transform(TweakedListerWatcher(Decoding(), tweak), strip_managed_fields)
    assert isinstance(used, TweakedListerWatcher) and used.tweak is tweak and rest is None
    assert isinstance(used.lw, Decoding) and used.lw.dropping
    plain = TweakedListerWatcher(FakeSource().lister_watcher(), tweak)
    assert plain.without_managed_fields() is None
    assert decoding_transform(plain, strip_managed_fields) == (plain, strip_managed_fields)


def test_the_reflector_uses_the_pair() -> None:
    lw = Decoding()
    reflector = Reflector(lw, None, transform=strip_managed_fields)  # type: ignore[arg-type]
    assert isinstance(reflector.lw, Decoding) and reflector.lw.dropping and reflector.transform is None
    mine = Reflector(lw, None, transform=len)  # type: ignore[arg-type]
    assert mine.lw is lw and mine.transform is len


def test_what_is_left_of_strip_last_applied_is_the_annotation_drop() -> None:
    raw = b'{"metadata":{"name":"a","annotations":{"%s":"{}","keep":"1"}}}' % LAST_APPLIED_ANNOTATION.encode()
    obj = LazyObject(raw)
    assert _drop_last_applied(obj).to_json() == strip_last_applied(obj).to_json()
    assert dict(_drop_last_applied(obj)["metadata"]) == {"name": "a", "annotations": {"keep": "1"}}
    plain = LazyObject(b'{"metadata":{"name":"b"}}')
    assert _drop_last_applied(plain) is plain
