"""ServiceAccount tokens: TokenRequest, the signing key, JWKS/OIDC discovery, and the token authenticator.

Invariants (kube's ``pkg/serviceaccount`` and the ``serviceaccounts/token`` subresource):

* Tokens are RS256 JWTs with kube's claims: ``iss``, ``sub`` = ``system:serviceaccount:<ns>:<name>``,
  ``aud``, ``iat``/``nbf``/``exp``, ``jti`` and ``kubernetes.io`` (namespace, serviceaccount name and uid,
  and the pod or secret the token is bound to).
* A token authenticates only while it is unexpired, carries one of the accepted audiences, is signed by this
  server's key and its ServiceAccount (and bound object) still exists in the watch cache with the uid in the
  claims; a token of a deleted (even re-created) account stops working once the cache has seen the delete.
* The key is generated on first use; with a ``key_path`` it is kept there (mode 0600, written atomically), so
  it survives restarts and replicas sharing one data directory share it; without one it lives in memory.
* ``expirationSeconds`` defaults to one hour and must be at least 10 minutes and below 2^32 seconds.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from ...clock import REAL_CLOCK, Clock
from ..endpoints.bodies import content_type, decode_object, parse_document, read_body
from ..endpoints.responses import json_response
from ..machinery import status as st
from ..registry.objects import timestamp
from ..storage.watchcache import WatchCache
from .authentication import InvalidToken, UserInfo

if TYPE_CHECKING:  # joserfc is imported where tokens are made or checked: it takes a third of the start-up
    from joserfc.jwk import RSAKey

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_EXPIRATION", "ISSUER", "TokenIssuer", "service_account_user"]

ISSUER = "https://kubernetes.default.svc.cluster.local"
DEFAULT_EXPIRATION = 3600
MIN_EXPIRATION = 600
_SA_PREFIX = "/registry/core/serviceaccounts/"
_BOUND_PREFIXES = {"Pod": "/registry/core/pods/", "Secret": "/registry/core/secrets/"}
_MAX_TOKEN = 16 * 1024


def service_account_user(namespace: str, name: str, uid: str = "",
                         extra: Mapping[str, tuple[str, ...]] | None = None) -> UserInfo:
    """The user a ServiceAccount authenticates as (kube's ``serviceaccount.UserInfo``)."""
    return UserInfo(name=f"system:serviceaccount:{namespace}:{name}", uid=uid,
                    groups=("system:serviceaccounts", f"system:serviceaccounts:{namespace}"), extra=dict(extra or {}))


def _unverified_claims(token: str) -> dict[str, Any] | None:
    parts = token.split(".")
    if len(parts) != 3 or len(token) > _MAX_TOKEN:
        return None
    try:
        claims = orjson.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, orjson.JSONDecodeError):
        return None
    return claims if isinstance(claims, dict) else None


