"""Defaulting of built-in kinds: objects read back as kube-apiserver 1.32 returns them."""

from __future__ import annotations

import copy
from typing import Any

from kinformer.server.registry.defaults import set_defaults
from kinformer.server.registry.defaults.pod import default_pull_policy, image_tag
from kinformer.server.registry.resources import Registry
from kinformer.server.registry.strategies import strategy_table

NGINX = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "nginx-deployment", "labels": {"app": "nginx"}},
    "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "nginx"}},
             "template": {"metadata": {"labels": {"app": "nginx"}},
                          "spec": {"containers": [{"name": "nginx", "image": "nginx:1.14.2",
                                                   "ports": [{"containerPort": 80}]}]}}},
}

# What `kubectl create -f nginx-deployment.yaml` returns from kube-apiserver 1.32 (server-set metadata left
# out), derived from the SetDefaults rules and the Go serialisation of empty structs and zero times.
NGINX_AS_RETURNED = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "nginx-deployment", "labels": {"app": "nginx"}, "generation": 1},
    "spec": {
        "progressDeadlineSeconds": 600, "replicas": 3, "revisionHistoryLimit": 10,
        "selector": {"matchLabels": {"app": "nginx"}},
        "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}, "type": "RollingUpdate"},
        "template": {
            "metadata": {"creationTimestamp": None, "labels": {"app": "nginx"}},
            "spec": {
                "containers": [{"image": "nginx:1.14.2", "imagePullPolicy": "IfNotPresent", "name": "nginx",
                                "ports": [{"containerPort": 80, "protocol": "TCP"}], "resources": {},
                                "terminationMessagePath": "/dev/termination-log",
                                "terminationMessagePolicy": "File"}],
                "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                "securityContext": {}, "terminationGracePeriodSeconds": 30,
            },
        },
    },
    "status": {},
}


