"""What a pod asks of a node and what a node offers, as the scheduler counts them (kube's
``k8s.io/component-helpers/resource``: ``PodRequests`` and the scheduler's ``NodeInfo``).

Amounts are integers: ``cpu`` in millicores, every other resource in its base unit (bytes, devices), each
rounded up as kube's ``MilliValue``/``Value`` round. A pod's request of a resource is the larger of

* its containers' sum plus its restartable init containers' (sidecars') sum, and
* the largest need while an init container runs: that container's request plus the sidecars started
  before it,

plus ``spec.overhead``. ``pods`` is never a request: the scheduler counts pods separately. Not modelled:
pod-level resources (alpha in 1.32) and in-place resize's ``status.containerStatuses[*].allocatedResources``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from kinformer.quantity import parse_quantity

CPU, MEMORY, EPHEMERAL_STORAGE, PODS = "cpu", "memory", "ephemeral-storage", "pods"
#: The scheduler's ``NonZeroRequested``: what a container asking nothing is counted as when scoring.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

Resources = dict[str, int]


def amount(name: str, value: Any) -> int:
    """``value`` (a quantity string or number) of resource ``name`` as an integer (see the module docstring)."""
    parsed = parse_quantity(str(value)) if not isinstance(value, bool) else None
    if parsed is None:
        raise ValueError(f"invalid quantity {value!r} for resource {name!r}")
    quantity = parsed[0] * 1000 if name == CPU else parsed[0]
    return math.ceil(quantity)


def resource_list(values: Mapping[str, Any] | None) -> Resources:
    """A ``ResourceList`` (name -> quantity) as integers."""
    return {name: amount(name, value) for name, value in (values or {}).items()}


def _add(into: Resources, more: Mapping[str, int]) -> None:
    for name, value in more.items():
        into[name] = into.get(name, 0) + value


def _max(into: Resources, other: Mapping[str, int]) -> None:
    for name, value in other.items():
        if value > into.get(name, 0):
            into[name] = value


def _requests(container: Mapping[str, Any]) -> Resources:
    return resource_list((container.get("resources") or {}).get("requests"))


def _init_requests(init_containers: Iterable[Mapping[str, Any]]) -> tuple[Resources, Resources]:
    """(the sidecars' sum, the largest need while one init container runs)."""
    sidecars: Resources = {}
    peak: Resources = {}
    for container in init_containers:
        requests = _requests(container)
        if container.get("restartPolicy") == "Always":
            _add(sidecars, requests)
            _max(peak, sidecars)
        else:
            during = dict(sidecars)
            _add(during, requests)
            _max(peak, during)
    return sidecars, peak


def pod_requests(pod: Mapping[str, Any]) -> Resources:
    """Every resource the pod requests (see the module docstring); zero amounts are kept out."""
    spec = pod.get("spec") or {}
    total: Resources = {}
    for container in spec.get("containers") or ():
        _add(total, _requests(container))
    sidecars, peak = _init_requests(spec.get("initContainers") or ())
    _add(total, sidecars)
    _max(total, peak)
    _add(total, resource_list(spec.get("overhead")))
    total.pop(PODS, None)
    return {name: value for name, value in total.items() if value > 0}


def non_zero_requests(pod: Mapping[str, Any]) -> tuple[int, int]:
    """(milli-cpu, memory) for scoring: a regular container asking no cpu (memory) counts 100m (200Mi)."""
    spec = pod.get("spec") or {}
    cpu = memory = 0
    for container in spec.get("containers") or ():
        requests = _requests(container)
        cpu += requests.get(CPU) or DEFAULT_MILLI_CPU_REQUEST
        memory += requests.get(MEMORY) or DEFAULT_MEMORY_REQUEST
    overhead = resource_list(spec.get("overhead"))
    requests = pod_requests(pod)
    return (max(cpu + overhead.get(CPU, 0), requests.get(CPU, 0)),
            max(memory + overhead.get(MEMORY, 0), requests.get(MEMORY, 0)))


def allocatable(node: Mapping[str, Any]) -> Resources:
    """The node's ``status.allocatable`` (its ``capacity`` where allocatable is absent), as integers."""
    status = node.get("status") or {}
    return resource_list(status.get("allocatable") or status.get("capacity"))
