"""Kubernetes protobuf bodies (``application/vnd.kubernetes.protobuf``) for the kinds kubectl sends that way.

``kubectl create configmap|secret|namespace|serviceaccount|service|deployment|job|cronjob|ingress|pdb|role|
rolebinding|quota|priorityclass``, ``kubectl autoscale`` and ``kubectl certificate approve|deny`` send a
protobuf body: the 4-byte magic ``k8s\\x00`` followed by a ``runtime.Unknown`` message (1 typeMeta
{1 apiVersion, 2 kind}, 2 raw, 3 contentEncoding, 4 contentType) whose ``raw`` bytes are the kind's own
message from k8s.io/api's generated.proto. This module decodes such bodies into the object's JSON form and
encodes JSON objects back (for tests and round trips), with a small hand-written wire codec and per-message
field tables.

No package on PyPI ships the field numbers (neither the OpenAPI definitions nor the Python clients carry
them), so the tables hold the numbers of k8s.io/api's generated.proto for the messages ``kubectl create``
sends, and nothing more: every other client writes JSON.

Malformed input raises ``ValueError`` (the server answers 400); a kind without a table raises
:class:`UnsupportedKindError`, a ``ValueError`` subclass (the server answers 415).
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "MAGIC",
    "PROTOBUF_CONTENT_TYPE",
    "UnsupportedKindError",
    "decode_k8s_protobuf",
    "encode_k8s_protobuf",
    "is_protobuf",
    "len_field",
    "supported_kinds",
    "varint_field",
]

MAGIC = b"k8s\x00"
PROTOBUF_CONTENT_TYPE = "application/vnd.kubernetes.protobuf"


class UnsupportedKindError(ValueError):
    """The envelope is well formed but names a kind this module has no message table for."""


def is_protobuf(content_type: str | None) -> bool:
    """True when a Content-Type header names the Kubernetes protobuf media type (parameters ignored)."""
    if not content_type:
        return False
    return content_type.split(";", 1)[0].strip().lower() == PROTOBUF_CONTENT_TYPE


# ------------------------------------------------------------------------------------------ message tables
# A field is (json name, type, sub-table or None, pointer). Types: str, bool, int, bytes, msg, inline (an embedded
# message whose fields appear in the parent's JSON), time, map_ss, map_sb, map_sq (values are resource.Quantity),
# map_sl (values are ExtraValue string lists), rep_str, rep_msg, intstr, fieldsv1. "pointer" fields keep
# zero values in JSON (Go *T fields); other zero values are omitted like Go's omitempty. A field number not in
# a table is skipped when it carries a zero value (Go marshals those) and refused otherwise.

Field = tuple[str, str, "dict[int, Field] | None", bool]
Table = dict[int, Field]

_TYPE_META: Table = {1: ("apiVersion", "str", None, False), 2: ("kind", "str", None, False)}
_FIELDS_V1_TYPE = "fieldsv1"

_OWNER_REFERENCE: Table = {
    5: ("apiVersion", "str", None, False), 1: ("kind", "str", None, False), 3: ("name", "str", None, False),
    4: ("uid", "str", None, False), 6: ("controller", "bool", None, True),
    7: ("blockOwnerDeletion", "bool", None, True),
}
_MANAGED_FIELDS_ENTRY: Table = {
    1: ("manager", "str", None, False), 2: ("operation", "str", None, False), 3: ("apiVersion", "str", None, False),
    4: ("time", "time", None, False), 6: ("fieldsType", "str", None, False),
    7: ("fieldsV1", _FIELDS_V1_TYPE, None, False), 8: ("subresource", "str", None, False),
}
_OBJECT_META: Table = {
    1: ("name", "str", None, False), 2: ("generateName", "str", None, False), 3: ("namespace", "str", None, False),
    4: ("selfLink", "str", None, False), 5: ("uid", "str", None, False), 6: ("resourceVersion", "str", None, False),
    7: ("generation", "int", None, False), 8: ("creationTimestamp", "time", None, False),
    9: ("deletionTimestamp", "time", None, False), 10: ("deletionGracePeriodSeconds", "int", None, True),
    11: ("labels", "map_ss", None, False), 12: ("annotations", "map_ss", None, False),
    13: ("ownerReferences", "rep_msg", _OWNER_REFERENCE, False), 14: ("finalizers", "rep_str", None, False),
    17: ("managedFields", "rep_msg", _MANAGED_FIELDS_ENTRY, False),
}
_CONDITION: Table = {
    1: ("type", "str", None, False), 2: ("status", "str", None, False), 3: ("observedGeneration", "int", None, False),
    4: ("lastTransitionTime", "time", None, False), 5: ("reason", "str", None, False),
    6: ("message", "str", None, False),
}
_CONFIG_MAP: Table = {
    1: ("metadata", "msg", _OBJECT_META, False), 2: ("data", "map_ss", None, False),
    3: ("binaryData", "map_sb", None, False), 4: ("immutable", "bool", None, True),
}
_SECRET: Table = {
    1: ("metadata", "msg", _OBJECT_META, False), 2: ("data", "map_sb", None, False), 3: ("type", "str", None, False),
    4: ("stringData", "map_ss", None, False), 5: ("immutable", "bool", None, True),
}
_NAMESPACE_CONDITION: Table = {
    1: ("type", "str", None, False), 2: ("status", "str", None, False),
    4: ("lastTransitionTime", "time", None, False), 5: ("reason", "str", None, False),
    6: ("message", "str", None, False),
}
_NAMESPACE: Table = {
    1: ("metadata", "msg", _OBJECT_META, False),
    2: ("spec", "msg", {1: ("finalizers", "rep_str", None, False)}, False),
    3: ("status", "msg", {1: ("phase", "str", None, False),
                          2: ("conditions", "rep_msg", _NAMESPACE_CONDITION, False)}, False),
}
_OBJECT_REFERENCE: Table = {
    1: ("kind", "str", None, False), 2: ("namespace", "str", None, False), 3: ("name", "str", None, False),
    4: ("uid", "str", None, False), 5: ("apiVersion", "str", None, False), 6: ("resourceVersion", "str", None, False),
    7: ("fieldPath", "str", None, False),
}
_SERVICE_ACCOUNT: Table = {
    1: ("metadata", "msg", _OBJECT_META, False), 2: ("secrets", "rep_msg", _OBJECT_REFERENCE, False),
    3: ("imagePullSecrets", "rep_msg", {1: ("name", "str", None, False)}, False),
    4: ("automountServiceAccountToken", "bool", None, True),
}
_SERVICE_PORT: Table = {
    1: ("name", "str", None, False), 2: ("protocol", "str", None, False), 6: ("appProtocol", "str", None, True),
    3: ("port", "int", None, False), 4: ("targetPort", "intstr", None, False), 5: ("nodePort", "int", None, False),
}
_SERVICE_SPEC: Table = {
    1: ("ports", "rep_msg", _SERVICE_PORT, False), 2: ("selector", "map_ss", None, False),
    3: ("clusterIP", "str", None, False), 18: ("clusterIPs", "rep_str", None, False), 4: ("type", "str", None, False),
    5: ("externalIPs", "rep_str", None, False), 7: ("sessionAffinity", "str", None, False),
    8: ("loadBalancerIP", "str", None, False), 9: ("loadBalancerSourceRanges", "rep_str", None, False),
    10: ("externalName", "str", None, False), 11: ("externalTrafficPolicy", "str", None, False),
    12: ("healthCheckNodePort", "int", None, False), 13: ("publishNotReadyAddresses", "bool", None, False),
    14: ("sessionAffinityConfig", "msg", {1: ("clientIP", "msg", {1: ("timeoutSeconds", "int", None, True)},
                                              False)}, False),
    19: ("ipFamilies", "rep_str", None, False), 17: ("ipFamilyPolicy", "str", None, True),
    20: ("allocateLoadBalancerNodePorts", "bool", None, True), 21: ("loadBalancerClass", "str", None, True),
    22: ("internalTrafficPolicy", "str", None, True), 23: ("trafficDistribution", "str", None, True),
}
_LOAD_BALANCER_INGRESS: Table = {
    1: ("ip", "str", None, False), 2: ("hostname", "str", None, False), 3: ("ipMode", "str", None, True),
    4: ("ports", "rep_msg", {1: ("port", "int", None, False), 2: ("protocol", "str", None, False),
                             3: ("error", "str", None, True)}, False),
}
_SERVICE: Table = {
    1: ("metadata", "msg", _OBJECT_META, False), 2: ("spec", "msg", _SERVICE_SPEC, False),
    3: ("status", "msg", {1: ("loadBalancer", "msg", {1: ("ingress", "rep_msg", _LOAD_BALANCER_INGRESS, False)},
                              False),
                          2: ("conditions", "rep_msg", _CONDITION, False)}, False),
}

# apps/v1 Deployment as ``kubectl create deployment`` sends it. PodSpec and Container cover their scalar
# fields and the lists kubectl and simple manifests use; a set (non-zero) field outside the tables is refused
# with a ValueError rather than silently dropped.
_LABEL_SELECTOR: Table = {
    1: ("matchLabels", "map_ss", None, False),
    2: ("matchExpressions", "rep_msg", {1: ("key", "str", None, False), 2: ("operator", "str", None, False),
                                        3: ("values", "rep_str", None, False)}, False),
}
_CONTAINER_PORT: Table = {
    1: ("name", "str", None, False), 2: ("hostPort", "int", None, False), 3: ("containerPort", "int", None, False),
    4: ("protocol", "str", None, False), 5: ("hostIP", "str", None, False),
}
_RESOURCES: Table = {
    1: ("limits", "map_sq", None, False), 2: ("requests", "map_sq", None, False),
    3: ("claims", "rep_msg", {1: ("name", "str", None, False), 2: ("request", "str", None, False)}, False),
}
_VOLUME_MOUNT: Table = {
    1: ("name", "str", None, False), 2: ("readOnly", "bool", None, False), 7: ("recursiveReadOnly", "str", None, True),
    3: ("mountPath", "str", None, False), 4: ("subPath", "str", None, False),
    5: ("mountPropagation", "str", None, True), 6: ("subPathExpr", "str", None, False),
}
_CONTAINER: Table = {
    1: ("name", "str", None, False), 2: ("image", "str", None, False), 3: ("command", "rep_str", None, False),
    4: ("args", "rep_str", None, False), 5: ("workingDir", "str", None, False),
    6: ("ports", "rep_msg", _CONTAINER_PORT, False),
    7: ("env", "rep_msg", {1: ("name", "str", None, False), 2: ("value", "str", None, False)}, False),
    8: ("resources", "msg", _RESOURCES, False), 9: ("volumeMounts", "rep_msg", _VOLUME_MOUNT, False),
    13: ("terminationMessagePath", "str", None, False), 20: ("terminationMessagePolicy", "str", None, False),
    14: ("imagePullPolicy", "str", None, False), 16: ("stdin", "bool", None, False),
    17: ("stdinOnce", "bool", None, False), 18: ("tty", "bool", None, False), 24: ("restartPolicy", "str", None, True),
}
_POD_SPEC: Table = {
    20: ("initContainers", "rep_msg", _CONTAINER, False), 2: ("containers", "rep_msg", _CONTAINER, False),
    3: ("restartPolicy", "str", None, False), 4: ("terminationGracePeriodSeconds", "int", None, True),
    5: ("activeDeadlineSeconds", "int", None, True), 6: ("dnsPolicy", "str", None, False),
    7: ("nodeSelector", "map_ss", None, False), 8: ("serviceAccountName", "str", None, False),
    9: ("serviceAccount", "str", None, False), 21: ("automountServiceAccountToken", "bool", None, True),
    10: ("nodeName", "str", None, False), 11: ("hostNetwork", "bool", None, False),
    12: ("hostPID", "bool", None, False), 13: ("hostIPC", "bool", None, False),
    27: ("shareProcessNamespace", "bool", None, True),
    15: ("imagePullSecrets", "rep_msg", {1: ("name", "str", None, False)}, False),
    16: ("hostname", "str", None, False), 17: ("subdomain", "str", None, False),
    19: ("schedulerName", "str", None, False),
    22: ("tolerations", "rep_msg", {1: ("key", "str", None, False), 2: ("operator", "str", None, False),
                                    3: ("value", "str", None, False), 4: ("effect", "str", None, False),
                                    5: ("tolerationSeconds", "int", None, True)}, False),
    23: ("hostAliases", "rep_msg", {1: ("ip", "str", None, False), 2: ("hostnames", "rep_str", None, False)}, False),
    24: ("priorityClassName", "str", None, False), 25: ("priority", "int", None, True),
    28: ("readinessGates", "rep_msg", {1: ("conditionType", "str", None, False)}, False),
    29: ("runtimeClassName", "str", None, True), 30: ("enableServiceLinks", "bool", None, True),
    31: ("preemptionPolicy", "str", None, True), 35: ("setHostnameAsFQDN", "bool", None, True),
    37: ("hostUsers", "bool", None, True), 38: ("schedulingGates", "rep_msg", {1: ("name", "str", None, False)}, False),
}
_DEPLOYMENT: Table = {
    1: ("metadata", "msg", _OBJECT_META, False),
    2: ("spec", "msg", {
        1: ("replicas", "int", None, True), 2: ("selector", "msg", _LABEL_SELECTOR, False),
        3: ("template", "msg", {1: ("metadata", "msg", _OBJECT_META, False), 2: ("spec", "msg", _POD_SPEC, False)},
            False),
        4: ("strategy", "msg", {1: ("type", "str", None, False),
                                2: ("rollingUpdate", "msg", {1: ("maxUnavailable", "intstr", None, False),
                                                             2: ("maxSurge", "intstr", None, False)}, False)}, False),
        5: ("minReadySeconds", "int", None, False), 6: ("revisionHistoryLimit", "int", None, True),
        7: ("paused", "bool", None, False), 9: ("progressDeadlineSeconds", "int", None, True),
    }, False),
    3: ("status", "msg", {
        1: ("observedGeneration", "int", None, False), 2: ("replicas", "int", None, False),
        3: ("updatedReplicas", "int", None, False), 7: ("readyReplicas", "int", None, False),
        4: ("availableReplicas", "int", None, False), 5: ("unavailableReplicas", "int", None, False),
        9: ("terminatingReplicas", "int", None, True),
        6: ("conditions", "rep_msg", {1: ("type", "str", None, False), 2: ("status", "str", None, False),
                                      6: ("lastUpdateTime", "time", None, False),
                                      7: ("lastTransitionTime", "time", None, False),
                                      4: ("reason", "str", None, False), 5: ("message", "str", None, False)}, False),
        8: ("collisionCount", "int", None, True),
    }, False),
}

# batch/v1, networking.k8s.io/v1 Ingress and policy/v1 PDB, as kubectl create job|cronjob|ingress|pdb send them.
_POD_TEMPLATE_SPEC: Table = {1: ("metadata", "msg", _OBJECT_META, False), 2: ("spec", "msg", _POD_SPEC, False)}
_JOB_SPEC: Table = {
    1: ("parallelism", "int", None, True), 2: ("completions", "int", None, True),
    3: ("activeDeadlineSeconds", "int", None, True), 7: ("backoffLimit", "int", None, True),
    12: ("backoffLimitPerIndex", "int", None, True), 13: ("maxFailedIndexes", "int", None, True),
    4: ("selector", "msg", _LABEL_SELECTOR, False), 5: ("manualSelector", "bool", None, True),
    6: ("template", "msg", _POD_TEMPLATE_SPEC, False), 8: ("ttlSecondsAfterFinished", "int", None, True),
    9: ("completionMode", "str", None, True), 10: ("suspend", "bool", None, True),
    14: ("podReplacementPolicy", "str", None, True), 15: ("managedBy", "str", None, True),
}
_JOB: Table = {1: ("metadata", "msg", _OBJECT_META, False), 2: ("spec", "msg", _JOB_SPEC, False),
               3: ("status", "msg", {}, False)}
_CRON_JOB: Table = {
    1: ("metadata", "msg", _OBJECT_META, False),
    2: ("spec", "msg", {
        1: ("schedule", "str", None, False), 8: ("timeZone", "str", None, True),
        2: ("startingDeadlineSeconds", "int", None, True), 3: ("concurrencyPolicy", "str", None, False),
        4: ("suspend", "bool", None, True),
        5: ("jobTemplate", "msg", {1: ("metadata", "msg", _OBJECT_META, False),
                                   2: ("spec", "msg", _JOB_SPEC, False)}, False),
        6: ("successfulJobsHistoryLimit", "int", None, True), 7: ("failedJobsHistoryLimit", "int", None, True),
    }, False),
    3: ("status", "msg", {}, False),
}
_INGRESS_BACKEND: Table = {
    4: ("service", "msg", {1: ("name", "str", None, False),
                           2: ("port", "msg", {1: ("name", "str", None, False), 2: ("number", "int", None, False)},
                               False)}, False),
    3: ("resource", "msg", {1: ("apiGroup", "str", None, True), 2: ("kind", "str", None, False),
                            3: ("name", "str", None, False)}, False),
}
_INGRESS_RULE: Table = {
    1: ("host", "str", None, False),
    # IngressRuleValue is embedded: its field http appears in the rule's JSON itself.
    2: ("ingressRuleValue", "inline", {1: ("http", "msg", {1: ("paths", "rep_msg", {
        1: ("path", "str", None, False), 3: ("pathType", "str", None, True),
        2: ("backend", "msg", _INGRESS_BACKEND, False)}, False)}, False)}, False),
}
_INGRESS: Table = {
    1: ("metadata", "msg", _OBJECT_META, False),
    2: ("spec", "msg", {
        4: ("ingressClassName", "str", None, True), 1: ("defaultBackend", "msg", _INGRESS_BACKEND, False),
        2: ("tls", "rep_msg", {1: ("hosts", "rep_str", None, False), 2: ("secretName", "str", None, False)}, False),
        3: ("rules", "rep_msg", _INGRESS_RULE, False),
    }, False),
    3: ("status", "msg", {}, False),
}
_PDB: Table = {
    1: ("metadata", "msg", _OBJECT_META, False),
    2: ("spec", "msg", {1: ("minAvailable", "intstr", None, False), 2: ("selector", "msg", _LABEL_SELECTOR, False),
                        3: ("maxUnavailable", "intstr", None, False),
                        4: ("unhealthyPodEvictionPolicy", "str", None, True)}, False),
    3: ("status", "msg", {}, False),
}

# rbac.authorization.k8s.io/v1 and the review kinds (kubectl create role|rolebinding|token, auth can-i|whoami)
_POLICY_RULE: Table = {
    1: ("verbs", "rep_str", None, False), 2: ("apiGroups", "rep_str", None, False),
    3: ("resources", "rep_str", None, False), 4: ("resourceNames", "rep_str", None, False),
    5: ("nonResourceURLs", "rep_str", None, False),
}
_ROLE: Table = {1: ("metadata", "msg", _OBJECT_META, False), 2: ("rules", "rep_msg", _POLICY_RULE, False)}
_CLUSTER_ROLE: Table = {
    **_ROLE, 3: ("aggregationRule", "msg", {1: ("clusterRoleSelectors", "rep_msg", _LABEL_SELECTOR, False)}, False),
}
_ROLE_BINDING: Table = {
    1: ("metadata", "msg", _OBJECT_META, False),
    2: ("subjects", "rep_msg", {1: ("kind", "str", None, False), 2: ("apiGroup", "str", None, False),
                                3: ("name", "str", None, False), 4: ("namespace", "str", None, False)}, False),
    3: ("roleRef", "msg", {1: ("apiGroup", "str", None, False), 2: ("kind", "str", None, False),
                           3: ("name", "str", None, False)}, False),
}
_ACCESS_SPEC: Table = {
    1: ("resourceAttributes", "msg", {
        1: ("namespace", "str", None, False), 2: ("verb", "str", None, False), 3: ("group", "str", None, False),
        4: ("version", "str", None, False), 5: ("resource", "str", None, False),
        6: ("subresource", "str", None, False), 7: ("name", "str", None, False)}, False),
    2: ("nonResourceAttributes", "msg", {1: ("path", "str", None, False), 2: ("verb", "str", None, False)}, False),
    3: ("user", "str", None, False), 4: ("groups", "rep_str", None, False), 6: ("uid", "str", None, False),
}
_ACCESS_REVIEW: Table = {
    1: ("metadata", "msg", _OBJECT_META, False), 2: ("spec", "msg", _ACCESS_SPEC, False),
    3: ("status", "msg", {1: ("allowed", "bool", None, False), 4: ("denied", "bool", None, False),
                          2: ("reason", "str", None, False), 3: ("evaluationError", "str", None, False)}, False),
}
_RESOURCE_RULE: Table = {1: ("verbs", "rep_str", None, False), 2: ("apiGroups", "rep_str", None, False),
                         3: ("resources", "rep_str", None, False), 4: ("resourceNames", "rep_str", None, False)}
_RULES_REVIEW: Table = {
    1: ("metadata", "msg", _OBJECT_META, False), 2: ("spec", "msg", {1: ("namespace", "str", None, False)}, False),
    3: ("status", "msg", {1: ("resourceRules", "rep_msg", _RESOURCE_RULE, False),
                          2: ("nonResourceRules", "rep_msg", {1: ("verbs", "rep_str", None, False),
                                                              2: ("nonResourceURLs", "rep_str", None, False)}, False),
                          3: ("incomplete", "bool", None, False), 4: ("evaluationError", "str", None, False)}, False),
}
_USER_INFO: Table = {1: ("username", "str", None, False), 2: ("uid", "str", None, False),
                     3: ("groups", "rep_str", None, False)}
_TOKEN_REQUEST: Table = {
    1: ("metadata", "msg", _OBJECT_META, False),
    2: ("spec", "msg", {1: ("audiences", "rep_str", None, False), 4: ("expirationSeconds", "int", None, True),
                        3: ("boundObjectRef", "msg", {1: ("kind", "str", None, False),
                                                      2: ("apiVersion", "str", None, False),
                                                      3: ("name", "str", None, False),
                                                      4: ("uid", "str", None, False)}, False)}, False),
    3: ("status", "msg", {1: ("token", "str", None, False), 2: ("expirationTimestamp", "time", None, False)}, False),
}
_TOKEN_REVIEW: Table = {
    1: ("metadata", "msg", _OBJECT_META, False),
    2: ("spec", "msg", {1: ("token", "str", None, False), 2: ("audiences", "rep_str", None, False)}, False),
    3: ("status", "msg", {1: ("authenticated", "bool", None, False), 2: ("user", "msg", _USER_INFO, False),
                          3: ("error", "str", None, False), 4: ("audiences", "rep_str", None, False)}, False),
}

_RESOURCE_QUOTA: Table = {
    1: ("metadata", "msg", _OBJECT_META, False),
    2: ("spec", "msg", {
        1: ("hard", "map_sq", None, False), 2: ("scopes", "rep_str", None, False),
        3: ("scopeSelector", "msg", {1: ("matchExpressions", "rep_msg", {
            1: ("scopeName", "str", None, False), 2: ("operator", "str", None, False),
            3: ("values", "rep_str", None, False)}, False)}, False)}, False),
    3: ("status", "msg", {1: ("hard", "map_sq", None, False), 2: ("used", "map_sq", None, False)}, False),
}
_PRIORITY_CLASS: Table = {
    1: ("metadata", "msg", _OBJECT_META, False), 2: ("value", "int", None, True),
    3: ("globalDefault", "bool", None, False), 4: ("description", "str", None, False),
    5: ("preemptionPolicy", "str", None, True),
}
_HPA_V1: Table = {  # autoscaling/v1, as ``kubectl autoscale`` sends it
    1: ("metadata", "msg", _OBJECT_META, False),
    2: ("spec", "msg", {
        1: ("scaleTargetRef", "msg", {1: ("kind", "str", None, False), 2: ("name", "str", None, False),
                                      3: ("apiVersion", "str", None, False)}, False),
        2: ("minReplicas", "int", None, True), 3: ("maxReplicas", "int", None, True),
        4: ("targetCPUUtilizationPercentage", "int", None, True)}, False),
    3: ("status", "msg", {
        1: ("observedGeneration", "int", None, True), 2: ("lastScaleTime", "time", None, False),
        3: ("currentReplicas", "int", None, True), 4: ("desiredReplicas", "int", None, True),
        5: ("currentCPUUtilizationPercentage", "int", None, True)}, False),
}

_CSR: Table = {  # what ``kubectl certificate approve|deny`` sends back
    1: ("metadata", "msg", _OBJECT_META, False),
    2: ("spec", "msg", {
        1: ("request", "bytes", None, False), 7: ("signerName", "str", None, False),
        8: ("expirationSeconds", "int", None, True), 5: ("usages", "rep_str", None, False),
        2: ("username", "str", None, False), 3: ("uid", "str", None, False), 4: ("groups", "rep_str", None, False),
        6: ("extra", "map_sl", None, False)}, False),
    3: ("status", "msg", {
        1: ("conditions", "rep_msg", {
            1: ("type", "str", None, False), 6: ("status", "str", None, False), 2: ("reason", "str", None, False),
            3: ("message", "str", None, False), 4: ("lastUpdateTime", "time", None, False),
            5: ("lastTransitionTime", "time", None, False)}, False),
        2: ("certificate", "bytes", None, False)}, False),
}

_KINDS: dict[tuple[str, str], Table] = {
    ("v1", "ConfigMap"): _CONFIG_MAP,
    ("v1", "Secret"): _SECRET,
    ("v1", "Namespace"): _NAMESPACE,
    ("v1", "ServiceAccount"): _SERVICE_ACCOUNT,
    ("v1", "Service"): _SERVICE,
    ("v1", "ResourceQuota"): _RESOURCE_QUOTA,
    ("scheduling.k8s.io/v1", "PriorityClass"): _PRIORITY_CLASS,
    ("autoscaling/v1", "HorizontalPodAutoscaler"): _HPA_V1,
    ("certificates.k8s.io/v1", "CertificateSigningRequest"): _CSR,
    ("apps/v1", "Deployment"): _DEPLOYMENT,
    ("batch/v1", "Job"): _JOB,
    ("batch/v1", "CronJob"): _CRON_JOB,
    ("networking.k8s.io/v1", "Ingress"): _INGRESS,
    ("policy/v1", "PodDisruptionBudget"): _PDB,
    ("rbac.authorization.k8s.io/v1", "Role"): _ROLE,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): _CLUSTER_ROLE,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): _ROLE_BINDING,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): _ROLE_BINDING,
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): _ACCESS_REVIEW,
    ("authorization.k8s.io/v1", "SubjectAccessReview"): _ACCESS_REVIEW,
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview"): _ACCESS_REVIEW,
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): _RULES_REVIEW,
    ("authentication.k8s.io/v1", "SelfSubjectReview"): {
        1: ("metadata", "msg", _OBJECT_META, False),
        2: ("status", "msg", {1: ("userInfo", "msg", _USER_INFO, False)}, False)},
    ("authentication.k8s.io/v1", "TokenRequest"): _TOKEN_REQUEST,
    ("authentication.k8s.io/v1", "TokenReview"): _TOKEN_REVIEW,
}
_BY_NAME: dict[int, dict[str, tuple[int, Field]]] = {}


def supported_kinds() -> list[tuple[str, str]]:
    """The (apiVersion, kind) pairs this module can decode and encode."""
    return sorted(_KINDS)


def _by_name(table: Table) -> dict[str, tuple[int, Field]]:
    index = _BY_NAME.get(id(table))
    if index is None:
        index = _BY_NAME[id(table)] = {field[0]: (number, field) for number, field in table.items()}
    return index


# --------------------------------------------------------------------------------------------- wire reader

def _read_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise ValueError("protobuf: truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ValueError("protobuf: varint longer than 10 bytes")


def _fields(buf: bytes, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, int, Any]]:
    """Yield (field number, wire type, value) where value is an int or a bytes slice for wire type 2."""
    end = len(buf) if end is None else end
    while pos < end:
        key, pos = _read_varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ValueError("protobuf: illegal field number 0")
        value: int | bytes
        if wire == 0:
            value, pos = _read_varint(buf, pos, end)
        elif wire == 2:
            length, pos = _read_varint(buf, pos, end)
            if pos + length > end:
                raise ValueError(f"protobuf: field {number} length {length} exceeds the message")
            value = buf[pos:pos + length]
            pos += length
        elif wire == 1:
            if pos + 8 > end:
                raise ValueError("protobuf: truncated fixed64")
            value = struct.unpack_from("<Q", buf, pos)[0]
            pos += 8
        elif wire == 5:
            if pos + 4 > end:
                raise ValueError("protobuf: truncated fixed32")
            value = struct.unpack_from("<I", buf, pos)[0]
            pos += 4
        else:
            raise ValueError(f"protobuf: unsupported wire type {wire} for field {number}")
        yield number, wire, value


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _text(raw: bytes, name: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"protobuf: field {name!r} is not valid UTF-8") from exc


def _expect(wire: int, expected: int, name: str) -> None:
    if wire != expected:
        raise ValueError(f"protobuf: field {name!r} has wire type {wire}, expected {expected}")


def _format_time(raw: bytes) -> str | None:
    seconds = nanos = 0
    for number, wire, value in _fields(raw):
        if number == 1:
            _expect(wire, 0, "seconds")
            seconds = _signed64(value)
        elif number == 2:
            _expect(wire, 0, "nanos")
            nanos = _signed64(value)
    if seconds == 0 and nanos == 0:
        return None
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError) as exc:
        raise ValueError(f"protobuf: timestamp {seconds} out of range") from exc


def _decode_map_entry(raw: bytes, kind: str, name: str) -> tuple[str, Any]:
    key, value = "", [] if kind == "map_sl" else ""
    for number, wire, item in _fields(raw):
        _expect(wire, 2, name)
        if number == 1:
            key = _text(item, name)
        elif number == 2:
            if kind == "map_sl":  # an ExtraValue: 1 repeated string items
                value = [_text(v, name) for n, w, v in _fields(item) if n == 1 and w == 2]
            elif kind == "map_sb":
                value = base64.b64encode(item).decode("ascii")
            elif kind == "map_sq":
                value = _decode_quantity(item, name)
            else:
                value = _text(item, name)
    return key, value


def _decode_quantity(raw: bytes, name: str) -> str:
    text = ""
    for number, wire, item in _fields(raw):
        if number == 1:
            _expect(wire, 2, name)
            text = _text(item, name)
    return text


def _decode_intstr(raw: bytes) -> int | str:
    kind, int_val, str_val = 0, 0, ""
    for number, wire, value in _fields(raw):
        if number == 1:
            _expect(wire, 0, "targetPort.type")
            kind = value
        elif number == 2:
            _expect(wire, 0, "targetPort.intVal")
            int_val = _signed64(value)
        elif number == 3:
            _expect(wire, 2, "targetPort.strVal")
            str_val = _text(value, "targetPort.strVal")
    return str_val if kind == 1 else int_val


def _decode_message(raw: bytes, table: Table, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, wire, value in _fields(raw):
        field = table.get(number)
        if field is None:
            if value:
                raise ValueError(f"protobuf: field {number} of {where} is not supported; send this object as JSON")
            continue
        name, kind, sub, pointer = field
        if kind in ("int", "bool"):
            _expect(wire, 0, name)
            decoded: Any = bool(value) if kind == "bool" else _signed64(value)
            if decoded or pointer:
                out[name] = decoded
            continue
        _expect(wire, 2, name)
        _decode_length_delimited(out, name, kind, sub, pointer, value, f"{where}.{name}")
    return out


def _decode_length_delimited(out: dict[str, Any], name: str, kind: str, sub: Table | None, pointer: bool,
                             value: bytes, where: str) -> None:
    if kind == "str":
        text = _text(value, name)
        if text or pointer:
            out[name] = text
    elif kind == "bytes":
        out[name] = base64.b64encode(value).decode("ascii")
    elif kind == "msg":
        out[name] = _merge_message(out.get(name), _decode_message(value, sub or {}, where))
    elif kind == "inline":
        out.update(_decode_message(value, sub or {}, where))
    elif kind == "rep_msg":
        out.setdefault(name, []).append(_decode_message(value, sub or {}, where))
    elif kind == "rep_str":
        out.setdefault(name, []).append(_text(value, name))
    elif kind in ("map_ss", "map_sb", "map_sq", "map_sl"):
        key, item = _decode_map_entry(value, kind, name)
        out.setdefault(name, {})[key] = item
    elif kind == "time":
        stamp = _format_time(value)
        if stamp is not None:
            out[name] = stamp
    elif kind == "intstr":
        out[name] = _decode_intstr(value)
    elif kind == _FIELDS_V1_TYPE:
        out[name] = _decode_fields_v1(value)


def _merge_message(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    # A repeated occurrence of a singular message field merges into the earlier one (protobuf semantics).
    if not old:
        return new
    old.update(new)
    return old


def _decode_fields_v1(value: bytes) -> Any:
    for number, wire, raw in _fields(value):
        if number == 1:
            _expect(wire, 2, "fieldsV1.Raw")
            try:
                return json.loads(raw) if raw else {}
            except ValueError as exc:
                raise ValueError("protobuf: fieldsV1 is not valid JSON") from exc
    return {}


def decode_k8s_protobuf(body: bytes) -> dict[str, Any]:
    """Decode a ``k8s\\x00``-prefixed runtime.Unknown body into the object's JSON form (a new dict)."""
    if not isinstance(body, bytes | bytearray | memoryview):
        raise ValueError("protobuf: body must be bytes")
    body = bytes(body)
    if not body.startswith(MAGIC):
        raise ValueError("protobuf: body does not start with the k8s\\x00 magic prefix")
    envelope: dict[str, Any] = {"raw": b"", "contentEncoding": "", "contentType": ""}
    type_meta: dict[str, Any] = {}
    for number, wire, value in _fields(body, len(MAGIC)):
        if number == 1:
            _expect(wire, 2, "typeMeta")
            type_meta = _decode_message(value, _TYPE_META, "typeMeta")
        elif number == 2:
            _expect(wire, 2, "raw")
            envelope["raw"] = value
        elif number in (3, 4):
            _expect(wire, 2, "contentEncoding" if number == 3 else "contentType")
            envelope["contentEncoding" if number == 3 else "contentType"] = _text(value, "envelope")
    if envelope["contentEncoding"]:
        raise ValueError(f"protobuf: unsupported contentEncoding {envelope['contentEncoding']!r}")
    api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
    if not kind:
        raise ValueError("protobuf: envelope has no kind")
    table = _KINDS.get((api_version, kind))
    if table is None:
        raise UnsupportedKindError(f"protobuf: kind {kind!r} in {api_version!r} is not supported; send JSON")
    obj = _decode_message(envelope["raw"], table, kind)
    return {"apiVersion": api_version, "kind": kind, **obj}


