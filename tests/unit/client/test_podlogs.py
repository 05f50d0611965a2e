"""The pods/log query and the splitting of a log stream into lines."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kinformer.client.podlogs import iter_lines, log_params


def test_log_params_spell_kubectls_flags_as_the_api_does() -> None:
    assert log_params() == {}
    assert log_params(container="web", follow=True, since_seconds=60, tail_lines=0, previous=True, timestamps=True,
                      limit_bytes=10) == {"container": "web", "sinceSeconds": "60", "tailLines": "0",
                                          "limitBytes": "10", "follow": "true", "previous": "true",
                                          "timestamps": "true"}
    assert log_params(since_time="2026-01-01T00:00:00Z") == {"sinceTime": "2026-01-01T00:00:00Z"}


@pytest.mark.parametrize("options", [{"since_seconds": 0}, {"tail_lines": -1}, {"limit_bytes": 0},
                                     {"since_seconds": 5, "since_time": "2026-01-01T00:00:00Z"}])
def test_invalid_log_options_are_refused_before_any_request(options: dict) -> None:
    with pytest.raises(ValueError):
        log_params(**options)


async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def test_lines_split_across_chunks_and_a_last_line_without_newline() -> None:
    got = [line async for line in iter_lines(chunks(b"one\ntw", b"o\n\nthr\xc3", b"\xa9e\xff\nlast"))]
    assert got == ["one", "two", "", "thr\u00e9e\ufffd", "last"]


async def test_a_line_without_end_is_yielded_in_bounded_pieces() -> None:
    got = [line async for line in iter_lines(chunks(b"x" * 10, b"x" * 5 + b"\n"), max_line=4)]
    assert got == ["xxxx", "xxxx", "xxxx", "xxx"]
