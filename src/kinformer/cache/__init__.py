"""client-go's tools/cache for asyncio: store and indexer, DeltaFIFO, listers (and the informer machinery)."""
# Re-exports only; each cache module adds its own "from .x import ..." line.
# ruff: noqa: F401, I001

from .delta_fifo import Delta, DeltaFIFO, DeltaType, FIFOClosed
from .lister import Lister, NamespaceLister
from .store import (
    NAMESPACE_INDEX,
    Indexer,
    Store,
    meta_namespace_index_func,
    meta_namespace_key,
    split_meta_namespace_key,
)
from .tombstone import DeletedFinalStateUnknown
from .real_fifo import RealFIFO
from kinformer.listwatch import ListerWatcher, ListOptions, ListResult, TweakedListerWatcher, WatchEvent
from .backoff import Backoff
from .reflector import Reflector, ReflectorStats, WatchOutcome
from .processor_listener import Notification, NotificationKind, ProcessorListener
from .mutation_detector import MutationDetector
from .transforms import LAST_APPLIED_ANNOTATION, Transform, strip_last_applied
from .multi_namespace import MultiNamespaceListerWatcher
from .shared_informer import (
    DEFAULT_TRANSFORM,
    CacheMutationError,
    ResourceEventHandler,
    ResourceEventHandlerRegistration,
    SharedIndexInformer,
    strip_managed_fields,
)
from .factory import SharedInformerFactory
from .fake import FakeClient, FakeListerWatcher, FakeSource
