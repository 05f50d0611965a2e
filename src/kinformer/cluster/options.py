"""The timings and sizes of the simulated cluster (every delay runs on the injected clock)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClusterOptions:
    """Knobs of the moving cluster. Defaults are scaled down from kube's so tests notice a stopped node in
    seconds, not kube's ~50 s; each field names the kube flag or constant it stands for."""

    #: controller-runtime's per-controller worker count (kube-controller-manager's --concurrent-*-syncs).
    workers: int = 5
    # -- simulated nodes and kubelets ----------------------------------------------------------------------
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
