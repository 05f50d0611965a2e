"""kinformer.cluster.controllers.refs: the owners' selectors."""

from __future__ import annotations

import pytest

from kinformer.cluster.controllers import refs
from kinformer.errors import SelectorError
from kinformer.selectors import label_selector_from_dict


def test_selector_from_parses_once_per_distinct_selector_and_answers_as_the_parser() -> None:
    raws = [None, {}, {"matchLabels": {"app": "x"}}, {"matchLabels": {"app": "x", "tier": "web"}},
            {"matchExpressions": [{"key": "app", "operator": "In", "values": ["x", "y"]}]}]
    for raw in raws:
        first = refs.selector_from(raw)
        assert first == label_selector_from_dict(raw) and str(first) == str(label_selector_from_dict(raw))
        assert refs.selector_from(None if raw is None else {**raw}) is first  # the same JSON: remembered
    assert refs.selector_from({"matchLabels": {"app": "y"}}) != refs.selector_from({"matchLabels": {"app": "x"}})


def test_selector_from_never_remembers_an_invalid_selector_and_stays_bounded() -> None:
    bad = {"matchExpressions": [{"key": "app", "operator": "Bogus"}]}
    for _ in range(2):
        with pytest.raises(SelectorError):
            refs.selector_from(bad)
    for i in range(refs._SELECTORS_MAX + 10):
        assert refs.selector_from({"matchLabels": {"n": str(i)}}).matches({"n": str(i)})
        assert len(refs._SELECTORS) <= refs._SELECTORS_MAX
