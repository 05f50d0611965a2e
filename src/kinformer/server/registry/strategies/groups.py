"""Strategies of the API groups beyond core, apps and batch: which kinds carry ``metadata.generation``.

In kube-apiserver 1.32 these strategies set generation 1 at create and bump it when the desired
state changes; every other built-in kind has none.
"""

from __future__ import annotations

from typing import Any

from .base import GenerationStrategy, KindStrategy, ReturnedOnDeleteMixin
from .certificates import CSRStrategy


class _LoadBalancerStatus(GenerationStrategy):
    def initial_status(self) -> dict[str, Any]:
        return {"loadBalancer": {}}


class _PDBStatus(GenerationStrategy):
    def initial_status(self) -> dict[str, Any]:
        return {"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0, "expectedPods": 0}


class _NoStatus(GenerationStrategy):
    """Generation-carrying kinds without a status subresource."""

    resets_status = False


class _ReturnedStorage(ReturnedOnDeleteMixin, KindStrategy):
    pass


STRATEGIES: dict[tuple[str, str], KindStrategy] = {
    ("networking.k8s.io", "ingresses"): _LoadBalancerStatus(),
    ("networking.k8s.io", "networkpolicies"): _NoStatus(),
    ("networking.k8s.io", "ingressclasses"): _NoStatus(),
    ("policy", "poddisruptionbudgets"): _PDBStatus(),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): _NoStatus(),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): _NoStatus(),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"): GenerationStrategy(),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"): _NoStatus(),
    ("flowcontrol.apiserver.k8s.io", "flowschemas"): GenerationStrategy(),
    ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations"): GenerationStrategy(),
    ("storage.k8s.io", "storageclasses"): _ReturnedStorage(),
    ("certificates.k8s.io", "certificatesigningrequests"): CSRStrategy(),
}
