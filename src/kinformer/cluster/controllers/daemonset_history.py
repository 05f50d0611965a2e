"""A DaemonSet's ControllerRevisions, as kube 1.32's pkg/controller/daemon/update.go (``constructHistory``,
``snapshot``, ``dedupCurHistories``, ``cleanupHistory``).

* the current revision is the one whose data equal the set's template patch; its number is raised to one
  more than any other's (so a roll back makes an old revision current again, and its pods count as updated:
  they are not restarted);
* with no such revision, a new one ``<ds>-<hash>`` (``controller.ComputeHash`` of the template and
  ``status.collisionCount``) is created; the name taken by other data raises ``collisionCount`` (when the set's
  count was not stale) and the sync is retried;
* equal revisions are merged into the highest-numbered (pods relabelled to its hash, the others deleted);
* old revisions beyond ``revisionHistoryLimit`` are deleted oldest first, except those a pod still uses.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from kinformer.client import to_plain
from kinformer.errors import AlreadyExists
from kinformer.selectors import LabelSelector

from . import history
from .deployment_util import compute_hash
from .refs import RefManager

Obj = Mapping[str, Any]
HASH = history.CONTROLLER_REVISION_HASH_LABEL


class DaemonSetHistory:
    """The revisions of ``ds``; ``node_pods`` reads the set's pods by node (fresh from the cache)."""

    def __init__(self, client: Any, ds: Obj, node_pods: Callable[[], Awaitable[Mapping[str, Sequence[Obj]]]]) -> None:
        self.client, self.ds, self.node_pods = client, ds, node_pods

    async def _pods(self) -> list[Obj]:
        return [pod for pods in (await self.node_pods()).values() for pod in pods]

    async def construct(self, selector: LabelSelector) -> tuple[Obj, list[Obj]]:
        """``constructHistory``: (the current revision, the old ones)."""
        ds = self.ds
        listed = (await self.client.list("controllerrevisions", namespace=ds["metadata"]["namespace"])).items
        data = history.template_patch(ds)
        current: list[Obj] = []
        old: list[Obj] = []
        for revision in await RefManager(self.client, ds, "controllerrevisions", selector).claim(listed):
            (current if to_plain(revision.get("data")) == data else old).append(revision)
        number = history.next_revision(old)
        if not current:
            return await self.snapshot(number), old
        cur = await self.dedup(current)
        if history.revision_number(cur) < number:
            cur = await history.update_revision_number(self.client, cur, number)
        return cur, old

    async def snapshot(self, number: int) -> Obj:
        """A new revision ``<ds>-<hash>`` of the template; a name taken by other data bumps collisionCount."""
        ds, meta = self.ds, self.ds["metadata"]
        collision = (ds.get("status") or {}).get("collisionCount")
        body = history.new_revision(ds, history.template_patch(ds), number, collision,
                                    hash_=compute_hash(ds["spec"]["template"], collision),
                                    labels=(ds["spec"]["template"].get("metadata") or {}).get("labels"),
                                    annotations=meta.get("annotations"))
        name = body["metadata"]["name"]
        try:
            created: Obj = await self.client.create("controllerrevisions", body, namespace=meta["namespace"])
            return created
        except AlreadyExists:
            pass
        existing: Obj = await self.client.api_client.get("controllerrevisions", name, namespace=meta["namespace"])
        if to_plain(existing.get("data")) == body["data"]:
            return existing
        fresh = await self.client.api_client.get("daemonsets", meta["name"], namespace=meta["namespace"])
        if (fresh.get("status") or {}).get("collisionCount") != collision:
            raise RuntimeError(f"found a stale collision count of DaemonSet {meta['name']!r}; retrying")
        await self.client.patch_status("daemonsets", meta["name"], {"status": {"collisionCount": (collision or 0) + 1}},
                                       namespace=meta["namespace"])
        raise RuntimeError(f"revision {name} exists with other data; collision count raised")

    async def dedup(self, current: Sequence[Obj]) -> Obj:
        """``dedupCurHistories``: keep the highest-numbered of equal revisions, relabel pods to it, delete
        the others."""
        keep = max(current, key=history.revision_number)
        keep_hash = keep["metadata"]["labels"][HASH]
        for revision in current:
            if revision is keep:
                continue
            for pod in await self._pods():
                if (pod["metadata"].get("labels") or {}).get(HASH) != keep_hash:
                    await self.client.patch("pods", pod["metadata"]["name"], {"metadata": {"labels": {
                        HASH: keep_hash}}}, "strategic", namespace=pod["metadata"]["namespace"])
            await self.client.delete("controllerrevisions", revision["metadata"]["name"],
                                     namespace=revision["metadata"]["namespace"])
        return keep

    async def cleanup(self, old: Sequence[Obj]) -> None:
        """``cleanupHistory``: delete the oldest revisions no pod uses beyond ``revisionHistoryLimit``."""
        to_kill = len(old) - history.history_limit(self.ds)
        if to_kill <= 0:
            return
        live = {(p["metadata"].get("labels") or {}).get(HASH) for p in await self._pods()}
        for revision in history.sort_revisions(old):
            if to_kill <= 0:
                break
            if revision["metadata"]["labels"].get(HASH) in live:
                continue
            await self.client.delete("controllerrevisions", revision["metadata"]["name"],
                                     namespace=revision["metadata"]["namespace"])
            to_kill -= 1


__all__ = ["DaemonSetHistory"]
