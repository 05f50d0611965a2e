"""Defaults of apps/v1 and batch/v1 workloads (SetDefaults_* of kube-apiserver 1.32), templates included."""

from __future__ import annotations

from .pod import Obj, _dict, default_pod_template

MAX_INT32 = 2**31 - 1


def _spec(obj: Obj) -> Obj:
    spec = _dict(obj, "spec")
    if spec is None:
        spec = obj["spec"] = {}
    return spec


def default_deployment(obj: Obj) -> None:
    """One replica, RollingUpdate 25%/25%, 10 revisions kept, 600 s progress deadline."""
    spec = _spec(obj)
    spec.setdefault("replicas", 1)
    strategy = _dict(spec, "strategy")
    if strategy is None:
        strategy = spec["strategy"] = {}
    if strategy.setdefault("type", "RollingUpdate") == "RollingUpdate":
        rolling = _dict(strategy, "rollingUpdate")
        if rolling is None:
            rolling = strategy["rollingUpdate"] = {}
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    default_pod_template(spec.get("template"))


def default_daemon_set(obj: Obj) -> None:
    """RollingUpdate with maxUnavailable 1 and maxSurge 0; 10 revisions kept."""
    spec = _spec(obj)
    strategy = _dict(spec, "updateStrategy")
    if strategy is None:
        strategy = spec["updateStrategy"] = {}
    if strategy.setdefault("type", "RollingUpdate") == "RollingUpdate":
        rolling = _dict(strategy, "rollingUpdate")
        if rolling is None:
            rolling = strategy["rollingUpdate"] = {}
        rolling.setdefault("maxUnavailable", 1)
        rolling.setdefault("maxSurge", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    default_pod_template(spec.get("template"))


def default_stateful_set(obj: Obj) -> None:
    """OrderedReady pods, RollingUpdate partition 0, PVCs retained, one replica, 10 revisions kept."""
    spec = _spec(obj)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    strategy = _dict(spec, "updateStrategy")
    if strategy is None:
        strategy = spec["updateStrategy"] = {}
    if "type" not in strategy:
        strategy["type"] = "RollingUpdate"
        if _dict(strategy, "rollingUpdate") is None:
            strategy["rollingUpdate"] = {}
    rolling = _dict(strategy, "rollingUpdate")
    if strategy["type"] == "RollingUpdate" and rolling is not None:
        rolling.setdefault("partition", 0)
    retention = _dict(spec, "persistentVolumeClaimRetentionPolicy")
    if retention is None:
        retention = spec["persistentVolumeClaimRetentionPolicy"] = {}
    retention.setdefault("whenDeleted", "Retain")
    retention.setdefault("whenScaled", "Retain")
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    default_pod_template(spec.get("template"))


def default_replica_set(obj: Obj) -> None:
    spec = _spec(obj)
    spec.setdefault("replicas", 1)
    default_pod_template(spec.get("template"))


def default_job_spec(spec: Obj) -> None:
    """The JobSpec defaults that hold wherever a job spec appears (Jobs and CronJob templates)."""
    default_pod_template(spec.get("template"))


def default_job(obj: Obj) -> None:
    """Completions/parallelism 1, backoff limit 6, NonIndexed, not suspended, pods replaced once terminated."""
    spec = _spec(obj)
    if "completions" not in spec and "parallelism" not in spec:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    if "backoffLimit" not in spec:
        spec["backoffLimit"] = MAX_INT32 if spec.get("backoffLimitPerIndex") is not None else 6
    template = _dict(spec, "template")
    labels = (_dict(template, "metadata") or {}).get("labels") if template is not None else None
    meta = _dict(obj, "metadata")
    if isinstance(labels, dict) and meta is not None and not meta.get("labels"):
        meta["labels"] = dict(labels)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    failure_policy = _dict(spec, "podFailurePolicy")
    if failure_policy is not None:
        for rule in failure_policy.get("rules") or ():
            for pattern in (rule.get("onPodConditions") or ()) if isinstance(rule, dict) else ():
                if isinstance(pattern, dict):
                    pattern.setdefault("status", "True")
    spec.setdefault("podReplacementPolicy", "Failed" if failure_policy is not None else "TerminatingOrFailed")
    default_job_spec(spec)


def default_cron_job(obj: Obj) -> None:
    """Concurrency Allow, not suspended, 3 successful and 1 failed job kept."""
    spec = _spec(obj)
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    template = _dict(spec, "jobTemplate")
    if template is not None:
        meta = _dict(template, "metadata")
        if meta is None:
            meta = template["metadata"] = {}
        meta.setdefault("creationTimestamp", None)
        job_spec = _dict(template, "spec")
        if job_spec is not None:
            default_job_spec(job_spec)
