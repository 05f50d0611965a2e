"""Serving certificates for the embedded API server: a self-signed CA and a server certificate it signs.

Invariants:

* The CA is generated once per directory and reused across restarts, so a kubeconfig written earlier
  (which embeds or points at ``ca.crt``) keeps working.
* The server certificate is reused while it is valid for at least another day, was issued by that CA
  and names every requested host in its subjectAltName; otherwise it is re-issued (same CA).
* Private keys are written with mode 0600 and replaced atomically (write to a temp file, then rename),
  so a crash never leaves a half-written key behind.
* Client certificates (:func:`issue_client_cert`, and :func:`sign_client_csr` for a certificate request)
  carry the user name as CN and the groups as O, as kube-apiserver's x509 authenticator reads them, and
  only the clientAuth extended key usage, so a client certificate can never serve and the server
  certificate is never accepted as a client's.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertPaths", "client_ssl_context", "ensure_certs", "issue_client_cert", "self_signed_ca_pem",
           "server_ssl_context", "sign_client_csr", "write_atomic"]

CA_VALIDITY = dt.timedelta(days=3650)
SERVER_VALIDITY = dt.timedelta(days=365)
CLIENT_VALIDITY = dt.timedelta(days=365)
RENEW_BEFORE = dt.timedelta(days=1)
_CLOCK_SKEW = dt.timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class CertPaths:
    """Where the PEM files live: the CA certificate (for clients), the server certificate and its key."""

    ca_cert: Path
    server_cert: Path
    server_key: Path

    @property
    def ca_key(self) -> Path:
        return self.ca_cert.with_name("ca.key")


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def write_atomic(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Atomically replace ``path`` with ``data``, created with ``mode`` (readers see the old file or the new one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _san_entries(hosts: Iterable[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def _make_ca() -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kinformer-ca")])
    now = _now()
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW).not_valid_after(now + CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def self_signed_ca_pem() -> str:
    """A fresh self-signed CA certificate (PEM, key discarded): what a server without TLS publishes as its CA."""
    cert, _ = _make_ca()
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _make_server(ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey,
                 hosts: Iterable[str]) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _new_key()
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kinformer-apiserver")]))
        .issuer_name(ca.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW).not_valid_after(now + SERVER_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, key_cert_sign=False,
                                     crl_sign=False, content_commitment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(_san_entries(hosts)), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def _load_ca(paths: CertPaths) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    try:
        cert = x509.load_pem_x509_certificate(paths.ca_cert.read_bytes())
        key = serialization.load_pem_private_key(paths.ca_key.read_bytes(), password=None)
    except (OSError, ValueError):
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or cert.not_valid_after_utc - RENEW_BEFORE < _now():
        return None
    if cert.public_key().public_numbers() != key.public_key().public_numbers():  # type: ignore[union-attr]
        return None
    return cert, key


def _server_cert_usable(paths: CertPaths, ca: x509.Certificate, hosts: Iterable[str]) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(paths.server_cert.read_bytes())
        key = serialization.load_pem_private_key(paths.server_key.read_bytes(), password=None)
    except (OSError, ValueError):
        return False
    if cert.issuer != ca.subject or cert.not_valid_after_utc - RENEW_BEFORE < _now():
        return False
    if cert.public_key().public_numbers() != key.public_key().public_numbers():  # type: ignore[union-attr]
        return False
    try:
        cert.verify_directly_issued_by(ca)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound):
        return False
    return all(name in sans for name in _san_entries(hosts))


def ensure_certs(directory: str | os.PathLike[str], hosts: Iterable[str] = ("127.0.0.1", "localhost")) -> CertPaths:
    """Make sure ``directory`` holds a CA and a server certificate valid for ``hosts``; return their paths.

    Files: ``ca.crt``, ``ca.key``, ``server.crt``, ``server.key``. Existing files are reused when
    still valid (see the module invariants); generation uses ECDSA P-256 keys and SHA-256 signatures.
    """
    base = Path(directory)
    hosts = list(dict.fromkeys(hosts)) or ["127.0.0.1", "localhost"]
    paths = CertPaths(ca_cert=base / "ca.crt", server_cert=base / "server.crt", server_key=base / "server.key")
    loaded = _load_ca(paths)
    if loaded is None:
        ca, ca_key = _make_ca()
        write_atomic(paths.ca_key, _key_pem(ca_key), 0o600)
        write_atomic(paths.ca_cert, ca.public_bytes(serialization.Encoding.PEM), 0o644)
    else:
        ca, ca_key = loaded
    if loaded is None or not _server_cert_usable(paths, ca, hosts):
        cert, key = _make_server(ca, ca_key, hosts)
        write_atomic(paths.server_key, _key_pem(key), 0o600)
        write_atomic(paths.server_cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return paths


def server_ssl_context(paths: CertPaths,
                       client_ca: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | None = None
                       ) -> ssl.SSLContext:
    """A TLS (1.2+) server context presenting ``paths.server_cert``.

    With ``client_ca`` (one PEM bundle path or several) clients are asked for a certificate: one signed
    by those CAs is verified during the handshake (a certificate signed by anyone else fails the
    handshake); a client sending none still connects and may authenticate otherwise.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(paths.server_cert, paths.server_key)
    ctx.set_alpn_protocols(["http/1.1"])
    if client_ca is not None:
        cas = [client_ca] if isinstance(client_ca, str | os.PathLike) else list(client_ca)
        for ca in cas:
            ctx.load_verify_locations(cafile=os.fspath(ca))
        if cas:
            ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


