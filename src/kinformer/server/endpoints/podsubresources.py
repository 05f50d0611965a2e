"""The pod subresources that schedulers, `kubectl drain` and `kubectl debug` write, served without a kubelet.

kube-apiserver serves them from storage alone, and so does this server, with its rules:

* ``pods/<name>/binding`` (POST a v1 ``Binding``): sets ``spec.nodeName`` once (409 Conflict when the pod is
  already assigned or is being deleted), merges the Binding's annotations and sets the ``PodScheduled``
  condition to True; answers ``Status`` Success, 201. Like kube's, it writes storage directly: no strategy,
  no managedFields entry.
* ``pods/<name>/eviction`` (POST a policy/v1 ``Eviction``): a pod that is Pending, Succeeded, Failed or
  already terminating is deleted at once; otherwise the one PodDisruptionBudget whose selector matches the
  pod must allow a disruption (its status is as the disruption controller last wrote it: a PDB whose
  ``status.observedGeneration`` lags its generation is "still being processed", 429), which is taken by
  decrementing ``status.disruptionsAllowed`` and recording the pod in ``status.disruptedPods`` before the
  pod is deleted with the Eviction's DeleteOptions. Two matching PDBs answer 500, as kube does.
* ``pods/<name>/ephemeralcontainers`` (GET, PUT, PATCH a ``Pod``): served by the generic update path with
  only ``spec.ephemeralContainers`` taken from the client (see ``ObjectStore.prepare_update``); existing
  ephemeral containers may be neither changed nor removed (:mod:`.registry.ephemeralcontainers`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from ...selectors import SelectorError, label_selector_from_dict
from ..machinery import status as st
from ..machinery.status import json_body
from ..registry.objects import timestamp
from ..registry.resources import ResourceInfo
from .bodies import check_delete_options, content_type, decode_object, parse_document, read_body
from .responses import json_response
from .routing import Target
from .writes import WriteHandlers

#: kube's bound on ``status.disruptedPods``: evictions approved but not yet seen by the disruption controller.
MAX_DISRUPTED_PODS = 2000
#: Evictions of an unbudgeted pod retried when the pod changed between read and delete.
EVICTION_ATTEMPTS = 20


def created_status() -> dict[str, Any]:
    """The ``Status`` a successful binding or eviction answers with (HTTP 201)."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


_CREATED = json_body(created_status())  # its JSON, encoded once


async def _body(request: web.Request, t: Target, kind: str) -> dict[str, Any]:
    doc = decode_object(parse_document(await read_body(request), content_type(request)))
    if doc.get("kind") not in (None, "", kind):
        raise st.bad_request(f'not a {kind} object: {doc.get("kind")}')
    if (doc.get("metadata") or {}).get("name") != t.name:
        raise st.bad_request(f"name in URL does not match name in {kind} object")
    return doc


def _bind(pod: Mapping[str, Any], node: str, annotations: Mapping[str, str], info: ResourceInfo, name: str,
          now: str) -> dict[str, Any]:
    """``pod`` (read-only: the watch cache's, say) bound to ``node``: a new object sharing with it all but the
    metadata, spec, status and conditions it changes (each a copy, keys where setting them in place puts them)."""
    meta = pod["metadata"]
    if meta.get("deletionTimestamp"):
        raise st.conflict(info, name, f"pod {name} is being deleted, cannot be assigned to a host")
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        raise st.conflict(info, name, f'pod {name} is already assigned to node "{spec["nodeName"]}"')
    out = dict(pod)
    out["metadata"] = {**meta, "annotations": {**(meta.get("annotations") or {}), **annotations}} if annotations \
        else dict(meta)
    out["spec"] = {**spec, "nodeName": node}
    status = out["status"] = dict(pod.get("status") or {})
    conditions = status["conditions"] = list(status.get("conditions") or ())
    for i, cond in enumerate(conditions):
        if cond.get("type") == "PodScheduled":
            cond = conditions[i] = dict(cond)
            if cond.get("status") != "True":
                cond.update(status="True", lastTransitionTime=now)
            cond.pop("reason", None)
            cond.pop("message", None)
            break
    else:
        conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                           "lastTransitionTime": now})
    return out


