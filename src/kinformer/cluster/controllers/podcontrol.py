"""kube's ``RealPodControl`` (pkg/controller/controller_utils.go): the pod creates and deletes of the workload
controllers, each recording the owner's event with kube's texts.

* a create records ``SuccessfulCreate`` "Created pod: <name>", or ``FailedCreate`` "Error creating: <error>" and
  raises; no event when the namespace is being terminated (every create fails there);
* a delete records ``SuccessfulDelete`` "Deleted pod: <name>", or ``FailedDelete`` "Error deleting: <error>" and
  raises; a pod already gone is no error and records nothing.

``<error>`` is the server's message, as Go's ``%v`` of a StatusError prints it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kinformer.errors import APIError, NotFound

if TYPE_CHECKING:
    from kinformer.client import Client

__all__ = ["PodControl", "error_message", "namespace_terminating"]

Obj = Mapping[str, Any]


def error_message(err: BaseException) -> str:
    """What Go's ``%v`` prints of an API error: the server's message."""
    return err.message if isinstance(err, APIError) else str(err)


def namespace_terminating(err: BaseException) -> bool:
    """A create refused because the namespace is being deleted (kube's NamespaceTerminatingCause)."""
    return isinstance(err, APIError) and any(c.get("reason") == "NamespaceTerminating" for c in err.causes)


class PodControl:
    """Creates and deletes pods for ``owner`` objects through ``client``, recording on ``recorder``."""

    def __init__(self, client: Client | Any, recorder: Any) -> None:
        self.client = client
        self.recorder = recorder

    async def create(self, owner: Obj, body: Obj, namespace: str) -> Any:
        """Create ``body``; the created pod."""
        try:
            pod = await self.client.create("pods", body, namespace=namespace)
        except Exception as err:
            if not namespace_terminating(err):
                self.recorder.event(owner, "Warning", "FailedCreate", f"Error creating: {error_message(err)}")
            raise
        self.recorder.event(owner, "Normal", "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}")
        return pod

    async def delete(self, owner: Obj, name: str, namespace: str) -> bool:
        """Delete pod ``name``; False when it was gone already."""
        try:
            await self.client.delete("pods", name, namespace=namespace)
        except NotFound:
            return False
        except Exception as err:
            self.recorder.event(owner, "Warning", "FailedDelete", f"Error deleting: {error_message(err)}")
            raise
        self.recorder.event(owner, "Normal", "SuccessfulDelete", f"Deleted pod: {name}")
        return True
