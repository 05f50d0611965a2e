"""kinformer.names: apimachinery's name rules and their messages."""

from __future__ import annotations

import pytest

from kinformer.names import (
    is_config_map_key,
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_path_segment_name,
    is_qualified_name,
    is_valid_label_value,
)


@pytest.mark.parametrize("check", [is_dns1123_label, is_dns1123_subdomain, is_dns1035_label, is_qualified_name,
                                   is_valid_label_value, is_config_map_key])
def test_a_trailing_newline_is_never_valid(check) -> None:
    assert check("abc") == []
    assert check("abc\n") != []


def test_qualified_name_reports_prefix_and_name_problems_together() -> None:
    errors = is_qualified_name("Bad_Prefix/-bad-")
    assert [e.split(" ")[0:2] for e in errors] == [["prefix", "part"], ["name", "part"]]
    assert is_qualified_name("example.com/MyName") == []
    assert is_qualified_name("a/b/c")[0].startswith("a qualified name must consist of")
    assert is_qualified_name("/x") == ["prefix part must be non-empty"]


def test_lengths() -> None:
    assert is_dns1123_label("a" * 63) == [] and is_dns1123_label("a" * 64) == ["must be no more than 63 characters"]
    assert is_dns1123_subdomain("a" * 254)[0] == "must be no more than 253 characters"
    assert is_valid_label_value("") == [] and is_valid_label_value("v" * 64)
    assert is_dns1035_label("1abc") and not is_dns1123_label("1abc")


def test_config_map_keys() -> None:
    assert is_config_map_key("key.name") == []
    assert is_config_map_key("..") == ["must not be '..'"]
    assert is_config_map_key("..x") == ["must not start with '..'"]


def test_path_segment_names() -> None:
    assert is_path_segment_name("system:controller:Any_Thing.1") == []
    assert is_path_segment_name("..") == ["may not be '..'"]
    assert is_path_segment_name("a/b%c") == ["may not contain '/'", "may not contain '%'"]
