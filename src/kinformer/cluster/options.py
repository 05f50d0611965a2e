"""The timings and sizes of the simulated cluster (every delay runs on the injected clock).

Invariant: a :class:`ClusterOptions` that exists is valid. Every field is checked when it is made (also by
``dataclasses.replace``), so a bad value is a ValueError naming the field before any server or cluster starts.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from kinformer.quantity import parse_quantity

#: fields that must be > 0 (periods, timeouts and sizes a loop divides by or waits on)
_POSITIVE = ("workers", "client_max_in_flight", "node_pods", "node_lease_duration_seconds", "node_lease_renew_interval",
             "node_status_update_frequency", "restart_backoff", "restart_backoff_max",
             "scheduler_pod_initial_backoff", "scheduler_pod_max_backoff", "scheduler_max_unschedulable_duration",
             "node_monitor_period", "node_monitor_grace_period", "node_startup_grace_period",
             "resource_quota_sync_period", "max_endpoints_per_slice", "pdb_deletion_timeout", "pod_gc_period",
             "pod_gc_quarantine", "job_backoff_base", "job_backoff_max")
#: (smaller, larger): the first must not exceed the second
_ORDERED = (("restart_backoff", "restart_backoff_max"),
            ("scheduler_pod_initial_backoff", "scheduler_pod_max_backoff"),
            ("job_backoff_base", "job_backoff_max"))


@dataclass(frozen=True)
class ClusterOptions:
    """Knobs of the moving cluster. Defaults are scaled down from kube's so tests notice a stopped node in
    seconds, not kube's ~50 s; each field names the kube flag or constant it stands for."""

    #: controller-runtime's per-controller worker count (kube-controller-manager's --concurrent-*-syncs).
    workers: int = 5
    #: requests (every verb but watches) the cluster's client has waiting on the server at once; the others
    #: queue for a turn (the client's ``max_in_flight``). client-go multiplexes a component's requests over one
    #: HTTP/2 connection; here each request in flight holds a connection, and a burst beyond the pooled ones
    #: (the ReplicaSet controller's slow-start batch of 128 creates) would open one each.
    client_max_in_flight: int = 16
    # -- simulated nodes and kubelets ----------------------------------------------------------------------
    #: each simulated node's capacity (and allocatable): cpu, memory and the kubelet's --max-pods.
    node_cpu: str = "4"
    node_memory: str = "16Gi"
    node_pods: int = 110
    #: the kubelet's nodeLeaseDurationSeconds (kube: 40) and how often it renews its Lease (kube: a quarter of
    #: the duration, 10 s; scaled down).
    node_lease_duration_seconds: int = 40
    node_lease_renew_interval: float = 1.0
    #: the kubelet's --node-status-update-frequency (kube: 10 s): the Ready condition's heartbeat.
    node_status_update_frequency: float = 2.0
    #: how long a container of a pod whose restartPolicy is Never or OnFailure runs before it exits.
    container_run_seconds: float = 1.0
    #: how long a container takes to stop after SIGTERM (bounded by the pod's deletion grace period).
    container_stop_seconds: float = 0.0
    #: the kubelet's crash-loop back-off: first restart delay (kube: 10 s) doubling up to the cap (kube: 300 s).
    restart_backoff: float = 0.1
    restart_backoff_max: float = 5.0
    # -- scheduler -----------------------------------------------------------------------------------------
    #: kube-scheduler's podInitialBackoffSeconds: a pod that failed waits this long before its next attempt,
    #: doubling per failure ...
    scheduler_pod_initial_backoff: float = 1.0
    #: ... up to podMaxBackoffSeconds.
    scheduler_pod_max_backoff: float = 10.0
    #: podMaxInUnschedulablePodsDuration (kube: 5 min): an unschedulable pod no cluster event moved is retried
    #: after this long.
    scheduler_max_unschedulable_duration: float = 30.0
    # -- node lifecycle ------------------------------------------------------------------------------------
    #: --node-monitor-period (kube 5 s): how often node health is checked.
    node_monitor_period: float = 1.0
    #: --node-monitor-grace-period (kube 40 s): a node neither renewing its Lease nor posting its Ready
    #: condition for this long is marked Unknown and tainted unreachable.
    node_monitor_grace_period: float = 8.0
    #: nodeStartupGracePeriod (kube 60 s): the same for a node that never posted a Ready condition.
    node_startup_grace_period: float = 15.0
    # -- workload controllers ------------------------------------------------------------------------------
    # -- endpoints, endpointslices, disruption budgets and resource quotas (kube-controller-manager) --------
    #: --resource-quota-sync-period (kube: 5 min): every quota is recounted this often besides on changes.
    resource_quota_sync_period: float = 60.0
    #: --max-endpoints-per-slice (kube: 100).
    max_endpoints_per_slice: int = 100
    #: The disruption controller's DeletionTimeout (kube: 2 min): an evicted pod not deleted by then counts again.
    pdb_deletion_timeout: float = 120.0
    # -- pod garbage collector -----------------------------------------------------------------------------
    #: gcCheckPeriod (kube 20 s): how often the pod garbage collector looks for pods to collect.
    pod_gc_period: float = 2.0
    #: quarantineTime (kube 40 s): how long a node must be missing before its pods are collected.
    pod_gc_quarantine: float = 4.0
    #: --terminated-pod-gc-threshold (kube 12500): terminated pods kept before the oldest are collected
    #: (0: never).
    terminated_pod_gc_threshold: int = 12500
    # -- job, cronjob, ttl-after-finished -----------------------------------------------------------------
    #: the Job controller's first delay before replacing a failed pod (kube's DefaultJobPodFailureBackOff, 10 s),
    #: doubled per further failure since the last success
    job_backoff_base: float = 1.0
    #: the longest such delay (kube's MaxJobPodFailureBackOff, 6 min)
    job_backoff_max: float = 36.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type in ("int", "float") and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ValueError(f"ClusterOptions.{f.name} must be a number, got {value!r}")
            if f.type == "int" and not isinstance(value, int):
                raise ValueError(f"ClusterOptions.{f.name} must be an integer, got {value!r}")
            if f.type in ("int", "float") and value < 0:
                raise ValueError(f"ClusterOptions.{f.name} must be >= 0, got {value}")
        for name in _POSITIVE:
            if getattr(self, name) <= 0:
                raise ValueError(f"ClusterOptions.{name} must be > 0, got {getattr(self, name)}")
        for small, large in _ORDERED:
            if getattr(self, small) > getattr(self, large):
                raise ValueError(f"ClusterOptions needs 0 < {small} <= {large}, got {getattr(self, small)} and "
                                 f"{getattr(self, large)}")
        for name in ("node_cpu", "node_memory"):
            parsed = parse_quantity(getattr(self, name)) if isinstance(getattr(self, name), str) else None
            if parsed is None or parsed[0] <= 0:
                raise ValueError(f"ClusterOptions.{name} must be a positive quantity, got {getattr(self, name)!r}")
