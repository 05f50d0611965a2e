"""The ServiceAccount admission plugin's lookup: a new pod runs as an account that exists.

Invariants (kube's ``plugin/pkg/admission/serviceaccount``):

* A pod created naming a ServiceAccount its namespace does not hold is refused with 403:
  ``pods "NAME" is forbidden: error looking up service account NS/SA: serviceaccount "SA" not found``.
* The ``default`` account is made by a controller just after its namespace, so a pod naming it waits for it
  (at most :data:`DEFAULT_ACCOUNT_WAIT` seconds, kube retries its lookup about as long) before it is refused.
  A server without namespace defaults makes no ``default`` account: there a pod naming it is accepted, as
  nothing would ever create it.
* A wait is woken by the account's arrival in the watch cache, never by polling; at most
  :data:`MAX_WAITERS` creates wait at once (beyond that a missing account is refused at once).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from ..machinery import status as st
from ..storage.watchcache import CachedEvent, WatchCache

__all__ = ["DEFAULT_ACCOUNT_WAIT", "MAX_WAITERS", "ServiceAccountAdmission"]

SA_PREFIX = "/registry/core/serviceaccounts/"
DEFAULT_SA = "default"
DEFAULT_ACCOUNT_WAIT = 2.0
MAX_WAITERS = 1000


class ServiceAccountAdmission:
    """Checks the account of each new pod against the watch cache (see the module invariants)."""

    def __init__(self, cache: WatchCache, *, default_account_made: bool, wait: float = DEFAULT_ACCOUNT_WAIT) -> None:
        self.cache = cache
        self.default_account_made = default_account_made
        self.wait = wait
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}
        self._waiting = 0
        cache.add_listener(self._on_event, (SA_PREFIX,))

    def _exists(self, namespace: str, name: str) -> bool:
        bucket = self.cache.buckets.get(SA_PREFIX)
        return bucket is not None and f"{SA_PREFIX}{namespace}/{name}" in bucket.objects

    def _on_event(self, prefix: str, ev: CachedEvent) -> None:
        if ev.type == "ADDED":  # called only for ServiceAccount writes
            for fut in self._waiters.pop(ev.cur.key, ()):
                if not fut.done():
                    fut.set_result(None)

    async def admit(self, namespace: str, pod: Mapping[str, Any]) -> None:
        """Raise 403 unless the account ``pod`` runs as exists in ``namespace`` (waiting for ``default``)."""
        spec = pod.get("spec")
        name = (spec.get("serviceAccountName") if isinstance(spec, Mapping) else None) or DEFAULT_SA
        if not isinstance(name, str) or self._exists(namespace, name):
            return
        if name == DEFAULT_SA:
            if not self.default_account_made:
                return
            if self._waiting < MAX_WAITERS and await self._arrived(namespace, name):
                return
        pod_name = (pod.get("metadata") or {}).get("name") or ""
        raise st.StatusError(403, "Forbidden", f'pods "{pod_name}" is forbidden: error looking up service account '
                             f'{namespace}/{name}: serviceaccount "{name}" not found',
                             details={"name": pod_name, "kind": "pods"})

    async def _arrived(self, namespace: str, name: str) -> bool:
        key = f"{SA_PREFIX}{namespace}/{name}"
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(key, []).append(fut)
        self._waiting += 1
        try:
            async with asyncio.timeout(self.wait):
                await fut
        except TimeoutError:
            pass
        finally:
            self._waiting -= 1
            waiters = self._waiters.get(key)
            if waiters is not None and fut in waiters:
                waiters.remove(fut)
                if not waiters:
                    del self._waiters[key]
        return self._exists(namespace, name)
