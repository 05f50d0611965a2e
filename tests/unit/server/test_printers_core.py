"""kube's columns of core/v1 ReplicationControllers, PodTemplates, ComponentStatuses and ResourceQuotas, and the
Service and Node cells that follow kube's rules (``kinformer.server.printers.core``)."""

from __future__ import annotations

from tablelib import cells, headers, meta

NGINX = {"metadata": {"labels": {"app": "nginx"}},
         "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}


def test_replication_controller_row() -> None:
    rc = {"apiVersion": "v1", "kind": "ReplicationController", "metadata": meta("nginx"),
          "spec": {"replicas": 3, "selector": {"app": "nginx"}, "template": NGINX},
          "status": {"replicas": 3, "readyReplicas": 2, "availableReplicas": 2}}
    assert headers("", "replicationcontrollers") == ["Name", "Desired", "Current", "Ready", "Age"]
    assert cells("", "replicationcontrollers", rc) == ["nginx", 3, 3, 2, "5m", "nginx", "nginx:1.27", "app=nginx"]


def test_pod_template_row() -> None:
    pt = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": meta("web"), "template": NGINX}
    assert headers("", "podtemplates") == ["Name", "Containers", "Images", "Pod Labels"]
    assert cells("", "podtemplates", pt) == ["web", "nginx", "nginx:1.27", "app=nginx"]


def test_component_status_rows() -> None:
    healthy = {"metadata": {"name": "etcd-0"},
               "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]}
    assert cells("", "componentstatuses", healthy) == ["etcd-0", "Healthy", "ok", ""]
    broken = {"metadata": {"name": "scheduler"},
              "conditions": [{"type": "Healthy", "status": "False", "error": "connection refused"}]}
    assert cells("", "componentstatuses", broken) == ["scheduler", "Unhealthy", "", "connection refused"]
    assert cells("", "componentstatuses", {"metadata": {"name": "x"}}) == ["x", "Unknown", "", ""]


def test_resource_quota_splits_requests_and_limits() -> None:
    quota = {"metadata": meta("compute"),
             "spec": {"hard": {"requests.cpu": "1", "requests.memory": "1Gi", "limits.cpu": "2", "pods": "10"}},
             "status": {"hard": {"requests.cpu": "1", "requests.memory": "1Gi", "limits.cpu": "2", "pods": "10"},
                        "used": {"requests.cpu": "500m", "pods": "3"}}}
    assert headers("", "resourcequotas") == ["Name", "Request", "Limit", "Age"]
    assert cells("", "resourcequotas", quota) == ["compute", "pods: 3/10, requests.cpu: 500m/1, requests.memory: 0/1Gi",
                                                  "limits.cpu: 0/2", "5m"]
    assert cells("", "resourcequotas", {"metadata": meta("new")}) == ["new", "", "", "5m"]


def test_load_balancer_ingress_is_sorted_and_deduplicated() -> None:
    svc = {"metadata": meta("lb"), "spec": {"type": "LoadBalancer", "clusterIPs": ["10.96.0.10"],
                                            "ports": [{"port": 443, "nodePort": 31443, "protocol": "TCP"}]},
           "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}, {"ip": "198.51.100.4"},
                                                   {"ip": "203.0.113.9"}]}}}
    assert cells("", "services", svc)[3:5] == ["198.51.100.4,203.0.113.9", "443:31443/TCP"]


def test_node_with_unknown_ready_status_is_not_ready() -> None:
    node = {"metadata": meta("n1"), "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}
    assert cells("", "nodes", node)[1] == "NotReady"
