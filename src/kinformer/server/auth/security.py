"""The identity and authorization parts of one API server, assembled: who a request is, and what it may do.

Pieces (each its own module): :mod:`.authentication` (certificates, static and ServiceAccount tokens),
:mod:`.impersonation`, :mod:`.rbac` (the authorizer), :mod:`.rbacregistry` (escalation checks on RBAC
writes), :mod:`.bootstrappolicy` (default roles and bindings, seed files), :mod:`.controllers.aggregation`,
:mod:`.serviceaccount` (TokenRequest, keys, OIDC discovery) and :mod:`.reviews`.

Invariants:

* Authentication is configured when static tokens or client certificates are. Without it every request
  that carries no credential is the admin (``system:masters``), as an in-process test server always was;
  ServiceAccount tokens and impersonation still work there, and RBAC applies to those identities. With it, a
  request without credentials is ``system:anonymous`` for RBAC to judge, unless anonymous requests are off.
* The bootstrap policy and the seed objects are in the watch cache before the server listens, and the
  aggregated roles (``admin``, ``edit``, ``view``) hold their rules by then.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from aiohttp import web

from ...clock import Clock
from ..controllers.aggregation import ClusterRoleAggregator
from ..registry.objects import ObjectStore
from ..registry.resources import Registry
from ..storage.watchcache import WatchCache
from .authentication import ADMIN, Authenticator
from .bootstrappolicy import ensure_bootstrap_policy, load_seed_file, seed_objects
from .impersonation import impersonation_hook
from .rbac import RBACAuthorizer
from .rbacregistry import install
from .reviews import Reviews
from .serviceaccount import TokenIssuer

__all__ = ["Security", "seed_documents"]


def seed_documents(policy: str | os.PathLike[str] | Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """The RBAC objects to seed: read from a file path, or given as dicts (validated as a seed file's)."""
    if policy is None:
        return []
    if isinstance(policy, str | os.PathLike):
        return load_seed_file(policy)
    return [dict(obj) for obj in policy]


class Security:
    """Authenticator, RBAC authorizer, token issuer, review APIs and aggregation of one server."""

    def __init__(self, cache: WatchCache, store: ObjectStore, registry: Registry, clock: Clock, *,
                 tokens: Mapping[str, Any] | Iterable[str] | None = None, client_certs: bool = False,
                 data_dir: str | None = None, seed: Sequence[Mapping[str, Any]] = (), anonymous: bool = True) -> None:
        self.cache, self.store, self.registry = cache, store, registry
        self.configured = bool(tokens) or client_certs
        self.authorizer = RBACAuthorizer(cache)
        key_path = os.path.join(data_dir, "pki", "sa.key") if data_dir else None
        self.issuer = TokenIssuer(cache, key_path=key_path, clock=clock)
        self.authenticator = Authenticator(tokens, client_certs=client_certs,
                                           token_authenticators=[self.issuer.authenticate],
                                           default_user=None if self.configured else ADMIN, anonymous=anonymous)
        self.reviews = Reviews(self.authorizer, self.authenticator, self.issuer)
        self.aggregator = ClusterRoleAggregator(cache, store, registry)
        self.seed = list(seed)
        install(store.strategies, self.authorizer)

    async def bootstrap(self) -> None:
        """Create the bootstrap policy, apply the seed objects, aggregate, and wait for the cache to hold it all."""
        await ensure_bootstrap_policy(self.store, self.registry, self.cache)
        if self.seed:
            await self.cache.sync()
            await seed_objects(self.store, self.registry, self.cache, self.seed, replace=True)
        await self.cache.sync()
        if await self.aggregator.sync():
            await self.cache.sync()

    def filters(self) -> dict[str, Any]:
        """The authentication, impersonation and authorization filters of the handler chain
        (:class:`~.filters.handlerchain.HandlerChain` keyword arguments)."""
        return {"authenticator": self.authenticator, "impersonate": impersonation_hook(self.authorizer),
                "authorizer": self.authorizer}

    def routes(self, url: str = "") -> list[web.RouteDef]:
        """TokenRequest, JWKS/OIDC discovery and the review APIs (registered before the generic routes)."""
        return [*self.issuer.routes(), *self.reviews.routes()]
