"""pytest fixtures that run controllers against a real, embedded API server (kinformer's envtest).

Installed with kinformer, the plugin is active in every pytest run (a ``pytest11`` entry point); it needs
pytest-asyncio (``pip install 'kinformer[testing]'``) and async tests marked ``@pytest.mark.asyncio``, or
``asyncio_mode = "auto"`` in the pytest configuration. Without pytest-asyncio the fixtures fail with that
advice instead of breaking pytest's start-up.

Fixtures (each test gets its own server, so tests never see each other's objects):

* ``kube_server`` — a started :class:`kinformer.server.APIServer` with in-memory storage on 127.0.0.1;
* ``kube_cluster`` — a started server with kube-controller-manager's controllers and three simulated nodes
  (``APIServer(controllers=True, nodes=3)``; ``server.cluster`` for faults);
* ``kube_client`` — a :class:`kinformer.Client` connected to ``kube_server`` (closed after the test);
* ``kube_factory`` — a :class:`kinformer.SharedInformerFactory` over that client (shut down after the test);
* ``kube_client_as`` — a factory of clients with another identity, authorized by RBAC like any user:
  ``await kube_client_as("alice", groups=["dev"])`` or ``await kube_client_as(serviceaccount="ns/name")``
  (the ServiceAccount is created when missing and its client carries a TokenRequest token). Clients it
  made are closed after the test;
* ``kube_webhook_server`` — a started :class:`kinformer.WebhookServer` on 127.0.0.1 with a generated
  certificate: register handlers on it, point a webhook configuration at ``client_config(path)``, and the
  embedded server calls it on the test's own writes (as envtest's kube-apiserver calls a manager's webhooks).

``kube_client`` is the admin (``system:masters``); a client from ``kube_client_as`` can do exactly what the
Roles bound to its user, groups or ServiceAccount grant, so a test can prove a controller works with the
Role it ships.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from kinformer.cache.factory import SharedInformerFactory
    from kinformer.client import Client
    from kinformer.server import APIServer
    from kinformer.webhook import WebhookServer


def _needs_pytest_asyncio(fn: Callable[..., Any]) -> Any:
    """Stand-in for ``pytest_asyncio.fixture`` when it is not installed: the fixture fails with advice."""
    def needs_pytest_asyncio() -> None:
        pytest.fail("kinformer's fixtures need pytest-asyncio: pip install 'kinformer[testing]'")

    return pytest.fixture(needs_pytest_asyncio, name=fn.__name__)


try:
    from pytest_asyncio import fixture as _async_fixture
except ImportError:  # pragma: no cover - exercised only where pytest-asyncio is absent
    _async_fixture = _needs_pytest_asyncio  # type: ignore[assignment]


@_async_fixture
async def kube_server() -> AsyncIterator[APIServer]:
    from kinformer.server import APIServer

    async with APIServer(storage="memory") as server:
        yield server


@_async_fixture
async def kube_cluster() -> AsyncIterator[APIServer]:
    """A server with kube-controller-manager's controllers and three simulated nodes (``server.cluster``);
    ``kube_server`` stays bare."""
    from kinformer.server import APIServer

    async with APIServer(storage="memory", controllers=True, nodes=3) as server:
        yield server


@_async_fixture
async def kube_client(kube_server: APIServer) -> AsyncIterator[Client]:
    from kinformer.client import Client

    async with Client(kube_server.url) as client:
        yield client


@_async_fixture
async def kube_factory(kube_client: Client) -> AsyncIterator[SharedInformerFactory]:
    from kinformer.cache.factory import SharedInformerFactory

    async with SharedInformerFactory(kube_client) as factory:
        yield factory


async def client_as(server: APIServer, user: str | None = None, *, groups: Sequence[str] = (),
                    serviceaccount: str | None = None, **client_options: Any) -> Client:
    """A :class:`kinformer.Client` of ``server`` (an in-process APIServer) acting as ``user`` or a ServiceAccount.

    ``user`` (in ``groups`` and ``system:authenticated``) gets a bearer token the server accepts from then
    on; ``serviceaccount="namespace/name"`` is created when missing and authenticates with a token from its
    TokenRequest API, exactly as a pod's projected token would. The caller closes the client.
    """
    import orjson

    from kinformer.client import Client
    from kinformer.errors import AlreadyExists
    from kinformer.server.auth.authentication import UserInfo

    if (user is None) == (serviceaccount is None):
        raise ValueError("give a user or a serviceaccount")
    ca = client_options.pop("ca", server.ca_cert)
    if user is not None:
        token = "kinformer-test-" + secrets.token_urlsafe(24)
        server.security.authenticator.add_token(token, UserInfo(name=user, groups=tuple(groups)))
        return Client(server.url, token=token, ca=ca, **client_options)
    namespace, _, name = (serviceaccount or "").partition("/")
    if not namespace or not name:
        raise ValueError(f'serviceaccount must be "namespace/name", got {serviceaccount!r}')
    async with Client(server.url, ca=ca, token=_admin_token(server)) as admin:
        try:
            await admin.create("serviceaccounts", {"metadata": {"name": name}}, namespace=namespace)
        except AlreadyExists:
            pass
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
        body = orjson.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
        answer = orjson.loads(await admin.request_bytes("POST", path, data=body,
                                                        headers={"Content-Type": "application/json"}))
    return Client(server.url, token=answer["status"]["token"], ca=ca, **client_options)


def _admin_token(server: APIServer) -> str:
    """A token the server accepts as the admin (registered on first use)."""
    from kinformer.server.auth.authentication import ADMIN

    token = getattr(server, "_kinformer_test_admin_token", None)
    if token is None:
        token = "kinformer-test-admin-" + secrets.token_urlsafe(24)
        server.security.authenticator.add_token(token, ADMIN)
        server._kinformer_test_admin_token = token
    return token


@_async_fixture
async def kube_client_as(kube_server: APIServer) -> AsyncIterator[Callable[..., Awaitable[Client]]]:
    made: list[Client] = []

    async def make(user: str | None = None, *, groups: Sequence[str] = (), serviceaccount: str | None = None,
                   **client_options: Any) -> Client:
        client = await client_as(kube_server, user, groups=groups, serviceaccount=serviceaccount, **client_options)
        made.append(client)
        return client

    try:
        yield make
    finally:
        for client in made:
            await client.close()


@_async_fixture
async def kube_webhook_server() -> AsyncIterator[WebhookServer]:
    from kinformer.webhook import WebhookServer

    async with WebhookServer(port=0, shutdown_timeout=1.0) as server:
        yield server
