"""The strategy hook points of the generic write path (kube-apiserver's registry strategies)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from kinformer.server.machinery import status as st
from kinformer.server.registry.objects import ObjectStore
from kinformer.server.registry.resources import Registry, ResourceInfo
from kinformer.server.registry.strategy import DEFAULT_STRATEGY, DefaultStrategy, StrategyRegistry
from kinformer.server.storage.memory import MemoryStorage


class NoGeneration(DefaultStrategy):
    """Like a ConfigMap: no generation; ``data.locked`` may not change."""

    returns_deleted_object = True

    def __init__(self) -> None:
        self.calls: list[str] = []

    def prepare_for_create(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        self.calls.append("create")
        obj.setdefault("data", {})["defaulted"] = "yes"

    def prepare_for_update(self, info: ResourceInfo, obj: dict[str, Any], old: Mapping[str, Any]) -> None:
        self.calls.append("update")

    def validate(self, info: ResourceInfo, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [{"reason": "FieldValueInvalid", "field": "data.bad", "message": "Invalid value"}] \
            if "bad" in obj.get("data", {}) else []

    def validate_update(self, info: ResourceInfo, obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[Any]:
        if obj.get("data", {}).get("locked") != old.get("data", {}).get("locked"):
            return [{"reason": "FieldValueInvalid", "field": "data.locked", "message": "field is immutable"}]
        return []


def store_and_info(plural: str) -> tuple[ObjectStore, ResourceInfo]:
    registry = Registry()
    info = registry.get("", "v1", plural)
    assert info is not None
    return ObjectStore(MemoryStorage(), registry), info


def test_registry_falls_back_to_the_default_strategy():
    registry = StrategyRegistry()
    _, info = store_and_info("configmaps")
    assert registry.get(info) is DEFAULT_STRATEGY
    custom = NoGeneration()
    registry.register("", "configmaps", custom)
    assert registry.get(info) is custom


def test_default_strategy_sets_and_bumps_generation():
    store, info = store_and_info("configmaps")
    store.strategies = StrategyRegistry()  # the generic rules alone (configmaps' own strategy has no generation)
    obj = store.prepare_create(info, "default", {"metadata": {"name": "a", "generation": 7}, "data": {"k": "1"}})
    assert obj["metadata"]["generation"] == 1
    old = {**obj, "metadata": {**obj["metadata"], "resourceVersion": "5"}}
    same = store.prepare_update(info, old, {"metadata": {"name": "a", "generation": 9}, "data": {"k": "1"}})
    assert same["metadata"]["generation"] == 1
    changed = store.prepare_update(info, old, {"metadata": {"name": "a"}, "data": {"k": "2"}})
    assert changed["metadata"]["generation"] == 2


def test_kind_strategy_runs_at_each_hook_point():
    store, info = store_and_info("configmaps")
    strategy = NoGeneration()
    store.strategies.register("", "configmaps", strategy)
    obj = store.prepare_create(info, "default", {"metadata": {"name": "a", "generation": 3}, "data": {"locked": "x"}})
    assert "generation" not in obj["metadata"] and obj["data"]["defaulted"] == "yes"
    store.validate(info, obj)
    with pytest.raises(st.StatusError) as e:
        store.validate(info, {**obj, "data": {"bad": "1"}})
    assert e.value.code == 422
    new = store.prepare_update(info, obj, {"metadata": {"name": "a"}, "data": {"locked": "y"}})
    assert "generation" not in new["metadata"]
    with pytest.raises(st.StatusError) as e:
        store.validate(info, new, obj)
    assert e.value.code == 422 and "immutable" in str(e.value.status())
    store.prepare_update(info, obj, {"metadata": {"name": "a"}, "data": {"locked": "x"}}, subresource="status")
    assert strategy.calls == ["create", "update"]  # subresource writes skip prepare_for_update
