"""json_copy: an exact, independent deep copy of decoded API objects."""

from __future__ import annotations

from collections import OrderedDict

from kinformer.server.machinery.jsoncopy import json_copy


def test_json_data_is_copied_deeply_with_the_same_types():
    obj = {"a": [1, 1.5, True, None, "s", {"b": {}}], "c": {"d": [[]]}}
    copied = json_copy(obj)
    assert copied == obj and type(copied["a"][1]) is float and copied["a"][2] is True
    copied["a"][5]["b"]["new"] = 1
    assert obj["a"][5]["b"] == {}


def test_values_json_cannot_hold_fall_back_to_deepcopy():
    big = {"n": 10**30, "k": OrderedDict(x=1)}
    copied = json_copy(big)
    assert copied == big and copied is not big and type(copied["k"]) is OrderedDict
    assert json_copy({1: "non-string key"}) == {1: "non-string key"}
