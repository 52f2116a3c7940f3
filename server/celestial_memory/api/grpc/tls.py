"""TLS on the service port, and mTLS when a client CA is given: the certificate and key are read
again when their files change (checked at each new connection), so a renewed certificate is
served without a restart."""

from __future__ import annotations

import logging
from pathlib import Path

import grpc

log = logging.getLogger(__name__)


class ServerCertificates:
    def __init__(self, cert: Path, key: Path, client_ca: Path | None = None) -> None:
        self._files = [p for p in (cert, key, client_ca) if p is not None]
        self._cert, self._key, self._client_ca = cert, key, client_ca
        self._stamp = self._stat()

    def _stat(self) -> tuple[tuple[int, int], ...]:
        return tuple((p.stat().st_mtime_ns, p.stat().st_size) for p in self._files)

    def _configuration(self) -> grpc.ServerCertificateConfiguration:
        ca = self._client_ca.read_bytes() if self._client_ca else None
        return grpc.ssl_server_certificate_configuration(
            [(self._key.read_bytes(), self._cert.read_bytes())], root_certificates=ca)

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """Called by grpc before each handshake: a new configuration when the files changed."""
        try:
            stamp = self._stat()
            if stamp == self._stamp:
                return None
            config = self._configuration()
        except (OSError, ValueError) as exc:  # half-written, or being replaced: keep the old one
            log.warning("TLS certificate files unreadable (%s); serving the previous ones", exc)
            return None
        self._stamp = stamp
        log.info("TLS certificate reloaded from %s", self._cert)
        return config

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.dynamic_ssl_server_credentials(
            self._configuration(), self._fetch,  # type: ignore[arg-type]  # None: unchanged
            require_client_authentication=self._client_ca is not None)
