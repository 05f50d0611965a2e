"""kinformer: client-go's informers, work queues and controllers for asyncio Python.

The public names are imported lazily, so ``import kinformer`` stays cheap and never pulls in the
embedded server.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # the same names, for type checkers (tests/unit/test_typed.py checks they match)
    from kinformer.authoring import (
        Default,
        Doc,
        Format,
        ListType,
        MapType,
        Maximum,
        MaxItems,
        MaxLength,
        Minimum,
        MinItems,
        MinLength,
        Pattern,
        PreserveUnknownFields,
        PrinterColumn,
        Rule,
        Scale,
        Version,
        crd,
    )
    from kinformer.cache.delta_fifo import DeletedFinalStateUnknown, Delta, DeltaFIFO, DeltaType
    from kinformer.cache.factory import SharedInformerFactory
    from kinformer.cache.fake import FakeSource
    from kinformer.cache.lister import Lister
    from kinformer.cache.real_fifo import RealFIFO
    from kinformer.cache.reflector import Backoff, Reflector
    from kinformer.cache.shared_informer import ResourceEventHandler, SharedIndexInformer
    from kinformer.cache.store import Indexer, Store
    from kinformer.client import Client
    from kinformer.clock import Clock, FakeClock, RealClock
    from kinformer.controller import (
        Controller,
        LeaderElectionConfig,
        LeaderElectionLost,
        LeaderElector,
        Manager,
        ObjectReconciler,
        Reconciler,
        Request,
        Result,
        Sharding,
        ShardMembershipLost,
        TerminalError,
    )
    from kinformer.controller.conditions import find_condition, set_condition
    from kinformer.controller.events import EventRecorder
    from kinformer.controller.finalizers import ensure_finalizer, remove_finalizer
    from kinformer.controller.legacyevents import LegacyEventRecorder
    from kinformer.controller.logcontext import reconcile_logger
    from kinformer.controller.mutate import create_or_patch, create_or_update
    from kinformer.controller.ownership import AlreadyOwnedError, set_controller_reference, set_owner_reference
    from kinformer.controller.wait import wait_for
    from kinformer.errors import (
        AlreadyExists,
        APIError,
        Conflict,
        Expired,
        Forbidden,
        Gone,
        Invalid,
        NotFound,
        SelectorError,
        ServerError,
        TooManyRequests,
        Unauthorized,
    )
    from kinformer.listwatch import ListerWatcher, ListOptions, ListResult, WatchEvent
    from kinformer.meta import Object, meta_namespace_key
    from kinformer.selectors import LabelSelector, parse_label_selector
    from kinformer.webhook import AdmissionRequest, Denied, WebhookServer, patch_ca_bundle
    from kinformer.workqueue import (
        BucketRateLimiter,
        DelayingQueue,
        ItemExponentialFailureRateLimiter,
        ItemFastSlowRateLimiter,
        MaxOfRateLimiter,
        PriorityQueue,
        PrometheusMetricsProvider,
        RateLimitingQueue,
        ShutDown,
        WorkQueue,
        default_controller_rate_limiter,
    )

_EXPORTS: dict[str, str] = {
    # cache
    "Indexer": "kinformer.cache.store",
    "Store": "kinformer.cache.store",
    "meta_namespace_key": "kinformer.meta",
    "Object": "kinformer.meta",
    "DeltaFIFO": "kinformer.cache.delta_fifo",
    "RealFIFO": "kinformer.cache.real_fifo",
    "FakeSource": "kinformer.cache.fake",
    "Backoff": "kinformer.cache.reflector",
    "Delta": "kinformer.cache.delta_fifo",
    "DeltaType": "kinformer.cache.delta_fifo",
    "DeletedFinalStateUnknown": "kinformer.cache.delta_fifo",
    "ListOptions": "kinformer.listwatch",
    "ListResult": "kinformer.listwatch",
    "WatchEvent": "kinformer.listwatch",
    "ListerWatcher": "kinformer.listwatch",
    "Reflector": "kinformer.cache.reflector",
    "SharedIndexInformer": "kinformer.cache.shared_informer",
    "ResourceEventHandler": "kinformer.cache.shared_informer",
    "SharedInformerFactory": "kinformer.cache.factory",
    "Lister": "kinformer.cache.lister",
    # work queues
    "WorkQueue": "kinformer.workqueue",
    "DelayingQueue": "kinformer.workqueue",
    "RateLimitingQueue": "kinformer.workqueue",
    "PriorityQueue": "kinformer.workqueue",
    "ItemExponentialFailureRateLimiter": "kinformer.workqueue",
    "ItemFastSlowRateLimiter": "kinformer.workqueue",
    "BucketRateLimiter": "kinformer.workqueue",
    "MaxOfRateLimiter": "kinformer.workqueue",
    "default_controller_rate_limiter": "kinformer.workqueue",
    "ShutDown": "kinformer.workqueue",
    "PrometheusMetricsProvider": "kinformer.workqueue",
    # client
    "Client": "kinformer.client",
    # controllers
    "Reconciler": "kinformer.controller",
    "ObjectReconciler": "kinformer.controller",
    "Request": "kinformer.controller",
    "Result": "kinformer.controller",
    "TerminalError": "kinformer.controller",
    "Manager": "kinformer.controller",
    "Controller": "kinformer.controller",
    "LeaderElectionLost": "kinformer.controller",
    "LeaderElector": "kinformer.controller",
    "LeaderElectionConfig": "kinformer.controller",
    "Sharding": "kinformer.controller",
    "ShardMembershipLost": "kinformer.controller",
    # operator toolkit
    "EventRecorder": "kinformer.controller.events",
    "LegacyEventRecorder": "kinformer.controller.legacyevents",
    "set_controller_reference": "kinformer.controller.ownership",
    "set_owner_reference": "kinformer.controller.ownership",
    "AlreadyOwnedError": "kinformer.controller.ownership",
    "create_or_update": "kinformer.controller.mutate",
    "create_or_patch": "kinformer.controller.mutate",
    "ensure_finalizer": "kinformer.controller.finalizers",
    "remove_finalizer": "kinformer.controller.finalizers",
    "set_condition": "kinformer.controller.conditions",
    "find_condition": "kinformer.controller.conditions",
    "wait_for": "kinformer.controller.wait",
    "reconcile_logger": "kinformer.controller.logcontext",
    # authoring operators
    "crd": "kinformer.authoring",
    "Version": "kinformer.authoring",
    "PrinterColumn": "kinformer.authoring",
    "Scale": "kinformer.authoring",
    "Minimum": "kinformer.authoring",
    "Maximum": "kinformer.authoring",
    "Pattern": "kinformer.authoring",
    "MaxLength": "kinformer.authoring",
    "MinLength": "kinformer.authoring",
    "MaxItems": "kinformer.authoring",
    "MinItems": "kinformer.authoring",
    "Rule": "kinformer.authoring",
    "Doc": "kinformer.authoring",
    "Default": "kinformer.authoring",
    "Format": "kinformer.authoring",
    "ListType": "kinformer.authoring",
    "MapType": "kinformer.authoring",
    "PreserveUnknownFields": "kinformer.authoring",
    # webhooks
    "WebhookServer": "kinformer.webhook",
    "Denied": "kinformer.webhook",
    "AdmissionRequest": "kinformer.webhook",
    "patch_ca_bundle": "kinformer.webhook",
    # selectors, time, errors
    "LabelSelector": "kinformer.selectors",
    "parse_label_selector": "kinformer.selectors",
    "Clock": "kinformer.clock",
    "RealClock": "kinformer.clock",
    "FakeClock": "kinformer.clock",
    "APIError": "kinformer.errors",
    "NotFound": "kinformer.errors",
    "AlreadyExists": "kinformer.errors",
    "Conflict": "kinformer.errors",
    "Expired": "kinformer.errors",
    "Gone": "kinformer.errors",
    "Invalid": "kinformer.errors",
    "Unauthorized": "kinformer.errors",
    "Forbidden": "kinformer.errors",
    "TooManyRequests": "kinformer.errors",
    "ServerError": "kinformer.errors",
    "SelectorError": "kinformer.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kinformer' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
