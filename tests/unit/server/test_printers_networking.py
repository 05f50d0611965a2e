"""kube's columns of Ingresses, IngressClasses, NetworkPolicies and EndpointSlices
(``kinformer.server.printers.networking``)."""

from __future__ import annotations

from typing import Any

from tablelib import cells, headers, meta

NET = "networking.k8s.io"


def ingress(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta("web"), "spec": spec,
            "status": status or {}}


def rule(host: str | None = None) -> dict[str, Any]:
    path = {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}}
    return {**({"host": host} if host else {}), "http": {"paths": [path]}}


def test_ingress_rows() -> None:
    assert headers(NET, "ingresses") == ["Name", "Class", "Hosts", "Address", "Ports", "Age"]
    tls = ingress({"ingressClassName": "nginx", "rules": [rule("foo.bar.com"), rule()],
                   "tls": [{"hosts": ["foo.bar.com"], "secretName": "tls"}]},
                  {"loadBalancer": {"ingress": [{"ip": "192.168.49.2"}]}})
    assert cells(NET, "ingresses", tls) == ["web", "nginx", "foo.bar.com", "192.168.49.2", "80, 443", "5m"]
    plain = ingress({"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}})
    assert cells(NET, "ingresses", plain) == ["web", "<none>", "*", "", "80", "5m"]
    many = ingress({"rules": [rule(h) for h in ("a.io", "b.io", "c.io", "d.io", "e.io")]})
    assert cells(NET, "ingresses", many)[2] == "a.io,b.io,c.io + 2 more..."


def test_ingress_class_parameters() -> None:
    cls = {"metadata": meta("external-lb"),
           "spec": {"controller": "example.com/ingress-controller",
                    "parameters": {"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "lb"}}}
    assert cells(NET, "ingressclasses", cls) == ["external-lb", "example.com/ingress-controller",
                                                 "IngressParameters.k8s.example.com/lb", "5m"]
    bare = {"metadata": meta("nginx"), "spec": {"controller": "k8s.io/ingress-nginx"}}
    assert cells(NET, "ingressclasses", bare)[2] == "<none>"


def test_network_policy_pod_selector() -> None:
    deny_all = {"metadata": meta("deny"), "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}
    assert cells(NET, "networkpolicies", deny_all) == ["deny", "<none>", "5m"]
    db = {"metadata": meta("db"), "spec": {"podSelector": {"matchLabels": {"role": "db"}}}}
    assert cells(NET, "networkpolicies", db)[1] == "role=db"


def test_endpoint_slice_rows() -> None:
    eps = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": meta("web-abc12"),
           "addressType": "IPv4", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}, {"name": "metrics"}],
           "endpoints": [{"addresses": [f"10.244.0.{i}"], "conditions": {"ready": True}} for i in range(5, 10)]}
    assert headers("discovery.k8s.io", "endpointslices") == ["Name", "AddressType", "Ports", "Endpoints", "Age"]
    assert cells("discovery.k8s.io", "endpointslices", eps) == [
        "web-abc12", "IPv4", "80,metrics", "10.244.0.5,10.244.0.6,10.244.0.7 + 2 more...", "5m"]
    empty = {"metadata": meta("e"), "addressType": "IPv6", "endpoints": None}
    assert cells("discovery.k8s.io", "endpointslices", empty)[2:4] == ["<unset>", "<unset>"]
