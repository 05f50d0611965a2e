"""The list/watch protocol's old home; it lives in :mod:`kinformer.listwatch`, below the cache and the client."""

from kinformer.listwatch import *  # noqa: F403
from kinformer.listwatch import __all__ as __all__