# --------------------------------------------------------------------------------------------- wire writer

def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _tag(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def varint_field(number: int, value: int) -> bytes:
    """One varint field (wire type 0) of a message."""
    return _tag(number, 0) + _varint(value)


def len_field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (wire type 2): tag, payload length, payload."""
    return _tag(number, 2) + _varint(len(payload)) + payload


def _encode_time(stamp: str, name: str) -> bytes:
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except (AttributeError, ValueError) as exc:
        raise ValueError(f"protobuf: {name} {stamp!r} is not an RFC 3339 time") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    seconds = int(moment.timestamp())
    out = _tag(1, 0) + _varint(seconds)
    if moment.microsecond:
        out += _tag(2, 0) + _varint(moment.microsecond * 1000)
    return out


def _encode_intstr(value: Any) -> bytes:
    if isinstance(value, str):
        return _tag(1, 0) + _varint(1) + _tag(2, 0) + _varint(0) + len_field(3, value.encode())
    if isinstance(value, int) and not isinstance(value, bool):
        return _tag(1, 0) + _varint(0) + _tag(2, 0) + _varint(value) + len_field(3, b"")
    raise ValueError(f"protobuf: int-or-string value expected, got {value!r}")


def _encode_map(number: int, mapping: Any, kind: str, name: str) -> bytes:
    if not isinstance(mapping, Mapping):
        raise ValueError(f"protobuf: {name} must be a map")
    out = bytearray()
    for key in sorted(mapping):
        item = mapping[key]
        if kind == "map_sb":
            try:
                payload = base64.b64decode(item, validate=True)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"protobuf: {name}[{key}] is not base64") from exc
        elif kind == "map_sq":
            payload = len_field(1, str(item).encode())
        elif kind == "map_sl":
            payload = b"".join(len_field(1, str(v).encode()) for v in item)
        else:
            payload = str(item).encode()
        out += len_field(number, len_field(1, str(key).encode()) + len_field(2, payload))
    return bytes(out)


def _encode_value(number: int, kind: str, sub: Table | None, value: Any, name: str) -> bytes:
    if kind == "str":
        return len_field(number, str(value).encode())
    if kind == "bool":
        return _tag(number, 0) + _varint(1 if value else 0)
    if kind == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"protobuf: {name} must be an integer")
        return _tag(number, 0) + _varint(value)
    if kind == "bytes":
        return len_field(number, base64.b64decode(value))
    if kind == "msg":
        return len_field(number, _encode_message(value, sub or {}, name))
    if kind == "rep_msg":
        return b"".join(len_field(number, _encode_message(item, sub or {}, name)) for item in value)
    if kind == "rep_str":
        return b"".join(len_field(number, str(item).encode()) for item in value)
    if kind in ("map_ss", "map_sb", "map_sq", "map_sl"):
        return _encode_map(number, value, kind, name)
    if kind == "time":
        return len_field(number, _encode_time(value, name))
    if kind == "intstr":
        return len_field(number, _encode_intstr(value))
    if kind == _FIELDS_V1_TYPE:
        raw = json.dumps(value, separators=(",", ":")).encode()
        return len_field(number, len_field(1, raw))
    raise ValueError(f"protobuf: cannot encode field {name} of type {kind}")


def _encode_message(obj: Any, table: Table, where: str) -> bytes:
    if not isinstance(obj, Mapping):
        raise ValueError(f"protobuf: {where} must be an object")
    index = _by_name(table)
    out = bytearray()
    for name, value in obj.items():
        entry = index.get(name)
        if entry is None or value is None:
            continue
        number, (_, kind, sub, _pointer) = entry
        out += _encode_value(number, kind, sub, value, f"{where}.{name}")
    for number, (_, kind, sub, _pointer) in table.items():
        if kind == "inline" and sub:
            names = {field[0] for field in sub.values()}
            embedded = {k: v for k, v in obj.items() if k in names}
            if embedded:
                out += len_field(number, _encode_message(embedded, sub, where))
    return bytes(out)


def encode_k8s_protobuf(obj: Mapping[str, Any]) -> bytes:
    """Encode a JSON object of a supported kind as kubectl does: magic + runtime.Unknown wrapping the message.

    Fields the tables do not know are dropped (like kubectl's typed objects would never carry them).
    """
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    table = _KINDS.get((api_version, kind))
    if table is None:
        raise UnsupportedKindError(f"protobuf: kind {kind!r} in {api_version!r} is not supported")
    type_meta = len_field(1, api_version.encode()) + len_field(2, kind.encode())
    raw = _encode_message({k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}, table, kind)
    envelope = len_field(1, type_meta) + len_field(2, raw) + len_field(3, b"") + len_field(4, b"")
    return MAGIC + envelope
