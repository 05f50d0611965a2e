"""The Service strategy: cluster IPs, IP families and node ports as kube-apiserver's Service REST sets them.

On create (after defaulting): ``ClusterIP``/``NodePort``/``LoadBalancer`` Services get a ClusterIP
(the requested one when free and in range) in ``clusterIP``/``clusterIPs`` with ``ipFamilies`` and
``ipFamilyPolicy: SingleStack``; headless Services (``clusterIP: None``) get the families too
(``RequireDualStack`` with both families when they have no selector, as kube answers); NodePort and
LoadBalancer ports get node ports; ``status`` starts as ``{"loadBalancer": {}}``. On update, values the
client left out are carried over from the stored Service (so PUT without ``clusterIP`` works), a
Service turned into a NodePort gets its node ports, and ExternalName drops what it no longer uses.
``spec.clusterIP``/``clusterIPs`` never change once set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...machinery import status as st
from ..ipallocator import AllocationError, ServiceAllocator
from .base import Cause, KindStrategy, ReturnedOnDeleteMixin, immutable, invalid, not_supported, render, required

_TYPES = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]
_WITH_NODE_PORTS = ("NodePort", "LoadBalancer")


class ServiceInvalid(Exception):
    """An allocation failure: the cause of a 422 Invalid answer."""

    def __init__(self, cause: Cause) -> None:
        super().__init__(cause["message"])
        self.cause = cause


class ServiceStrategy(ReturnedOnDeleteMixin, KindStrategy):
    """Without an allocator (unit tests, tools) ClusterIPs are left as the client sent them."""
    resets_status = True

    def __init__(self, allocator: ServiceAllocator | None = None) -> None:
        self.allocator = allocator

    def initial_status(self) -> dict[str, Any]:
        return {"loadBalancer": {}}

    # -- create

    def prepare_defaulted(self, info: Any, obj: dict[str, Any]) -> None:
        try:
            super().prepare_defaulted(info, obj)
        except ServiceInvalid as e:
            raise st.invalid(info, (obj.get("metadata") or {}).get("name", ""), [e.cause]) from None

    def prepare_defaulted_update(self, info: Any, obj: dict[str, Any], old: Mapping[str, Any]) -> None:
        try:
            super().prepare_defaulted_update(info, obj, old)
        except ServiceInvalid as e:
            raise st.invalid(info, (obj.get("metadata") or {}).get("name", ""), [e.cause]) from None

    def create(self, obj: dict[str, Any]) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        kind = spec.get("type")
        if kind == "ExternalName":
            return
        self._cluster_ip(spec)
        self._families(spec)
        if kind in _WITH_NODE_PORTS:
            self._node_ports(spec)
        if kind == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local" and self.allocator is not None:
            try:
                spec["healthCheckNodePort"] = self.allocator.allocate_node_port(spec.get("healthCheckNodePort"))
            except AllocationError as e:
                raise ServiceInvalid(invalid("spec.healthCheckNodePort", spec.get("healthCheckNodePort"),
                                             str(e))) from None

    def _cluster_ip(self, spec: dict[str, Any]) -> None:
        requested = spec.get("clusterIP") or (spec.get("clusterIPs") or [None])[0]
        if requested == "None":
            spec["clusterIP"] = "None"
            spec["clusterIPs"] = ["None"]
            return
        if self.allocator is None:
            if requested:
                spec["clusterIP"] = requested
                spec["clusterIPs"] = [requested]
            return
        try:
            ip = self.allocator.allocate_ip(requested or None)
        except AllocationError as e:
            raise ServiceInvalid(invalid("spec.clusterIPs", [requested] if requested else [], str(e))) from None
        spec["clusterIP"] = ip
        spec["clusterIPs"] = [ip]

    def _families(self, spec: dict[str, Any]) -> None:
        family = self.allocator.family if self.allocator is not None else "IPv4"
        if spec.get("clusterIP") == "None" and not spec.get("selector"):
            spec.setdefault("ipFamilyPolicy", "RequireDualStack")
            if spec["ipFamilyPolicy"] == "SingleStack":
                spec.setdefault("ipFamilies", [family])
            else:
                spec.setdefault("ipFamilies", [family, "IPv6" if family == "IPv4" else "IPv4"])
            return
        policy = spec.setdefault("ipFamilyPolicy", "SingleStack")
        if policy == "RequireDualStack":
            raise ServiceInvalid(invalid("spec.ipFamilyPolicy", policy,
                                         "this cluster is not configured for dual-stack services"))
        families = spec.setdefault("ipFamilies", [family])
        for i, requested in enumerate(families if isinstance(families, list) else ()):
            if requested != family:
                raise ServiceInvalid(invalid(f"spec.ipFamilies[{i}]", requested, "not configured on this cluster"))

    def _node_ports(self, spec: dict[str, Any], old_ports: Mapping[tuple[Any, Any], int] | None = None) -> None:
        """Allocate each port's nodePort (the one asked for, the one it had, or a free one). A LoadBalancer with
        ``allocateLoadBalancerNodePorts: false`` gets only those asked for or kept, as kube allocates them."""
        if self.allocator is None:
            return
        allocate_free = not (spec.get("type") == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is False)
        taken: list[int] = []
        for i, port in enumerate(p for p in spec.get("ports") or () if isinstance(p, dict)):
            if port.get("nodePort"):
                if old_ports is not None and port["nodePort"] in old_ports.values():
                    taken.append(port["nodePort"])
                    continue
                requested = port["nodePort"]
            elif old_ports is not None and (port.get("port"), port.get("protocol")) in old_ports:
                port["nodePort"] = old_ports[(port.get("port"), port.get("protocol"))]
                taken.append(port["nodePort"])
                continue
            elif not allocate_free:
                continue
            else:
                requested = None
            try:
                port["nodePort"] = self.allocator.allocate_node_port(requested, also_taken=taken)
            except AllocationError as e:
                raise ServiceInvalid(invalid(f"spec.ports[{i}].nodePort", requested, str(e))) from None
            taken.append(port["nodePort"])

    # -- update

    def update(self, obj: dict[str, Any], old: Mapping[str, Any]) -> None:
        spec, old_spec = obj.get("spec"), old.get("spec")
        if not isinstance(spec, dict) or not isinstance(old_spec, Mapping):
            return
        kind, old_kind = spec.get("type"), old_spec.get("type")
        if kind == "ExternalName":
            for key in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy", "internalTrafficPolicy"):
                spec.pop(key, None)
            return
        if old_kind == "ExternalName":
            self.create(obj)
            return
        for key in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
            if not spec.get(key) and old_spec.get(key):
                spec[key] = old_spec[key]
        if kind in _WITH_NODE_PORTS:
            old_ports = {(p.get("port"), p.get("protocol")): p["nodePort"] for p in old_spec.get("ports") or ()
                         if isinstance(p, Mapping) and p.get("nodePort")}
            self._node_ports(spec, old_ports)
            if spec.get("healthCheckNodePort") is None and old_spec.get("healthCheckNodePort"):
                spec["healthCheckNodePort"] = old_spec["healthCheckNodePort"]
        else:
            for port in spec.get("ports") or ():
                if isinstance(port, dict):
                    port.pop("nodePort", None)

    # -- validation

    def causes(self, obj: Mapping[str, Any]) -> list[Cause]:
        spec = obj.get("spec")
        if not isinstance(spec, Mapping):
            return [required("spec")]
        causes: list[Cause] = []
        kind = spec.get("type")
        if kind not in _TYPES:
            causes.append(not_supported("spec.type", kind, _TYPES))
        ports = [p for p in spec.get("ports") or () if isinstance(p, Mapping)]
        if kind == "ExternalName":
            if not spec.get("externalName"):
                causes.append(required("spec.externalName"))
        elif not ports and spec.get("clusterIP") != "None":
            causes.append(required("spec.ports"))
        seen: set[Any] = set()
        for i, port in enumerate(ports):
            causes += self._port_causes(i, port, multiple=len(ports) > 1, seen=seen)
        return causes

    @staticmethod
    def _port_causes(i: int, port: Mapping[str, Any], *, multiple: bool, seen: set[Any]) -> list[Cause]:
        causes: list[Cause] = []
        path = f"spec.ports[{i}]"
        name = port.get("name")
        if multiple and not name:
            causes.append(required(f"{path}.name"))
        elif name and name in seen:
            causes.append({"reason": "FieldValueDuplicate", "field": f"{path}.name",
                           "message": f"Duplicate value: {render(name)}"})
        seen.add(name)
        number = port.get("port")
        if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number <= 65535:
            causes.append(invalid(f"{path}.port", number, "must be between 1 and 65535, inclusive"))
        protocol = port.get("protocol")
        if protocol not in ("TCP", "UDP", "SCTP"):
            causes.append(not_supported(f"{path}.protocol", protocol, ["SCTP", "TCP", "UDP"]))
        return causes

    def update_causes(self, obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
        spec, old_spec = obj.get("spec") or {}, old.get("spec") or {}
        if spec.get("type") == "ExternalName" or old_spec.get("type") == "ExternalName":
            return []
        causes = immutable("spec.clusterIP", spec.get("clusterIP"), old_spec.get("clusterIP"))
        old_ips, ips = old_spec.get("clusterIPs") or [], spec.get("clusterIPs") or []
        if old_ips and ips[:1] != old_ips[:1]:
            causes.append(invalid("spec.clusterIPs[0]", ips, "may not change once set"))
        return causes
