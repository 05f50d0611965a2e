"""kube-controller-manager's controllers, by the names its ``--controllers`` flag takes.

Each entry maps a name to ``"module:setup"``; ``setup(ctx: ControllerContext) -> None`` registers the
controller's reconcilers on ``ctx.manager`` (and any background loop with ``ctx.run``).
"""

from __future__ import annotations

#: name -> "module:function"; every name runs with ``controllers=True``; a subset with ``controllers=[...]``.
CONTROLLERS: dict[str, str] = {
    # -- scheduler, node lifecycle, taint eviction (kube-scheduler and kube-controller-manager's node controllers)
    "scheduler": "kinformer.cluster.scheduler:setup",
    "nodelifecycle": "kinformer.cluster.controllers.nodelifecycle:setup",
    "taint-eviction-controller": "kinformer.cluster.controllers.tainteviction:setup",
    # -- replicaset and deployment ------------------------------------------------------------------------
    "replicaset": "kinformer.cluster.controllers.replicaset:setup",
    "deployment": "kinformer.cluster.controllers.deployment:setup",
    # -- endpoints, endpointslices, disruption budgets, resource quotas (kube-controller-manager)
    "endpoint": "kinformer.cluster.controllers.endpoints:setup",
    "endpointslice": "kinformer.cluster.controllers.endpointslice:setup",
    "disruption": "kinformer.cluster.controllers.disruption:setup",
    "resourcequota": "kinformer.cluster.controllers.resourcequota:setup",
    # -- statefulset and daemonset (with their ControllerRevision history), pod garbage collector
    "statefulset": "kinformer.cluster.controllers.statefulset:setup",
    "daemonset": "kinformer.cluster.controllers.daemonset:setup",
    "pod-garbage-collector": "kinformer.cluster.controllers.podgc:setup",
    # -- job, cronjob and the TTL-after-finished controller (kube-controller-manager) ------------------------
    "job": "kinformer.cluster.controllers.job:setup",
    "cronjob": "kinformer.cluster.controllers.cronjob:setup",
    "ttl-after-finished": "kinformer.cluster.controllers.ttlafterfinished:setup",
}

__all__ = ["CONTROLLERS"]
