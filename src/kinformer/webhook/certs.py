"""The webhook server's serving certificate: a mounted secret (reloaded when it changes) or a generated one.

Where the files come from, by what ``cert_dir`` holds:

* ``tls.crt`` and ``tls.key`` (the layout of a Kubernetes TLS Secret, as cert-manager mounts it, with an
  optional ``ca.crt``): used as they are, and reloaded when they change on disk;
* nothing (or ``cert_dir=None``, a temporary directory): a CA and a serving certificate for the given hosts
  are generated there (:func:`kinformer.tls.ensure_certs`) and re-issued before they expire.

Invariants: the TLS context object handed to the listener never changes; each chain is loaded into a fresh
context, and the listener's SNI callback (run for every handshake, with or without a server name) moves the
handshake onto the newest one, so a reload takes effect on the next handshake without restarting the
listener. A chain is published only once it loaded whole, so a half-written or mismatched pair on disk is
never served (the previous chain stays, the failure is logged).
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
from pathlib import Path

from kinformer.tls import ensure_certs

log = logging.getLogger(__name__)

__all__ = ["ServingCerts"]


class ServingCerts:
    """The certificate files of one webhook server and the TLS context that serves them."""

    def __init__(self, cert_dir: str | os.PathLike[str] | None, hosts: list[str]) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="kinformer-webhook-") if cert_dir is None else None
        self.dir = Path(self._tmp.name if self._tmp else cert_dir)  # type: ignore[arg-type]
        self.hosts = hosts
        self.generated = not (self.dir / "tls.crt").exists()
        self._stamp: tuple[float, ...] = ()
        self._current = self.context = _server_context()
        self.context.sni_callback = self._select
        self.refresh(initial=True)

    @property
    def cert_file(self) -> Path:
        return self.dir / ("server.crt" if self.generated else "tls.crt")

    @property
    def key_file(self) -> Path:
        return self.dir / ("server.key" if self.generated else "tls.key")

    @property
    def ca_bundle(self) -> bytes:
        """PEM of the CA that signed the serving certificate (the webhook configurations' ``caBundle``).

        For a mounted secret without ``ca.crt`` this is the serving certificate itself.
        """
        ca = self.dir / "ca.crt"
        return ca.read_bytes() if ca.exists() else self.cert_file.read_bytes()

    def _files_stamp(self) -> tuple[float, ...]:
        return tuple(p.stat().st_mtime_ns for p in (self.cert_file, self.key_file) if p.exists())

    def refresh(self, *, initial: bool = False) -> bool:
        """Re-issue a generated certificate that nears expiry and load the files if they changed.

        Returns whether a new chain was loaded. Raises only on the first load (a server that cannot
        present any certificate must not start).
        """
        if self.generated:
            ensure_certs(self.dir, self.hosts)
        stamp = self._files_stamp()
        if stamp == self._stamp:
            return False
        loaded = self.context if initial else _server_context()
        try:
            loaded.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError, ValueError) as exc:
            if initial:
                raise
            log.error("webhook certificate in %s not reloaded: %s", self.dir, exc)
            return False
        self._current, self._stamp = loaded, stamp
        if not initial:
            log.info("webhook certificate reloaded from %s", self.dir)
        return True

    def _select(self, conn: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext) -> None:
        conn.context = self._current

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()


def _server_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context
