"""Controllers: reconcile loops over rate-limited queues, the Manager and its builder, leader election."""

from kinformer.controller.builder import Builder
from kinformer.controller.controller import Controller, ControllerStats
from kinformer.controller.handlers import EnqueueHandler, maps_any, owned_by, owner_mapper, request_for_object
from kinformer.controller.leaderelection import LeaderElectionConfig, LeaderElector
from kinformer.controller.manager import LeaderElectionLost, Manager
from kinformer.controller.predicates import (
    AnnotationsChanged,
    Funcs,
    GenerationChanged,
    LabelsChanged,
    LabelSelectorPredicate,
    Predicate,
    ResourceVersionChanged,
    and_,
    not_,
    or_,
)
from kinformer.controller.reconcile import ObjectReconciler, Reconciler, Request, Result, TerminalError
from kinformer.controller.sharding import Sharding, ShardMembershipLost

__all__ = [
    "AnnotationsChanged",
    "Builder",
    "Controller",
    "ControllerStats",
    "EnqueueHandler",
    "Funcs",
    "GenerationChanged",
    "LabelSelectorPredicate",
    "LabelsChanged",
    "LeaderElectionConfig",
    "LeaderElectionLost",
    "LeaderElector",
    "Manager",
    "ObjectReconciler",
    "Predicate",
    "Reconciler",
    "Request",
    "ResourceVersionChanged",
    "Result",
    "ShardMembershipLost",
    "Sharding",
    "TerminalError",
    "and_",
    "maps_any",
    "not_",
    "or_",
    "owned_by",
    "owner_mapper",
    "request_for_object",
]
