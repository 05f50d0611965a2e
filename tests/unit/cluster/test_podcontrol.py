"""PodControl: kube's pod create/delete events on the owner, with the server's message."""

from __future__ import annotations

from typing import Any

import pytest

from kinformer.cluster.controllers.podcontrol import PodControl, error_message, namespace_terminating
from kinformer.errors import Forbidden, NotFound

OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web", "namespace": "ns", "uid": "u"}}
TERMINATING = {"kind": "Status", "code": 403, "reason": "Forbidden",
               "message": 'pods "web-x" is forbidden: unable to create new content in namespace ns because it is '
                          "being terminated",
               "details": {"causes": [{"reason": "NamespaceTerminating", "message": "namespace ns is being terminated",
                                       "field": "metadata.namespace"}]}}


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, obj: Any, type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))


class Client:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    async def create(self, resource: str, body: Any, namespace: str) -> Any:
        if self.error:
            raise self.error
        return {**body, "metadata": {**body["metadata"], "name": "web-abcde"}}

    async def delete(self, resource: str, name: str, namespace: str) -> None:
        if self.error:
            raise self.error


def test_the_namespace_terminating_cause_is_read_from_the_status_causes_reason() -> None:
    assert namespace_terminating(Forbidden(status=TERMINATING))
    assert not namespace_terminating(Forbidden("pods is forbidden"))
    assert error_message(Forbidden(status=TERMINATING)) == TERMINATING["message"]


async def test_create_and_delete_record_kubes_events() -> None:
    recorder = Recorder()
    pods = PodControl(Client(), recorder)
    await pods.create(OWNER, {"metadata": {"generateName": "web-"}}, "ns")
    assert await pods.delete(OWNER, "web-abcde", "ns") is True
    assert recorder.events == [("Normal", "SuccessfulCreate", "Created pod: web-abcde"),
                               ("Normal", "SuccessfulDelete", "Deleted pod: web-abcde")]


async def test_a_failed_create_records_the_servers_message_except_in_a_terminating_namespace() -> None:
    recorder = Recorder()
    with pytest.raises(Forbidden):
        await PodControl(Client(Forbidden("quota exceeded")), recorder).create(OWNER, {"metadata": {}}, "ns")
    with pytest.raises(Forbidden):
        await PodControl(Client(Forbidden(status=TERMINATING)), recorder).create(OWNER, {"metadata": {}}, "ns")
    assert recorder.events == [("Warning", "FailedCreate", "Error creating: quota exceeded")]


async def test_deleting_a_pod_already_gone_is_no_error_and_records_nothing() -> None:
    recorder = Recorder()
    assert await PodControl(Client(NotFound("gone")), recorder).delete(OWNER, "web-x", "ns") is False
    assert recorder.events == []
    with pytest.raises(Forbidden):
        await PodControl(Client(Forbidden("no")), recorder).delete(OWNER, "web-x", "ns")
    assert recorder.events == [("Warning", "FailedDelete", "Error deleting: no")]
