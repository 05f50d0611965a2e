"""Printers of cluster operation kinds: Leases, PodDisruptionBudgets, PriorityClasses, RuntimeClasses and CSRs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..endpoints.table_cells import (
    NONE,
    age_of,
    as_int,
    as_map,
    field,
    human_duration,
    int_or_string,
    mappings,
    name_of,
    text,
)
from .table import AGE, NAME, Doc, Printer, col

LEASE = Printer(
    (NAME, col("Holder", description=Doc("api.coordination.v1.LeaseSpec", "holderIdentity")), AGE),
    lambda obj, now: [name_of(obj), text(field(obj, "spec", "holderIdentity")), age_of(obj, now)])


def _budget(value: Any) -> str:
    return "N/A" if value is None else int_or_string(value)


PODDISRUPTIONBUDGET = Printer((
    NAME,
    col("Min Available", description="The minimum number of pods that must be available."),
    col("Max Unavailable", description="The maximum number of pods that may be unavailable."),
    col("Allowed Disruptions", "integer", description="Calculated number of pods that may be disrupted at this time."),
    AGE,
), lambda obj, now: [name_of(obj), _budget(field(obj, "spec", "minAvailable")),
                     _budget(field(obj, "spec", "maxUnavailable")),
                     as_int(field(obj, "status", "disruptionsAllowed")), age_of(obj, now)])

_PC = "api.scheduling.v1.PriorityClass"
PRIORITYCLASS = Printer((
    NAME,
    col("Value", "integer", description=Doc(_PC, "value")),
    col("Global-Default", "boolean", description=Doc(_PC, "globalDefault")),
    AGE,
    col("PreemptionPolicy", description=Doc(_PC, "preemptionPolicy")),
), lambda obj, now: [name_of(obj), as_int(obj.get("value")), obj.get("globalDefault") is True, age_of(obj, now),
                     text(obj.get("preemptionPolicy"))])

# kube describes HANDLER with ObjectMeta's (absent) "handler" doc: an empty description.
RUNTIMECLASS = Printer((NAME, col("Handler"), AGE),
                       lambda obj, now: [name_of(obj), text(obj.get("handler")), age_of(obj, now)])


def csr_condition(obj: Mapping[str, Any]) -> str:
    """CONDITION: Denied, else Approved, else Pending; then ``,Failed`` and ``,Issued`` when they apply."""
    types = {c.get("type") for c in mappings(field(obj, "status", "conditions"))}
    status = "Denied" if "Denied" in types else "Approved" if "Approved" in types else "Pending"
    if "Failed" in types:
        status += ",Failed"
    if field(obj, "status", "certificate"):
        status += ",Issued"
    return status


def _csr_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    """REQUESTEDDURATION from spec.expirationSeconds, REQUESTOR the requesting user."""
    spec = as_map(obj.get("spec"))
    seconds = spec.get("expirationSeconds")
    return [name_of(obj), age_of(obj, now), str(spec.get("signerName") or NONE), text(spec.get("username")),
            NONE if seconds is None else human_duration(as_int(seconds)), csr_condition(obj)]


_CSR = "api.certificates.v1.CertificateSigningRequest"
CERTIFICATESIGNINGREQUEST = Printer((
    NAME, AGE,
    col("SignerName", description=Doc(_CSR + "Spec", "signerName")),
    col("Requestor", description=Doc(_CSR + "Spec", "request")),
    col("RequestedDuration", description=Doc(_CSR + "Spec", "expirationSeconds")),
    col("Condition", description=Doc(_CSR + "Status", "conditions")),
), _csr_row)
