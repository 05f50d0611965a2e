"""Printers of networking.k8s.io (Ingresses, IngressClasses, NetworkPolicies) and discovery.k8s.io EndpointSlices."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..endpoints.table_cells import (
    NONE,
    age_of,
    as_list,
    as_map,
    field,
    format_selector,
    joined_with_more,
    load_balancer_ingress,
    mappings,
    name_of,
)
from .table import AGE, NAME, Doc, Printer, col


def _hosts(rules: list[Mapping[str, Any]]) -> str:
    """HOSTS: the first three rule hosts (``*`` when no rule names one) and how many rules there are beyond."""
    hosts: list[str] = []
    more = False
    for rule in rules:
        if len(hosts) == 3:
            more = True
        if not more and rule.get("host"):
            hosts.append(str(rule["host"]))
    if not hosts:
        return "*"
    return f"{','.join(hosts)} + {len(rules) - 3} more..." if more else ",".join(hosts)


def _ingress_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    """CLASS the ingressClassName, PORTS ``80`` or ``80, 443`` with TLS."""
    spec = as_map(obj.get("spec"))
    cls = spec.get("ingressClassName")
    return [name_of(obj), NONE if cls is None else str(cls), _hosts(mappings(spec.get("rules"))),
            ",".join(load_balancer_ingress(obj)), "80, 443" if as_list(spec.get("tls")) else "80", age_of(obj, now)]


INGRESS = Printer((
    NAME,
    col("Class", description="The name of the IngressClass resource that should be used for additional configuration"),
    col("Hosts", description="Hosts that incoming requests are matched against before the ingress rule"),
    col("Address", description="Address is a list containing ingress points for the load-balancer"),
    col("Ports", description="Ports of TLS configurations that open"),
    AGE,
), _ingress_row)


def _class_parameters(obj: Mapping[str, Any]) -> str:
    """PARAMETERS: ``Kind[.apiGroup]/name`` of the parameters reference, ``<none>`` without one."""
    params = field(obj, "spec", "parameters")
    if not isinstance(params, Mapping):
        return NONE
    kind = str(params.get("kind") or "")
    if params.get("apiGroup") is not None:
        kind = f"{kind}.{params['apiGroup']}"
    return f"{kind}/{params.get('name') or ''}"


INGRESSCLASS = Printer((
    NAME,
    col("Controller", description="Controller that is responsible for handling this class"),
    col("Parameters", description="A reference to a resource with additional parameters"),
    AGE,
), lambda obj, now: [name_of(obj), str(field(obj, "spec", "controller") or ""), _class_parameters(obj),
                     age_of(obj, now)])

NETWORKPOLICY = Printer((
    NAME, col("Pod-Selector", description=Doc("api.networking.v1.NetworkPolicySpec", "podSelector")), AGE,
), lambda obj, now: [name_of(obj), format_selector(as_map(field(obj, "spec", "podSelector"))), age_of(obj, now)])


def _slice_ports(obj: Mapping[str, Any]) -> str:
    """PORTS: each port's number, else its name, else ``*``; ``<unset>`` when there is none."""
    ports = []
    for port in mappings(obj.get("ports")):
        value = port.get("port")
        name = port.get("name")
        ports.append(str(value) if value is not None else "*" if name is None else str(name))
    return joined_with_more(ports)


def _slice_endpoints(obj: Mapping[str, Any]) -> str:
    """ENDPOINTS: the endpoints' addresses, the first three and how many more."""
    return joined_with_more([str(a) for ep in mappings(obj.get("endpoints")) for a in as_list(ep.get("addresses"))])


_SLICE = "api.discovery.v1.EndpointSlice"
ENDPOINTSLICE = Printer((
    NAME,
    col("AddressType", description=Doc(_SLICE, "addressType")),
    col("Ports", description=Doc(_SLICE, "ports")),
    col("Endpoints", description=Doc(_SLICE, "endpoints")),
    AGE,
), lambda obj, now: [name_of(obj), str(obj.get("addressType") or ""), _slice_ports(obj), _slice_endpoints(obj),
                     age_of(obj, now)])