def _binding_causes(binding: Mapping[str, Any]) -> list[dict[str, str]]:
    target = binding.get("target")
    target = target if isinstance(target, dict) else {}
    causes = []
    if target.get("kind") not in (None, "", "Node"):
        causes.append({"reason": "FieldValueNotSupported", "field": "target.kind",
                       "message": f'Unsupported value: "{target.get("kind")}": supported values: "Node"'})
    if not target.get("name"):
        causes.append({"reason": "FieldValueRequired", "field": "target.name", "message": "Required value"})
    return causes


class PodSubresources(WriteHandlers):
    """The binding and eviction handlers of :class:`~kinformer.server.endpoints.handlers.ResourceAPI`."""

    async def binding(self, request: web.Request, t: Target) -> web.Response:
        """POST ``pods/<name>/binding``: assign the pod to ``target.name`` (see the module docstring)."""
        binding = await _body(request, t, "Binding")
        causes = _binding_causes(binding)
        if causes:
            raise st.invalid(t.info, t.name, causes)
        node = binding["target"]["name"]
        annotations = (binding.get("metadata") or {}).get("annotations") or {}
        now = timestamp(self.clock)

        def try_bind(pod: dict[str, Any] | None) -> dict[str, Any]:
            assert pod is not None
            return _bind(pod, node, annotations, t.info, t.name, now)

        await self.store.guaranteed_update(t.info, t.namespace, t.name, try_bind, dry_run=self._dry_run(request),
                                           handover=True, shared=True)
        return json_response(_CREATED, 201)

    async def eviction(self, request: web.Request, t: Target) -> web.Response:
        """POST ``pods/<name>/eviction``: delete the pod unless its disruption budget forbids it."""
        eviction = await _body(request, t, "Eviction")
        asked = dict(eviction.get("deleteOptions") or {})
        dry = self._dry_run(request) or asked.get("dryRun") == ["All"]
        check_delete_options(asked)
        pinned_by_client = bool((asked.get("preconditions") or {}).get("resourceVersion"))
        for _ in range(EVICTION_ATTEMPTS):
            pod, _ = await self.store.read(t.info, t.namespace, t.name)
            budget = None
            if _budget_ignored(pod):
                pin = _phase(pod) == "Pending"
            else:
                budget, pin = await self._take_disruption(t, pod, dry)
            opts = asked
            if pin and not pinned_by_client:  # the pod must not change (become ready, say) after being judged
                rv = pod["metadata"]["resourceVersion"]
                opts = {**asked, "preconditions": {**(asked.get("preconditions") or {}), "resourceVersion": rv}}
            try:
                await self.store.delete(t.info, t.namespace, t.name, opts, dry_run=dry)
            except st.StatusError as e:
                if e.code != 409 or opts is asked:
                    raise
                if budget is not None:
                    raise _still_processed(budget) from None
                continue
            return json_response(_CREATED, 201)
        raise st.conflict(t.info, t.name)

    async def _take_disruption(self, t: Target, pod: Mapping[str, Any], dry: bool) -> tuple[str | None, bool]:
        """Judge ``pod``'s eviction by its disruption budget: (the budget's name, whether to pin the pod's version).

        Raises the refusal when the budget allows no disruption; otherwise takes one from it, unless the pod
        is not ready and either the budget's ``unhealthyPodEvictionPolicy`` is ``AlwaysAllow`` or the budget has
        its healthy pods without it (``IfHealthyBudget``, the default): then the pod is pinned instead.
        """
        pdb_info = self.registry.get("policy", "v1", "poddisruptionbudgets")
        name = self._budget_of(pdb_info, t.namespace, pod) if pdb_info is not None else None
        if pdb_info is None or name is None:
            return None, False
        now = timestamp(self.clock)
        pod_name = pod["metadata"]["name"]
        pdb, _ = await self.store.read(pdb_info, t.namespace, name)
        status = pdb.get("status") or {}
        desired = status.get("desiredHealthy", 0)
        if not _ready(pod) and ((pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow" or
                                status.get("currentHealthy", 0) >= desired > 0):
            return name, True

        def try_decrement(current: dict[str, Any] | None) -> dict[str, Any]:
            assert current is not None
            _decrement(current, name, pod_name, now)
            return current

        await self.store.guaranteed_update(pdb_info, t.namespace, name, try_decrement, dry_run=dry)
        return name, False

    def _budget_of(self, pdb_info: ResourceInfo, namespace: str, pod: Mapping[str, Any]) -> str | None:
        """The one PodDisruptionBudget selecting ``pod`` (None: none; 500 for two or more, as kube answers)."""
        labels = pod["metadata"].get("labels") or {}
        matching = []
        for co in self.cache.bucket(pdb_info.storage_prefix).snapshot(namespace):
            try:
                selector = label_selector_from_dict((co.obj.get("spec") or {}).get("selector"))
            except SelectorError:
                continue  # an invalid selector matches no pod
            if not selector.empty() and selector.matches(labels):
                matching.append(co.name)
        if len(matching) > 1:
            raise st.StatusError(500, "", "This pod has more than one PodDisruptionBudget, which the eviction "
                                 "subresource does not support.")
        return matching[0] if matching else None


def _phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def _budget_ignored(pod: Mapping[str, Any]) -> bool:
    """A pending, finished or terminating pod is evicted without asking its budget."""
    return _phase(pod) in ("Pending", "Succeeded", "Failed") or bool(pod["metadata"].get("deletionTimestamp"))


def _ready(pod: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def _decrement(pdb: dict[str, Any], name: str, pod_name: str, now: str) -> None:
    """Take one disruption from ``pdb``'s status, or raise kube's refusal."""
    status = pdb.setdefault("status", {})
    if status.get("observedGeneration", 0) < pdb["metadata"].get("generation", 0):
        raise _still_processed(name)
    allowed = status.get("disruptionsAllowed", 0)
    if allowed < 0 or len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
        why = "pdb disruptions allowed is negative" if allowed < 0 else \
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller"
        raise st.StatusError(403, "Forbidden", f'poddisruptionbudgets.policy "{name}" is forbidden: {why}',
                             details={"name": name, "group": "policy", "kind": "poddisruptionbudgets"})
    if allowed == 0:
        raise _budget_refusal(f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy "
                              f"pods and has {status.get('currentHealthy', 0)} currently")
    status["disruptionsAllowed"] = allowed - 1
    if allowed == 1:
        _set_insufficient_pods(status, now)
    status["disruptedPods"] = {**(status.get("disruptedPods") or {}), pod_name: now}


def _still_processed(name: str) -> st.StatusError:
    return _budget_refusal(f"The disruption budget {name} is still being processed by the server.", retry_after=10)


def _budget_refusal(cause: str, retry_after: int = 0) -> st.StatusError:
    details: dict[str, Any] = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    headers = {}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
        headers["Retry-After"] = str(retry_after)
    return st.StatusError(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.",
                          details=details, headers=headers)


def _set_insufficient_pods(status: dict[str, Any], now: str) -> None:
    """The ``DisruptionAllowed`` condition once no disruption is left, as the disruption controller words it."""
    conditions = [c for c in status.get("conditions") or () if c.get("type") != "DisruptionAllowed"]
    old = next((c for c in status.get("conditions") or () if c.get("type") == "DisruptionAllowed"), None)
    since = old.get("lastTransitionTime", now) if old is not None and old.get("status") == "False" else now
    conditions.append({"type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods", "message": "",
                       "observedGeneration": status.get("observedGeneration", 0), "lastTransitionTime": since})
    status["conditions"] = conditions


__all__ = ["MAX_DISRUPTED_PODS", "PodSubresources", "created_status"]