def prepared(group: str, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
    info = next(i for i in Registry().resources() if i.group == group and i.plural == plural)
    obj = copy.deepcopy(obj)
    strategy_table()[(group, plural)].prepare_for_create(info, obj)
    return obj


def test_nginx_deployment_comes_back_as_kube_returns_it():
    assert prepared("apps", "deployments", NGINX) == NGINX_AS_RETURNED


def test_defaults_never_replace_what_the_client_set():
    dep = copy.deepcopy(NGINX)
    dep["spec"]["strategy"] = {"type": "Recreate"}
    dep["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "Never"
    set_defaults("apps", "v1", "Deployment", dep)
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    assert dep["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Never"


def test_image_pull_policy_follows_the_tag():
    assert image_tag("nginx") == "latest" and image_tag("registry:5000/app") == "latest"
    assert image_tag("nginx@sha256:abc") == "" and image_tag("registry:5000/app:1.0") == "1.0"
    assert default_pull_policy("nginx") == "Always" and default_pull_policy("nginx:latest") == "Always"
    assert default_pull_policy("nginx:1.27") == "IfNotPresent"
    assert default_pull_policy("nginx@sha256:abc") == "IfNotPresent"


def test_pod_defaults_include_pod_only_rules():
    pod = {"spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"limits": {"cpu": "1"}},
                                    "livenessProbe": {"httpGet": {"port": 8080}},
                                    "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]}],
                    "volumes": [{"name": "v"}, {"name": "s", "secret": {"secretName": "s"}}]}}
    set_defaults("", "v1", "Pod", pod)
    spec = pod["spec"]
    container = spec["containers"][0]
    assert spec["enableServiceLinks"] is True and container["imagePullPolicy"] == "Always"
    assert container["resources"] == {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}
    assert container["livenessProbe"] == {"httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"},
                                          "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1,
                                          "failureThreshold": 3}
    assert container["env"][0]["valueFrom"]["fieldRef"]["apiVersion"] == "v1"
    assert spec["volumes"] == [{"name": "v", "emptyDir": {}},
                               {"name": "s", "secret": {"secretName": "s", "defaultMode": 420}}]


def test_pod_templates_get_no_pod_only_defaults():
    dep = copy.deepcopy(NGINX)
    dep["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}}
    set_defaults("apps", "v1", "Deployment", dep)
    assert "enableServiceLinks" not in dep["spec"]["template"]["spec"]
    assert dep["spec"]["template"]["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "1"}}


def test_requests_from_limits_cover_init_containers_but_not_ephemeral_ones():
    limited = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}}
    pod = {"spec": {key: [{"name": key, "image": "busybox", "resources": copy.deepcopy(limited)}]
                    for key in ("initContainers", "containers", "ephemeralContainers")}}
    set_defaults("", "v1", "Pod", pod)
    spec = pod["spec"]
    for key in ("initContainers", "containers"):
        assert spec[key][0]["resources"] == {"limits": {"cpu": "1", "memory": "1Gi"},
                                             "requests": {"cpu": "500m", "memory": "1Gi"}}
    assert spec["ephemeralContainers"][0]["resources"] == limited


def test_service_defaults():
    svc = {"spec": {"ports": [{"port": 80}], "selector": {"app": "x"}}}
    set_defaults("", "v1", "Service", svc)
    assert svc["spec"] == {"ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}], "selector": {"app": "x"},
                           "sessionAffinity": "None", "type": "ClusterIP", "internalTrafficPolicy": "Cluster"}
    lb = {"spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP", "ports": [{"port": 80, "targetPort": "web"}]}}
    set_defaults("", "v1", "Service", lb)
    assert lb["spec"]["externalTrafficPolicy"] == "Cluster" and lb["spec"]["allocateLoadBalancerNodePorts"] is True
    assert lb["spec"]["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 10800}}
    assert lb["spec"]["ports"][0]["targetPort"] == "web"


def test_workload_defaults():
    sts = {"spec": {"template": {"spec": {"containers": []}}}}
    set_defaults("apps", "v1", "StatefulSet", sts)
    assert sts["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert sts["spec"]["podManagementPolicy"] == "OrderedReady" and sts["spec"]["replicas"] == 1
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    ds = {"spec": {}}
    set_defaults("apps", "v1", "DaemonSet", ds)
    assert ds["spec"]["updateStrategy"] == {"type": "RollingUpdate",
                                            "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    job = {"metadata": {}, "spec": {"template": {"metadata": {"labels": {"a": "b"}}, "spec": {}}}}
    set_defaults("batch", "v1", "Job", job)
    assert {k: job["spec"][k] for k in ("completions", "parallelism", "backoffLimit", "completionMode", "suspend",
                                         "podReplacementPolicy")} == {
        "completions": 1, "parallelism": 1, "backoffLimit": 6, "completionMode": "NonIndexed", "suspend": False,
        "podReplacementPolicy": "TerminatingOrFailed"}
    assert job["metadata"]["labels"] == {"a": "b"}
    cron = {"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {}}}}}}
    set_defaults("batch", "v1", "CronJob", cron)
    assert cron["spec"]["concurrencyPolicy"] == "Allow" and cron["spec"]["successfulJobsHistoryLimit"] == 3
    assert cron["spec"]["jobTemplate"]["metadata"] == {"creationTimestamp": None}
    assert cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] == "Always"


def test_defaults_of_other_groups():
    policy = {"spec": {"podSelector": {}, "egress": [{"ports": [{"port": 53}]}]}}
    set_defaults("networking.k8s.io", "v1", "NetworkPolicy", policy)
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert policy["spec"]["egress"][0]["ports"][0]["protocol"] == "TCP"
    binding = {"subjects": [{"kind": "User", "name": "a"}, {"kind": "ServiceAccount", "name": "b"}]}
    set_defaults("rbac.authorization.k8s.io", "v1", "RoleBinding", binding)
    assert [s["apiGroup"] for s in binding["subjects"]] == ["rbac.authorization.k8s.io", ""]
    hooks = {"webhooks": [{"name": "w", "clientConfig": {"service": {"name": "s", "namespace": "n"}},
                           "rules": [{"operations": ["CREATE"]}]}]}
    set_defaults("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration", hooks)
    hook = hooks["webhooks"][0]
    assert (hook["failurePolicy"], hook["matchPolicy"], hook["timeoutSeconds"], hook["reinvocationPolicy"]) == (
        "Fail", "Equivalent", 10, "Never")
    assert hook["clientConfig"]["service"]["port"] == 443 and hook["rules"][0]["scope"] == "*"
    sc: dict[str, Any] = {"provisioner": "x"}
    set_defaults("storage.k8s.io", "v1", "StorageClass", sc)
    assert (sc["reclaimPolicy"], sc["volumeBindingMode"]) == ("Delete", "Immediate")
    hpa = {"spec": {"maxReplicas": 3}}
    set_defaults("autoscaling", "v2", "HorizontalPodAutoscaler", hpa)
    assert hpa["spec"]["minReplicas"] == 1 and hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    level = {"spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {}}}}}
    set_defaults("flowcontrol.apiserver.k8s.io", "v1", "PriorityLevelConfiguration", level)
    assert level["spec"]["limited"]["nominalConcurrencyShares"] == 30
    assert level["spec"]["limited"]["limitResponse"]["queuing"] == {"queues": 64, "handSize": 8,
                                                                   "queueLengthLimit": 50}