class TokenIssuer:
    """Signs and verifies ServiceAccount tokens of one API server (see the module invariants)."""

    def __init__(self, cache: WatchCache, *, key_path: str | Path | None = None, clock: Clock = REAL_CLOCK,
                 issuer: str = ISSUER, audiences: Sequence[str] = ()) -> None:
        self.cache = cache
        self.key_path = Path(key_path) if key_path is not None else None
        self.clock = clock
        self.issuer = issuer
        self.audiences = tuple(audiences) or (issuer,)
        self.url = ""  # the server's URL, for the JWKS address in the discovery document
        self._key: RSAKey | None = None

    # -------------------------------------------------------------------------- key

    def key(self) -> RSAKey:
        """The signing key: loaded from ``key_path``, or generated (and saved there) on first use."""
        if self._key is None:
            key = self._load()
            if key is None:
                from joserfc.jwk import RSAKey

                key = RSAKey.generate_key(2048, private=True)
                if self.key_path is not None:
                    from ...tls import write_atomic

                    write_atomic(self.key_path, key.as_pem(private=True), 0o600)
            self._key = key
        return self._key

    def _load(self) -> RSAKey | None:
        if self.key_path is None:
            return None
        from joserfc.errors import JoseError
        from joserfc.jwk import RSAKey

        try:
            return RSAKey.import_key(self.key_path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError, JoseError):
            log.warning("unreadable service account key %s: generating a new one", self.key_path)
            return None

    def kid(self) -> str:
        return self.key().thumbprint()

    def jwks(self) -> dict[str, Any]:
        """The public key set (``/openid/v1/jwks``)."""
        public = self.key().as_dict(private=False)
        return {"keys": [{**public, "use": "sig", "alg": "RS256", "kid": self.kid()}]}

    def discovery(self) -> dict[str, Any]:
        """The OpenID provider configuration (``/.well-known/openid-configuration``)."""
        return {"issuer": self.issuer, "jwks_uri": f"{self.url}/openid/v1/jwks",
                "response_types_supported": ["id_token"], "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"]}

    # -------------------------------------------------------------------------- issue / verify

    def issue(self, sa: Mapping[str, Any], audiences: Sequence[str], expiration: int,
              bound: Mapping[str, Any] | None = None) -> tuple[str, int]:
        """A token for ServiceAccount object ``sa``; returns (token, expiry as epoch seconds)."""
        meta = sa["metadata"]
        ns, name = meta["namespace"], meta["name"]
        now = int(self.clock.wall())
        private: dict[str, Any] = {"namespace": ns, "serviceaccount": {"name": name, "uid": meta.get("uid", "")}}
        if bound is not None:
            private[bound["kind"].lower()] = {"name": bound["name"], "uid": bound["uid"]}
        claims = {"aud": list(audiences), "exp": now + expiration, "iat": now, "iss": self.issuer,
                  "jti": str(uuid.uuid4()), "kubernetes.io": private, "nbf": now,
                  "sub": f"system:serviceaccount:{ns}:{name}"}
        from joserfc import jwt

        token = jwt.encode({"alg": "RS256", "kid": self.kid()}, claims, self.key())
        return token, now + expiration

    def _cached(self, prefix: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        bucket = self.cache.buckets.get(prefix)
        co = bucket.objects.get(f"{prefix}{namespace}/{name}") if bucket is not None else None
        return co.obj if co is not None else None

    def _verified_claims(self, token: str) -> dict[str, Any] | None:
        claims = _unverified_claims(token)
        if claims is None or claims.get("iss") != self.issuer:
            return None  # not one of ours
        if self._key is None and self._load() is None:
            raise InvalidToken("no service account key")
        from joserfc import jwt
        from joserfc.errors import JoseError

        try:
            return dict(jwt.decode(token, self.key(), algorithms=["RS256"]).claims)
        except (JoseError, ValueError) as exc:
            raise InvalidToken(f"bad signature: {exc}") from None

    def review(self, token: str, audiences: Sequence[str] = ()) -> tuple[UserInfo, list[str]] | None:
        """(user, audiences it is valid for) of a token; None when it is not a ServiceAccount token of this
        server; raises :class:`InvalidToken` when it is one but is not (or no longer) valid."""
        claims = self._verified_claims(token)
        if claims is None:
            return None
        now = self.clock.wall()
        exp, nbf = claims.get("exp"), claims.get("nbf", 0)
        if not isinstance(exp, int | float) or exp <= now or not isinstance(nbf, int | float) or nbf > now + 60:
            raise InvalidToken("token has expired or is not yet valid")
        aud = claims.get("aud")
        token_auds = [aud] if isinstance(aud, str) else [a for a in aud or () if isinstance(a, str)]
        valid = [a for a in (audiences or self.audiences) if a in token_auds]
        if not valid:
            raise InvalidToken("token audiences are not accepted")
        return self._user(claims), valid

    def _user(self, claims: Mapping[str, Any]) -> UserInfo:
        private = claims.get("kubernetes.io")
        if not isinstance(private, Mapping):
            raise InvalidToken("not a service account token")
        ns, sa_claim = private.get("namespace"), private.get("serviceaccount") or {}
        name, uid = sa_claim.get("name"), sa_claim.get("uid")
        if not isinstance(ns, str) or not isinstance(name, str):
            raise InvalidToken("not a service account token")
        sa = self._cached(_SA_PREFIX, ns, name)
        if sa is None or (sa.get("metadata") or {}).get("uid") != uid:
            raise InvalidToken(f"service account {ns}/{name} has been deleted")
        extra: dict[str, tuple[str, ...]] = {
            "authentication.kubernetes.io/credential-id": (f"JTI={claims.get('jti')}",)}
        for kind, prefix in _BOUND_PREFIXES.items():
            ref = private.get(kind.lower())
            if not isinstance(ref, Mapping):
                continue
            obj = self._cached(prefix, ns, str(ref.get("name")))
            if obj is None or (obj.get("metadata") or {}).get("uid") != ref.get("uid"):
                raise InvalidToken(f"the {kind.lower()} the token is bound to has been deleted")
            if kind == "Pod":
                extra["authentication.kubernetes.io/pod-name"] = (str(ref.get("name")),)
                extra["authentication.kubernetes.io/pod-uid"] = (str(ref.get("uid")),)
        return service_account_user(ns, name, str(uid), extra)

    def authenticate(self, token: str) -> UserInfo | None:
        """A token authenticator (:mod:`kinformer.server.auth.authentication`): the ServiceAccount's user, or None."""
        found = self.review(token)
        return found[0] if found is not None else None

    # -------------------------------------------------------------------------- HTTP

    async def token_request(self, request: web.Request) -> web.Response:
        """``POST /api/v1/namespaces/{namespace}/serviceaccounts/{name}/token``."""
        ns, name = request.match_info["namespace"], request.match_info["name"]
        doc = decode_object(parse_document(await read_body(request), content_type(request)))
        spec = spec if isinstance(spec := doc.get("spec"), dict) else {}
        sa = self._cached(_SA_PREFIX, ns, name)
        if sa is None:  # created just now? read at the store's current revision
            await self.cache.sync(timeout=5.0)
            sa = self._cached(_SA_PREFIX, ns, name)
        if sa is None:
            raise st.StatusError(404, "NotFound", f'serviceaccounts "{name}" not found',
                                 details={"name": name, "kind": "serviceaccounts"})
        expiration = spec.get("expirationSeconds") or DEFAULT_EXPIRATION
        audiences = spec.get("audiences") or list(self.audiences)
        causes = _spec_causes(expiration, audiences)
        bound = self._bound(ns, spec.get("boundObjectRef"), causes)
        if causes:
            raise st.StatusError(422, "Invalid", f'TokenRequest.authentication.k8s.io "{name}" is invalid: '
                                 + ", ".join(f"{c['field']}: {c['message']}" for c in causes),
                                 details={"name": name, "group": "authentication.k8s.io", "kind": "TokenRequest",
                                          "causes": causes})
        token, exp = self.issue(sa, audiences, int(expiration), bound)
        out_spec: dict[str, Any] = {"audiences": audiences, "expirationSeconds": int(expiration),
                                    "boundObjectRef": spec.get("boundObjectRef")}
        body = {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"name": name, "namespace": ns, "creationTimestamp": timestamp(self.clock)},
                "spec": out_spec,
                "status": {"token": token, "expirationTimestamp": _rfc3339(exp)}}
        return json_response(body, 201)

    def _bound(self, ns: str, ref: Any, causes: list[dict[str, str]]) -> dict[str, Any] | None:
        if not ref:
            return None
        kind = ref.get("kind") if isinstance(ref, Mapping) else None
        if not isinstance(kind, str) or kind not in _BOUND_PREFIXES:
            causes.append({"reason": "FieldValueNotSupported", "field": "spec.boundObjectRef.kind",
                           "message": f'Unsupported value: "{kind}": supported values: "Pod", "Secret"'})
            return None
        obj = self._cached(_BOUND_PREFIXES[kind], ns, str(ref.get("name", "")))
        uid = (obj or {}).get("metadata", {}).get("uid")
        if obj is None or (ref.get("uid") and ref["uid"] != uid):
            raise st.StatusError(404, "NotFound", f'{kind.lower()}s "{ref.get("name", "")}" not found',
                                 details={"name": ref.get("name", ""), "kind": f"{kind.lower()}s"})
        return {"kind": kind, "name": ref["name"], "uid": uid}

    async def serve_jwks(self, request: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps(self.jwks()), content_type="application/jwk-set+json")

    async def serve_discovery(self, request: web.Request) -> web.Response:
        return json_response(self.discovery())

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", self.token_request),
                web.get("/openid/v1/jwks", self.serve_jwks),
                web.get("/.well-known/openid-configuration", self.serve_discovery)]


def _spec_causes(expiration: Any, audiences: Any) -> list[dict[str, str]]:
    causes: list[dict[str, str]] = []
    if not isinstance(expiration, int) or isinstance(expiration, bool):
        causes.append({"reason": "FieldValueInvalid", "field": "spec.expirationSeconds",
                       "message": "Invalid value: must be an integer"})
    elif expiration < MIN_EXPIRATION:
        causes.append({"reason": "FieldValueInvalid", "field": "spec.expirationSeconds",
                       "message": f"Invalid value: {expiration}: may not specify a duration less than 10 minutes"})
    elif expiration >= 2 ** 32:
        causes.append({"reason": "FieldValueInvalid", "field": "spec.expirationSeconds",
                       "message": f"Invalid value: {expiration}: may not specify a duration larger than 2^32 seconds"})
    if not isinstance(audiences, list) or not all(isinstance(a, str) and a for a in audiences):
        causes.append({"reason": "FieldValueInvalid", "field": "spec.audiences",
                       "message": "Invalid value: must be a list of non-empty strings"})
    return causes


def _rfc3339(epoch: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(int(epoch), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
