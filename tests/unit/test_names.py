"""kinformer.names: apimachinery's name rules and their messages."""

from __future__ import annotations

import pytest

from kinformer.names import (
    all_qualified_names,
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


def test_all_qualified_names_is_true_only_when_each_name_is_valid() -> None:
    """The one-pass check of a list (finalizers) never passes what the per-name check refuses."""
    names = ["example.com/f1", "f", "a.b/c-d_e.F", "x" * 63, "p" * 200 + "/n", "", "-x", "a/b/c", "x" * 64,
             "x\n", "Bad_Prefix/ok", None, 1]
    for name in names:
        single = isinstance(name, str) and is_qualified_name(name) == []
        assert all_qualified_names([name]) <= single, name  # False may still be valid: then ask each
        assert all_qualified_names(["ok", name, "example.com/ok"]) <= single
    assert all_qualified_names([f"example.com/f{i}" for i in range(1000)])
    assert all_qualified_names([])


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
