"""kube-controller-manager's ``disruption`` controller: the status of each PodDisruptionBudget
(``pkg/controller/disruption``), which the server's ``pods/eviction`` reads and decrements.

Rules carried over from kube 1.32:

* the budget's pods: those of its namespace its ``spec.selector`` matches (an empty selector matches every pod,
  a missing one none); none -> a Normal event ``NoPods`` "No matching pods found";
* ``minAvailable`` as a number: ``desiredHealthy`` is that number and ``expectedPods`` the number of pods;
  ``minAvailable`` as a percentage or ``maxUnavailable`` (number or percentage): ``expectedPods`` is the sum of
  the scales of the pods' controllers (a Deployment's for its ReplicaSets' pods, any other owner's through its
  ``/scale`` subresource, each counted once; the owner must have the controllerRef's UID), percentages rounded
  up, ``desiredHealthy`` = ``minAvailable`` or ``expectedPods - maxUnavailable`` (at least 0); a pod whose
  controller cannot be found fails the sync (Warning ``CalculateExpectedPodCountFailed``); pods without a
  controller are left out and reported (Warning ``UnmanagedPods``);
* ``disruptedPods`` (written by evictions) keeps the pods not yet being deleted whose eviction is younger than
  ``ClusterOptions.pdb_deletion_timeout`` (kube: 2 min): older ones are dropped (Warning ``NotDeleted`` on the
  pod) and the budget is synced again when the youngest expires;
* ``currentHealthy``: Ready pods neither being deleted nor in ``disruptedPods``; ``disruptionsAllowed`` =
  ``currentHealthy - desiredHealthy`` (0 when negative or when no pod is expected); ``observedGeneration``; the
  condition ``DisruptionAllowed`` True/``SufficientPods`` or False/``InsufficientPods``; a failed sync writes
  ``disruptionsAllowed: 0`` with False/``SyncFailed`` and the error as its message, and is retried with backoff.
  The status is written only when it changed, as an update guarded by the resourceVersion.

``unhealthyPodEvictionPolicy`` is applied by the server's eviction, not here. Not carried over: the
DisruptionTarget pod condition and its stale-condition cleanup.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kinformer.controller import Request, Result, maps_any
from kinformer.controller.conditions import set_condition
from kinformer.errors import NotFound
from kinformer.selectors import SelectorError, label_selector_from_dict

from ..cluster import ControllerContext
from ..metatime import parse_time
from ..podutil import is_pod_ready
from .intstr import scaled_value
from .refs import controller_of

__all__ = ["DisruptionReconciler", "setup"]

PDBS = "poddisruptionbudgets.policy"
CONDITION = "DisruptionAllowed"
Obj = Mapping[str, Any]


class SyncFailed(Exception):
    """The expected pod count could not be calculated (the message goes to the SyncFailed condition)."""


def _scaled(value: int | str, total: int) -> int:
    """The budget's IntOrString of ``total``, rounded up (kube's disruption controller); SyncFailed if bad."""
    try:
        return scaled_value(value, total, True)
    except ValueError as err:
        raise SyncFailed(str(err)) from err


def _selector_text(selector: Obj) -> str:
    """The budget's selector as Go's ``%v`` prints a ``*metav1.LabelSelector`` (kube's UnmanagedPods event)."""
    labels = "".join(f"{k}: {v}," for k, v in sorted((selector.get("matchLabels") or {}).items()))
    exprs = ",".join(f"LabelSelectorRequirement{{Key:{e.get('key')},Operator:{e.get('operator')},"
                     f"Values:[{' '.join(e.get('values') or [])}],}}" for e in selector.get("matchExpressions") or ())
    return (f"&LabelSelector{{MatchLabels:map[string]string{{{labels}}},"
            f"MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}")


def selected_pods(pdb: Obj, pods: list[Obj]) -> list[Obj]:
    selector = (pdb.get("spec") or {}).get("selector")
    if selector is None:
        return []
    try:
        match = label_selector_from_dict(selector)
    except SelectorError:
        return []
    return [p for p in pods if match.matches((p.get("metadata") or {}).get("labels") or {})]


def _present(status: Obj) -> dict[str, Any]:
    """``status`` without its empty fields (as the server stores it: kube omits them)."""
    return {k: v for k, v in status.items() if v not in (None, {}, [])}


class DisruptionReconciler:
    """Syncs one PodDisruptionBudget's status (a Request: the budget may be gone)."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.client = ctx.manager.client  # cache reads; the status write is waited for before the next sync
        self.recorder = ctx.recorder("controllermanager")

    async def reconcile(self, request: Request) -> Result | None:
        try:
            pdb = dict(await self.client.get(PDBS, request.name, namespace=request.namespace))
        except NotFound:
            return None
        pods = sorted(selected_pods(pdb, (await self.client.list("pods", namespace=request.namespace)).items),
                      key=lambda p: p["metadata"]["name"])
        if not pods:
            self.recorder.event(pdb, "Normal", "NoPods", "No matching pods found")
        try:
            expected, desired, unmanaged = await self._expected(pdb, pods)
        except SyncFailed as e:
            self.recorder.event(pdb, "Warning", "CalculateExpectedPodCountFailed",
                                f"Failed to calculate the number of expected pods: {e}")
            await self._fail_safe(pdb, str(e))
            raise
        if unmanaged:
            self.recorder.event(pdb, "Warning", "UnmanagedPods",
                                f"Pods selected by this PodDisruptionBudget (selector: "
                                f"{_selector_text((pdb.get('spec') or {}).get('selector') or {})}) were found to be "
                                "unmanaged. As a result, the status of the PDB cannot be calculated correctly, which "
                                "may result in undefined behavior. To account for these pods please set "
                                '".spec.minAvailable" field of the PDB to an integer value.')
        disrupted, recheck = self._disrupted(pdb, pods)
        healthy = sum(1 for p in pods if not p["metadata"].get("deletionTimestamp")
                      and p["metadata"]["name"] not in disrupted and is_pod_ready(p))
        await self._write(pdb, healthy, desired, expected, disrupted)
        return Result(requeue_after=recheck) if recheck is not None else None

    async def _expected(self, pdb: Obj, pods: list[Obj]) -> tuple[int, int, list[str]]:
        """(expectedPods, desiredHealthy, unmanaged pod names), kube's ``getExpectedPodCount``."""
        spec = pdb.get("spec") or {}
        if spec.get("maxUnavailable") is not None:
            expected, unmanaged = await self._expected_scale(pods)
            return expected, max(expected - _scaled(spec["maxUnavailable"], expected), 0), unmanaged
        minimum = spec.get("minAvailable")
        if isinstance(minimum, int):
            return len(pods), minimum, []
        if minimum is not None:
            expected, unmanaged = await self._expected_scale(pods)
            return expected, _scaled(minimum, expected), unmanaged
        return 0, 0, []

    async def _expected_scale(self, pods: list[Obj]) -> tuple[int, list[str]]:
        """The sum of the scales of the pods' controllers (each once) and the pods without one."""
        scales: dict[str, int] = {}
        unmanaged = []
        for pod in pods:
            ref = controller_of(pod)
            if ref is None:
                unmanaged.append(pod["metadata"]["name"])
                continue
            if ref.get("uid") in scales:
                continue
            found = await self._scale_of(ref, pod["metadata"]["namespace"])
            if found is None:
                raise SyncFailed(f'found no controllers for pod "{pod["metadata"]["name"]}"')
            scales[found[0]] = found[1]
        return sum(scales.values()), unmanaged

    async def _scale_of(self, ref: Obj, namespace: str) -> tuple[str, int] | None:
        """(uid, replicas) of the workload ``ref`` names: a Deployment for its ReplicaSets, else the owner's
        ``/scale``; None when it is gone or is another object than the reference's UID."""
        if ref.get("kind") == "ReplicaSet" and str(ref.get("apiVersion", "")).startswith("apps/"):
            try:
                rs = await self.client.get("replicasets", ref["name"], namespace=namespace)
            except NotFound:
                return None
            if rs["metadata"].get("uid") != ref.get("uid"):
                return None
            owner = controller_of(rs)
            if owner is not None and owner.get("kind") == "Deployment":
                ref = owner
        try:
            scale = await self.ctx.client.get(f"{ref['apiVersion']}/{ref['kind']}", ref["name"], namespace=namespace,
                                              subresource="scale")
        except NotFound:
            return None
        except Exception as e:  # no scale subresource, or the kind is not served
            raise SyncFailed(f"{ref.get('kind')} {namespace}/{ref.get('name')}: {e}") from e
        if (scale.get("metadata") or {}).get("uid") != ref.get("uid"):
            return None
        return str(ref["uid"]), int((scale.get("spec") or {}).get("replicas") or 0)

    def _disrupted(self, pdb: Obj, pods: list[Obj]) -> tuple[dict[str, str], float | None]:
        """The evictions still expected to complete, and the seconds until the youngest of them expires."""
        recorded = (pdb.get("status") or {}).get("disruptedPods") or {}
        now, timeout = self.ctx.clock.wall(), self.ctx.options.pdb_deletion_timeout
        kept: dict[str, str] = {}
        recheck: float | None = None
        for pod in pods:
            name = pod["metadata"]["name"]
            if pod["metadata"].get("deletionTimestamp") or name not in recorded:
                continue
            expires = parse_time(recorded[name]) + timeout
            if expires < now:
                meta = pdb["metadata"]
                self.recorder.event(pod, "Warning", "NotDeleted", f"Pod was expected by PDB {meta['namespace']}/"
                                    f"{meta['namespace']} to be deleted but it wasn't")
                continue
            kept[name] = recorded[name]
            recheck = expires - now if recheck is None else min(recheck, expires - now)
        return kept, recheck

    async def _write(self, pdb: dict[str, Any], healthy: int, desired: int, expected: int,
                     disrupted: dict[str, str]) -> None:
        allowed = healthy - desired
        if expected <= 0 or allowed <= 0:
            allowed = 0
        old = pdb.get("status") or {}
        generation = pdb["metadata"].get("generation", 0)
        status: dict[str, Any] = {"currentHealthy": healthy, "desiredHealthy": desired, "expectedPods": expected,
                                  "disruptionsAllowed": allowed, "observedGeneration": generation,
                                  "conditions": [dict(c) for c in old.get("conditions") or ()]}
        if disrupted:
            status["disruptedPods"] = disrupted
        if allowed > 0:
            set_condition(status, type=CONDITION, status="True", reason="SufficientPods",
                          observed_generation=generation, clock=self.ctx.clock)
        else:
            set_condition(status, type=CONDITION, status="False", reason="InsufficientPods",
                          observed_generation=generation, clock=self.ctx.clock)
        if _present(status) != _present(old):
            await self._replace_status(pdb, status)

    async def _fail_safe(self, pdb: dict[str, Any], message: str) -> None:
        """kube's ``failSafe``: no disruption allowed while the budget cannot be computed."""
        status = {**(pdb.get("status") or {}), "disruptionsAllowed": 0,
                  "conditions": [dict(c) for c in (pdb.get("status") or {}).get("conditions") or ()]}
        set_condition(status, type=CONDITION, status="False", reason="SyncFailed", message=message,
                      observed_generation=status.get("observedGeneration"), clock=self.ctx.clock)
        await self._replace_status(pdb, status)

    async def _replace_status(self, pdb: dict[str, Any], status: dict[str, Any]) -> None:
        body = {**pdb, "status": _present(status)}
        await self.client.replace_status(PDBS, body, namespace=pdb["metadata"]["namespace"])


def setup(ctx: ControllerContext) -> None:
    """Register the disruption controller on the shared Manager."""
    mgr = ctx.manager
    pdbs = mgr.informer(PDBS)

    def budgets_of(pod: Obj) -> list[Request]:
        namespace = (pod.get("metadata") or {}).get("namespace") or ""
        return [Request.for_object(b) for b in pdbs.lister().list(namespace=namespace) if selected_pods(b, [pod])]

    mgr.informer("replicasets")  # a Deployment's pods are counted by its scale (the informer the others share)
    mgr.controller(DisruptionReconciler(ctx), "disruption").for_(PDBS) \
        .watches("pods", mapper=budgets_of, accepts=maps_any(budgets_of)).workers(ctx.options.workers)
