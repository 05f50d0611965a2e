"""DefaultStorageClass admission: the newest default class, only for claims that ask for none."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kinformer.server.admission.defaultstorageclass import SC_PREFIX, default_class_name, default_storage_class


def sc(name: str, created: str, default: str | None = "true", *, beta: bool = False) -> dict[str, Any]:
    key = "storageclass.beta.kubernetes.io/is-default-class" if beta else "storageclass.kubernetes.io/is-default-class"
    annotations = {key: default} if default is not None else {}
    return {"metadata": {"name": name, "creationTimestamp": created, "annotations": annotations}}


def test_the_newest_default_class_wins_then_the_first_by_name() -> None:
    day1, day2 = "2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z"
    assert default_class_name([sc("plain", day2, None), sc("no", day2, "false")]) is None
    assert default_class_name([sc("old", day1), sc("new", day2, beta=True)]) == "new"
    assert default_class_name([sc("b", day2), sc("a", day2), sc("older", day1)]) == "a"


def test_only_a_claim_asking_for_no_class_gets_the_default() -> None:
    cache = SimpleNamespace(buckets={SC_PREFIX: SimpleNamespace(objects={
        "k": SimpleNamespace(obj=sc("std", "2024-01-01T00:00:00Z"))})})
    claims = [{"spec": {}}, {"spec": {"storageClassName": None}}, {"spec": {"storageClassName": ""}},
              {"spec": {"storageClassName": "fast"}},
              {"metadata": {"annotations": {"volume.beta.kubernetes.io/storage-class": "slow"}}, "spec": {}}]
    for claim in claims:
        default_storage_class(cache, claim)  # type: ignore[arg-type]
    assert [c["spec"].get("storageClassName") for c in claims] == ["std", "std", "", "fast", None]
    empty = {"spec": {}}
    default_storage_class(SimpleNamespace(buckets={}), empty)  # type: ignore[arg-type]
    assert empty == {"spec": {}}