def issue_client_cert(paths: CertPaths, user: str, groups: Iterable[str] = (), *,
                      validity: dt.timedelta = CLIENT_VALIDITY) -> tuple[bytes, bytes]:
    """A client certificate for ``user`` (CN) in ``groups`` (one O each), signed by the CA at ``paths``.

    Returns ``(cert_pem, key_pem)``; nothing is written to disk. Raises ``ValueError`` when the CA files
    are missing or unusable (call :func:`ensure_certs` first) or the user name is empty.
    """
    if not user:
        raise ValueError("a client certificate needs a user name")
    key = _new_key()
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in dict.fromkeys(groups) if g]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
    return _sign_client(paths, x509.Name(attrs), key.public_key(), validity), _key_pem(key)


def sign_client_csr(paths: CertPaths, csr_pem: bytes, *,
                    validity: dt.timedelta = CLIENT_VALIDITY) -> bytes:
    """A client certificate (PEM) for a PEM certificate request, its subject as asked, signed by the CA.

    What a CertificateSigningRequest for ``kubernetes.io/kube-apiserver-client`` is issued. Raises
    ``ValueError`` for an unusable CA, a request that does not parse or whose signature does not verify.
    """
    csr = x509.load_pem_x509_csr(csr_pem)
    if not csr.is_signature_valid:
        raise ValueError("the certificate request's signature does not verify")
    public_key = csr.public_key()
    if not isinstance(public_key, (ec.EllipticCurvePublicKey, rsa.RSAPublicKey, ed25519.Ed25519PublicKey)):
        raise ValueError("unsupported public key type in the certificate request")
    return _sign_client(paths, csr.subject, public_key, validity)


def _sign_client(paths: CertPaths, subject: x509.Name, public_key: Any, validity: dt.timedelta) -> bytes:
    loaded = _load_ca(paths)
    if loaded is None:
        raise ValueError(f"no usable CA at {paths.ca_cert}")
    ca, ca_key = loaded
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.subject).public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW).not_valid_after(min(now + validity, ca.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, key_cert_sign=False,
                                     crl_sign=False, content_commitment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


def client_ssl_context(paths: CertPaths) -> ssl.SSLContext:
    """A client context that trusts only this server's CA (for tests and the Python client)."""
    ctx = ssl.create_default_context(cafile=str(paths.ca_cert))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx
