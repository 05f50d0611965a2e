"""set_condition by the metav1.Condition rules."""

from __future__ import annotations

import pytest

import kinformer as ki
from kinformer.clock import FakeClock
from kinformer.controller.conditions import find_condition, remove_condition


def test_lifecycle_of_one_condition() -> None:
    clock = FakeClock(wall_start=1_700_000_000.0)
    status: dict = {}
    assert ki.set_condition(status, type="Ready", status="False", reason="Pending", clock=clock)
    first = dict(find_condition(status, "Ready"))
    assert first == {"type": "Ready", "status": "False", "reason": "Pending", "message": "",
                     "lastTransitionTime": "2023-11-14T22:13:20Z"}
    clock.step(60)
    # same status, new reason/message/generation: updated in place, the transition time kept
    assert ki.set_condition(status, type="Ready", status="False", reason="Waiting", message="m",
                            observed_generation=3, clock=clock)
    cond = find_condition(status, "Ready")
    assert cond["lastTransitionTime"] == first["lastTransitionTime"]
    assert (cond["reason"], cond["message"], cond["observedGeneration"]) == ("Waiting", "m", 3)
    assert not ki.set_condition(status, type="Ready", status="False", reason="Waiting", message="m",
                                observed_generation=3, clock=clock)
    clock.step(60)
    assert ki.set_condition(status, type="Ready", status="True", reason="Copied", clock=clock)
    cond = find_condition(status, "Ready")
    assert cond["lastTransitionTime"] == "2023-11-14T22:15:20Z" and cond["observedGeneration"] == 3


def test_conditions_are_keyed_by_type_in_order() -> None:
    status: dict = {"conditions": []}
    ki.set_condition(status, type="Ready", status="True", reason="Ok")
    ki.set_condition(status, type="Degraded", status="False", reason="Ok")
    ki.set_condition(status, type="Ready", status="Unknown", reason="Lost")
    assert [c["type"] for c in status["conditions"]] == ["Ready", "Degraded"]
    assert remove_condition(status, "Ready") and not remove_condition(status, "Ready")
    assert [c["type"] for c in status["conditions"]] == ["Degraded"]


@pytest.mark.parametrize("kwargs", [dict(type="Ready", status="yes", reason="Ok"),
                                    dict(type="Ready", status="True", reason=""),
                                    dict(type="Ready", status="True", reason="not camel"),
                                    dict(type="", status="True", reason="Ok")])
def test_invalid_conditions_are_refused(kwargs) -> None:
    with pytest.raises(ValueError):
        ki.set_condition({}, **kwargs)


async def test_condition_round_trips_through_the_status_subresource(kube_client) -> None:
    ns = await kube_client.get("namespaces", "default")
    body = ns.to_dict()
    status = body.setdefault("status", {})
    ki.set_condition(status, type="Example", status="True", reason="Tested")
    stored = await kube_client.replace_status("namespaces", body)
    cond = find_condition(stored["status"], "Example")
    assert cond is not None and cond["status"] == "True" and cond["lastTransitionTime"]
