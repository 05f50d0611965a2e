"""kinformer for code that is not asyncio: a blocking facade over the async API.

``from kinformer import sync as kis``; ``kis.Client(url)`` owns one event-loop thread on which everything async
runs (requests, informers, controllers); each call blocks only its caller. Exceptions are the async API's own
classes (:mod:`kinformer.errors`), re-raised. See each type's docstring for its thread safety.
"""

from __future__ import annotations

from kinformer.sync.client import Client
from kinformer.sync.informers import ResourceEventHandlerRegistration, SharedIndexInformer, SharedInformerFactory
from kinformer.sync.loop import BlockingIterator, LoopThread
from kinformer.sync.manager import Manager

__all__ = ["BlockingIterator", "Client", "LoopThread", "Manager", "ResourceEventHandlerRegistration",
           "SharedIndexInformer", "SharedInformerFactory"]
