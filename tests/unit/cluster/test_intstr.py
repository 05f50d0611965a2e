"""intstr.GetScaledValueFromIntOrPercent, as the deployment, daemonset and disruption controllers scale
maxSurge, maxUnavailable and minAvailable."""

from __future__ import annotations

import pytest

from kinformer.cluster.controllers.intstr import scaled_value


def test_an_int_is_itself() -> None:
    assert scaled_value(2, 10, True) == 2 and scaled_value(2, 10, False) == 2


@pytest.mark.parametrize(("value", "total", "up", "down"), [("50%", 3, 2, 1), ("10%", 10, 1, 1), ("10%", 5, 1, 0),
                                                           ("25%", 10, 3, 2), ("0%", 7, 0, 0)])
def test_percentages_round_up_or_down(value: str, total: int, up: int, down: int) -> None:
    assert scaled_value(value, total, True) == up
    assert scaled_value(value, total, False) == down


def test_a_missing_value_is_zero() -> None:
    assert scaled_value(None, 10, True) == 0


@pytest.mark.parametrize(("value", "message"), [("ten", "invalid type: string is not a percentage"),
                                                ("x%", 'invalid value "x%"')])
def test_a_bad_value_is_a_clear_error(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"invalid value for IntOrString: .*{message}"):
        scaled_value(value, 10, True)
