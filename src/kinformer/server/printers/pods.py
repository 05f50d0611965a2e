"""The Pod printer: READY / STATUS / RESTARTS folded from container statuses as kubectl shows them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..endpoints.table_cells import (
    NONE,
    age_of,
    as_int,
    as_list,
    as_map,
    field,
    human_duration,
    name_of,
    parse_time,
)
from .table import AGE, NAME, Doc, Printer, col

_POD_SUCCEEDED = [{"type": "Completed", "status": "True", "reason": "Succeeded",
                   "message": "The pod has completed successfully."}]
_POD_FAILED = [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]


def _restartable(container: Any) -> bool:
    return isinstance(container, Mapping) and container.get("restartPolicy") == "Always"


def _terminated_reason(term: Mapping[str, Any], prefix: str = "") -> str:
    if term.get("reason"):
        return prefix + str(term["reason"])
    if as_int(term.get("signal")):
        return f"{prefix}Signal:{as_int(term.get('signal'))}"
    return f"{prefix}ExitCode:{as_int(term.get('exitCode'))}"


def _condition_true(conditions: Any, type_: str) -> bool:
    return any(isinstance(c, Mapping) and c.get("type") == type_ and c.get("status") == "True"
               for c in as_list(conditions))


class _PodState:
    """Running totals while a pod's container statuses are folded into its READY/STATUS/RESTARTS cells."""

    __slots__ = ("last_restart", "ready", "reason", "restarts")

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.ready = 0
        self.restarts = 0
        self.last_restart: float | None = None

    def count_restarts(self, status: Mapping[str, Any]) -> None:
        self.restarts += as_int(status.get("restartCount"))
        finished = parse_time(field(status, "lastState", "terminated", "finishedAt"))
        if finished is not None and (self.last_restart is None or finished > self.last_restart):
            self.last_restart = finished


def _pod_init(pod: Mapping[str, Any], state: _PodState) -> tuple[bool, _PodState]:
    """Fold init container statuses; returns (initializing, restartable-init-only totals)."""
    spec_init = {c.get("name"): c for c in as_list(field(pod, "spec", "initContainers")) if isinstance(c, Mapping)}
    sidecars = _PodState(state.reason)
    n_init = len(spec_init)
    for i, cs in enumerate(as_list(field(pod, "status", "initContainerStatuses"))):
        if not isinstance(cs, Mapping):
            continue
        state.count_restarts(cs)
        sidecar = _restartable(spec_init.get(cs.get("name")))
        if sidecar:
            sidecars.count_restarts(cs)
        term = field(cs, "state", "terminated")
        waiting = field(cs, "state", "waiting")
        if isinstance(term, Mapping) and as_int(term.get("exitCode")) == 0:
            continue
        if sidecar and cs.get("started") is True:
            if cs.get("ready"):
                state.ready += 1
                sidecars.ready += 1
            continue
        if isinstance(term, Mapping):
            state.reason = _terminated_reason(term, "Init:")
        elif isinstance(waiting, Mapping) and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            state.reason = "Init:" + str(waiting["reason"])
        else:
            state.reason = f"Init:{i}/{n_init}"
        return True, sidecars
    return False, sidecars


def _pod_containers(pod: Mapping[str, Any], state: _PodState) -> None:
    has_running = False
    for cs in reversed(as_list(field(pod, "status", "containerStatuses"))):
        if not isinstance(cs, Mapping):
            continue
        state.count_restarts(cs)
        waiting = field(cs, "state", "waiting")
        term = field(cs, "state", "terminated")
        if isinstance(waiting, Mapping) and waiting.get("reason"):
            state.reason = str(waiting["reason"])
        elif isinstance(term, Mapping):
            state.reason = _terminated_reason(term)
        elif cs.get("ready") and isinstance(field(cs, "state", "running"), Mapping):
            has_running = True
            state.ready += 1
    if state.reason == "Completed" and has_running:
        state.reason = "Running" if _condition_true(field(pod, "status", "conditions"), "Ready") else "NotReady"


def _pod_row(pod: Mapping[str, Any], now: float) -> list[Any]:
    status = as_map(pod.get("status"))
    spec = as_map(pod.get("spec"))
    phase = str(status.get("phase") or "")
    reason = str(status.get("reason") or phase)
    for cond in as_list(status.get("conditions")):
        if isinstance(cond, Mapping) and cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    total = len(as_list(spec.get("containers")))
    total += sum(1 for c in as_list(spec.get("initContainers")) if _restartable(c))
    state = _PodState(reason)
    initializing, sidecars = _pod_init(pod, state)
    if not initializing or _condition_true(status.get("conditions"), "Initialized"):
        sidecars.reason = state.reason
        state = sidecars
        _pod_containers(pod, state)
    if field(pod, "metadata", "deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            state.reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            state.reason = "Terminating"
    restarts = str(state.restarts)
    if state.restarts and state.last_restart is not None:
        restarts = f"{state.restarts} ({human_duration(now - state.last_restart)} ago)"
    ips = as_list(status.get("podIPs"))
    ip = (ips[0].get("ip") if ips and isinstance(ips[0], Mapping) else None) or status.get("podIP") or NONE
    gates = as_list(spec.get("readinessGates"))
    gates_cell = NONE
    if gates:
        conds: dict[Any, Any] = {}
        for c in as_list(status.get("conditions")):
            if isinstance(c, Mapping):
                conds.setdefault(c.get("type"), c.get("status"))  # the first condition of a type counts
        ok = sum(1 for g in gates if isinstance(g, Mapping) and conds.get(g.get("conditionType")) == "True")
        gates_cell = f"{ok}/{len(gates)}"
    return [name_of(pod), f"{state.ready}/{total}", state.reason, restarts, age_of(pod, now), ip,
            spec.get("nodeName") or NONE, status.get("nominatedNodeName") or NONE, gates_cell]


def _pod_conditions(pod: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    phase = field(pod, "status", "phase")
    if phase == "Succeeded":
        return [dict(c) for c in _POD_SUCCEEDED]
    if phase == "Failed":
        return [dict(c) for c in _POD_FAILED]
    return None


POD = Printer((
    NAME,
    col("Ready", description="The aggregate readiness state of this pod for accepting traffic."),
    col("Status", description="The aggregate status of the containers in this pod."),
    col("Restarts", description="The number of times the containers in this pod have been restarted and when the "
                                 "last container in this pod has restarted."),
    AGE,
    col("IP", priority=1, description=Doc("api.core.v1.PodStatus", "podIP")),
    col("Node", priority=1, description=Doc("api.core.v1.PodSpec", "nodeName")),
    col("Nominated Node", priority=1, description=Doc("api.core.v1.PodStatus", "nominatedNodeName")),
    col("Readiness Gates", priority=1, description=Doc("api.core.v1.PodSpec", "readinessGates")),
), _pod_row, _pod_conditions)

