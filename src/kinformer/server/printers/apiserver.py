"""Printers of the API server's own configuration: admission webhooks and policies, API priority and fairness,
and aggregated APIServices."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..endpoints.table_cells import NONE, UNSET, age_of, as_int, as_list, as_map, field, find_condition, name_of, text
from .table import AGE, NAME, Doc, Printer, col


def _webhooks_printer() -> Printer:
    return Printer((
        NAME,
        col("Webhooks", "integer", description="Webhooks indicates the number of webhooks registered in this "
                                               "configuration"),
        AGE,
    ), lambda obj, now: [name_of(obj), len(as_list(obj.get("webhooks"))), age_of(obj, now)])


MUTATINGWEBHOOKCONFIGURATION = _webhooks_printer()
VALIDATINGWEBHOOKCONFIGURATION = _webhooks_printer()


def _param_kind(obj: Mapping[str, Any]) -> str:
    kind = field(obj, "spec", "paramKind")
    if not isinstance(kind, Mapping):
        return UNSET
    return f"{kind.get('apiVersion') or ''}/{kind.get('kind') or ''}"


VALIDATINGADMISSIONPOLICY = Printer((
    NAME,
    col("Validations", "integer", description="Validations indicates the number of validation rules defined in this "
                                              "configuration"),
    col("ParamKind", description="ParamKind specifies the kind of resources used to parameterize this policy"),
    AGE,
), lambda obj, now: [name_of(obj), len(as_list(field(obj, "spec", "validations"))), _param_kind(obj),
                     age_of(obj, now)])


def go_label_selector(selector: Mapping[str, Any]) -> str:
    """A LabelSelector in the Go struct notation kube's printer shows for a binding's param selector."""
    labels = as_map(selector.get("matchLabels"))
    label_text = "".join(f"{k}: {labels[k]}," for k in sorted(labels))
    exprs = "".join(
        f"LabelSelectorRequirement{{Key:{e.get('key') or ''},Operator:{e.get('operator') or ''},"
        f"Values:[{' '.join(str(v) for v in as_list(e.get('values')))}],}},"
        for e in as_list(selector.get("matchExpressions")) if isinstance(e, Mapping))
    return (f"&LabelSelector{{MatchLabels:map[string]string{{{label_text}}},"
            f"MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}")


def _param_ref(obj: Mapping[str, Any]) -> str:
    """PARAMREF: namespace/name (``*/name`` without a namespace), else the selector, else ``<unset>``."""
    ref = field(obj, "spec", "paramRef")
    if not isinstance(ref, Mapping):
        return UNSET
    if ref.get("name"):
        return f"{ref.get('namespace') or '*'}/{ref['name']}"
    if isinstance(ref.get("selector"), Mapping):
        return go_label_selector(ref["selector"])
    return UNSET


VALIDATINGADMISSIONPOLICYBINDING = Printer((
    NAME,
    col("PolicyName", description="PolicyName indicates the policy definition which the policy binding binded to"),
    col("ParamRef", description="ParamRef indicates the param resource which sets the configration param"),
    AGE,
), lambda obj, now: [name_of(obj), text(field(obj, "spec", "policyName")), _param_ref(obj), age_of(obj, now)])


# -- API priority and fairness

_FC = "api.flowcontrol.v1."


def _flowschema_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    """MISSINGPL: the Dangling condition's status, ``?`` before the controller set one."""
    spec = as_map(obj.get("spec"))
    method = field(spec, "distinguisherMethod", "type")
    dangling = find_condition(field(obj, "status", "conditions"), "Dangling")
    return [name_of(obj), text(field(spec, "priorityLevelConfiguration", "name")),
            as_int(spec.get("matchingPrecedence")), NONE if method is None else str(method), age_of(obj, now),
            "?" if dangling is None else text(dangling.get("status"))]


def _by_precedence(items: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
    """Lists print in matching order: lower matchingPrecedence first, then by name."""
    return sorted(items, key=lambda o: (as_int(field(o, "spec", "matchingPrecedence")), name_of(o)))


FLOWSCHEMA = Printer((
    NAME,
    col("PriorityLevel", description=Doc(_FC + "PriorityLevelConfigurationReference", "name")),
    col("MatchingPrecedence", description=Doc(_FC + "FlowSchemaSpec", "matchingPrecedence")),
    col("DistinguisherMethod", description=Doc(_FC + "FlowSchemaSpec", "distinguisherMethod")),
    AGE,
    col("MissingPL", description="references a broken or non-existent PriorityLevelConfiguration"),
), _flowschema_row, order=_by_precedence)


def _priority_level_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    """Limited levels show their shares and queuing; ``<none>`` where the level has no such setting."""
    spec = as_map(obj.get("spec"))
    cells: list[Any] = [NONE] * 4
    limited = spec.get("limited")
    if isinstance(limited, Mapping):
        cells[0] = as_int(limited.get("nominalConcurrencyShares"))
        queuing = field(limited, "limitResponse", "queuing")
        if isinstance(queuing, Mapping):
            cells[1:] = [as_int(queuing.get(k)) for k in ("queues", "handSize", "queueLengthLimit")]
    return [name_of(obj), text(spec.get("type")), *cells, age_of(obj, now)]


_QUEUING = _FC + "QueuingConfiguration"
PRIORITYLEVELCONFIGURATION = Printer((
    NAME,
    col("Type", description=Doc(_FC + "PriorityLevelConfigurationSpec", "type")),
    col("NominalConcurrencyShares", description=Doc(_FC + "LimitedPriorityLevelConfiguration",
                                                    "nominalConcurrencyShares")),
    col("Queues", description=Doc(_QUEUING, "queues")),
    col("HandSize", description=Doc(_QUEUING, "handSize")),
    col("QueueLengthLimit", description=Doc(_QUEUING, "queueLengthLimit")),
    AGE,
), _priority_level_row)


# -- aggregation


def _apiservice_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    """SERVICE namespace/name or Local; AVAILABLE the Available condition, ``False (Reason)`` when not true."""
    svc = field(obj, "spec", "service")
    service = f"{svc.get('namespace') or ''}/{svc.get('name') or ''}" if isinstance(svc, Mapping) else "Local"
    cond = find_condition(field(obj, "status", "conditions"), "Available")
    available = "Unknown"
    if cond is not None:
        status = text(cond.get("status"))
        available = f"{status} ({cond['reason']})" if status != "True" and cond.get("reason") else status
    return [name_of(obj), service, available, age_of(obj, now)]


APISERVICE = Printer((
    NAME,
    col("Service", description="The reference to the service that hosts this API endpoint."),
    col("Available", description="Whether this service is available."),
    AGE,
), _apiservice_row)
