"""Which Host and Origin names a loopback-only server accepts."""

from __future__ import annotations

import pytest

from kinformer.server.filters.hostcheck import _host_of, is_loopback_host


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST", "localhost.", "app.localhost", "127.0.0.1", "127.1.2.3",
                                  "::1", "[::1]"])
def test_loopback_names_and_addresses(host: str) -> None:
    assert is_loopback_host(host)


@pytest.mark.parametrize("host", ["evil.example", "localhost.evil.example", "10.0.0.1", "0.0.0.0", "::", "",
                                  "127.0.0.1.nip.io", "null"])
def test_other_names_are_not_loopback(host: str) -> None:
    assert not is_loopback_host(host)


@pytest.mark.parametrize("header, host", [("localhost:6443", "localhost"), ("127.0.0.1", "127.0.0.1"),
                                          ("[::1]:6443", "::1"), ("[::1]", "::1"), ("evil.example:80", "evil.example"),
                                          ("::1", "::1")])
def test_host_header_forms(header: str, host: str) -> None:
    assert _host_of(header) == host
