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
    # -- node lifecycle ------------------------------------------------------------------------------------
    # -- workload controllers ------------------------------------------------------------------------------
