"""How a client reaches the server: plaintext or TLS (optionally with a client certificate, for
mTLS), retries, keepalive and message limits, and the API key sent with every call."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

SERVICE = "celestial.v1.MemoryService"


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


NOT_RETRIED = ("Feedback", "Reflect", "Observe")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """gRPC's own retries, set on the channel (its service config): a call that fails with one
    of ``codes`` is sent again up to ``max_attempts`` times in all, with exponential backoff.
    The client gives every Store item a request_id unless it has an id, so a retried write
    creates its memory once (the server's contract says which calls are safe to retry)."""

    max_attempts: int = 4
    initial_backoff_s: float = 0.2
    max_backoff_s: float = 5.0
    multiplier: float = 2.0
    codes: tuple[str, ...] = ("UNAVAILABLE",)

    def service_config(self) -> str:
        return json.dumps({"methodConfig": [{
            "name": [{"service": SERVICE}],
            "retryPolicy": {
                "maxAttempts": self.max_attempts,
                "initialBackoff": f"{self.initial_backoff_s}s",
                "maxBackoff": f"{self.max_backoff_s}s",
                "backoffMultiplier": self.multiplier,
                "retryableStatusCodes": list(self.codes),
            },
        }, {
            # Never retried: every Feedback is a vote, a Reflect spends model calls (its
            # UNAVAILABLE is the model's, not the connection's), and every Observe is a turn.
            "name": [{"service": SERVICE, "method": m} for m in NOT_RETRIED],
        }]})


@dataclass(frozen=True, slots=True)
class Connection:
    """How to reach the server: TLS or plaintext, retries, keepalive pings (so an idle
    connection through a proxy or load balancer is kept, or found dead, in time), the largest
    message either way, and any other gRPC channel option."""

    target: str = "localhost:50051"
    tls: TLS | None = None
    retry: RetryPolicy | None = field(default_factory=RetryPolicy)
    keepalive_s: float | None = 60.0
    max_message_bytes: int = 16 * 1024 * 1024
    options: tuple[tuple[str, Any], ...] = ()

    def channel_options(self) -> list[tuple[str, Any]]:
        opts: list[tuple[str, Any]] = [
            ("grpc.max_receive_message_length", self.max_message_bytes),
            ("grpc.max_send_message_length", self.max_message_bytes),
        ]
        if self.retry is not None:
            opts += [("grpc.enable_retries", 1),
                     ("grpc.service_config", self.retry.service_config())]
        else:
            opts.append(("grpc.enable_retries", 0))
        if self.keepalive_s:
            opts += [("grpc.keepalive_time_ms", int(self.keepalive_s * 1000)),
                     ("grpc.keepalive_timeout_ms", 20_000)]
        if self.tls is not None:
            opts += self.tls.options()
        return opts + list(self.options)

    def channel(self) -> grpc.Channel:
        if self.tls is None:
            return grpc.insecure_channel(self.target, self.channel_options())
        return grpc.secure_channel(self.target, self.tls.credentials(), self.channel_options())

    def aio_channel(self) -> grpc.aio.Channel:
        if self.tls is None:
            return grpc.aio.insecure_channel(self.target, self.channel_options())
        return grpc.aio.secure_channel(self.target, self.tls.credentials(),
                                       self.channel_options())


def key_metadata(api_key: str | None) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {api_key}"),) if api_key else ()
