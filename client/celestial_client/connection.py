"""How a client reaches the server: plaintext or TLS (optionally with a client certificate, for
mTLS), and the API key sent with every call."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc


@dataclass(frozen=True, slots=True)
class TLS:
    """TLS to the server. ``root_certificates``: the CA that signed the server's certificate
    (None: the system's roots). ``certificate_chain`` and ``private_key``: this client's
    certificate, for a server that asks for one (mTLS). ``server_name``: the name to check the
    server's certificate against, when it differs from the target's host."""

    root_certificates: bytes | None = None
    certificate_chain: bytes | None = None
    private_key: bytes | None = None
    server_name: str | None = None

    @classmethod
    def from_files(
        cls, ca: str | Path | None = None, cert: str | Path | None = None,
        key: str | Path | None = None, server_name: str | None = None,
    ) -> TLS:
        def read(p: str | Path | None) -> bytes | None:
            return Path(p).read_bytes() if p else None

        return cls(read(ca), read(cert), read(key), server_name)

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            self.root_certificates, self.private_key, self.certificate_chain)

    def options(self) -> list[tuple[str, str]]:
        return [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []


def key_metadata(api_key: str | None) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {api_key}"),) if api_key else ()


def channel(target: str, tls: TLS | None) -> grpc.Channel:
    if tls is None:
        return grpc.insecure_channel(target)
    return grpc.secure_channel(target, tls.credentials(), tls.options())


def aio_channel(target: str, tls: TLS | None) -> grpc.aio.Channel:
    if tls is None:
        return grpc.aio.insecure_channel(target)
    return grpc.aio.secure_channel(target, tls.credentials(), tls.options())
