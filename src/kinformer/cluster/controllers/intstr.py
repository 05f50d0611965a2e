"""IntOrString values as the controllers scale them: kube's ``intstr.GetScaledValueFromIntOrPercent``
(apimachinery 1.32), the one home of that rule for maxSurge/maxUnavailable (Deployment, DaemonSet) and
minAvailable/maxUnavailable (PodDisruptionBudget).

* an int is itself; ``"N%"`` is N percent of ``total``, rounded up or down as the caller asks;
* a string without ``%``, or whose number is not an integer, raises ValueError with kube's message
  (``invalid value for IntOrString: ...``);
* a missing value (None) counts as 0: the API defaults these fields, a missing one means "none allowed".
"""

from __future__ import annotations

import math

__all__ = ["scaled_value"]


def scaled_value(value: int | str | None, total: int, round_up: bool) -> int:
    """``GetScaledValueFromIntOrPercent(value, total, round_up)``."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    if not value.endswith("%"):
        raise ValueError("invalid value for IntOrString: invalid type: string is not a percentage")
    try:
        percent = int(value[:-1])
    except ValueError:
        raise ValueError(f'invalid value for IntOrString: invalid value "{value}": '
                         f'strconv.Atoi: parsing "{value[:-1]}": invalid syntax') from None
    exact = percent * total / 100
    return math.ceil(exact) if round_up else math.floor(exact)
