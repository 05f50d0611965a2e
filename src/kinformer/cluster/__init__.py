"""A cluster that moves: kube-controller-manager's controllers, a scheduler and simulated nodes, in process.

Everything here talks to the API server through its HTTP API, as kube-controller-manager, kube-scheduler and
the kubelet do, on kinformer's own informers, work queues and Manager: the cluster dogfoods the library.
``APIServer(controllers=True, nodes=3)`` starts a :class:`Cluster` once it listens and exposes it as
``server.cluster``; the library never imports this package.
"""

from .cluster import Cluster, ControllerContext
from .controllers import CONTROLLERS
from .options import ClusterOptions

__all__ = ["CONTROLLERS", "Cluster", "ClusterOptions", "ControllerContext"]
