"""The serving half of the settings (config.py's ``Settings`` builds on it): the ports, the
trust boundary and the gRPC server's limits. Its fields come first in ``Settings`` and in
docs/configuration.md.

It also records, as the settings are built, where each value came from (``source``): the
values given to the constructor (``celestial serve``'s flags, main.py), the ``CELESTIAL_``
environment, or the default. A running server reports them (GetConfig, ops/running_config.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr
from pydantic_settings import BaseSettings, SettingsConfigDict

# Where a setting's value came from, as ``ServingSettings.source`` says.
FLAG, ENV, DEFAULT = "flag", "env", "default"


class ServingSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CELESTIAL_", extra="ignore")
    # Each field's source, recorded once, when the settings are built: the environment may
    # change later in the process, what the server started with does not.
    _sources: dict[str, str] = PrivateAttr(default_factory=dict)

    def __init__(self, **values: Any) -> None:
        super().__init__(**values)
        # As pydantic-settings reads the environment: names in any case, empty values too.
        environ = {name.lower() for name in os.environ}
        self._sources = {
            name: FLAG if name in values else ENV if self.env_name(name).lower() in environ
            else DEFAULT for name in type(self).model_fields}

    @classmethod
    def env_name(cls, name: str) -> str:
        """The environment variable that sets the field ``name``: CELESTIAL_<NAME>."""
        return f"{cls.model_config.get('env_prefix', '')}{name}".upper()

    def source(self, name: str) -> str:
        """Where the field ``name``'s value came from when these settings were built: "flag"
        (given to the constructor), "env" or "default"."""
        return self._sources.get(name, DEFAULT)

    # Serving
    address: str = Field("localhost:50051", description="host:port the gRPC server binds")
    grace_seconds: float = Field(5.0, ge=0, description="graceful shutdown period")
    # The trust boundary
    api_keys_file: Path | None = Field(
        None, description="API key file (celestial keys create); unset: no keys, localhost only")
    api_keys_reload_s: float = Field(1.0, gt=0, description="how often the key file is re-read")
    insecure_no_auth: bool = Field(
        False, description="allow binding a non-loopback address without API keys")
    rate_per_key: float = Field(0.0, ge=0, description="calls/s per API key; 0: no limit")
    rate_burst: float = Field(50.0, ge=1, description="calls a key may make at once")
    tls_cert: Path | None = Field(None, description="TLS certificate (PEM) of the service port")
    tls_key: Path | None = Field(None, description="its private key (PEM)")
    tls_client_ca: Path | None = Field(
        None, description="CA of client certificates: set, every client must present one (mTLS)")
    # The HTTP port: the contract over Connect (api/connect/), beside the gRPC port.
    http_address: str = Field(
        "", description="host:port serving the contract over Connect (HTTP/JSON); empty: off")
    http_cors_origins: list[str] = Field(
        default_factory=list, description="browser origins allowed to call the HTTP port")
    http_max_header_bytes: int = Field(
        16_384, ge=1024, le=1_048_576,
        description="largest request head the HTTP port reads in pieces (one read: 64 KiB more)")
    http_max_connections: int = Field(
        1024, gt=0, description="connections the HTTP port holds at once; beyond, 503 and closed")
    http_max_connections_per_address: int = Field(
        128, gt=0, description="of those, from one client address (raise it behind a proxy)")
    http_conversion: Literal["process", "thread", "loop"] = Field(
        "process", description="where the HTTP port converts large JSON messages: worker "
        "processes (isolated from other callers), threads, or the serving loop itself")
    # Limits of the gRPC server (docs/design.md, "The trust boundary").
    max_message_bytes: int = Field(
        4 * 1024 * 1024, gt=0, description="largest message received or sent (one stream item)")
    max_concurrent_rpcs: int = Field(
        512, gt=0, description="calls served at once; beyond, RESOURCE_EXHAUSTED")
    max_streams_per_connection: int = Field(100, gt=0, description="concurrent calls per connection")
    max_connection_idle_s: float = Field(300.0, gt=0, description="idle connections are closed")
    max_stream_s: float = Field(
        600.0, gt=0, description="longest a StoreBatch or Import stream may take")
    stream_idle_s: float = Field(
        30.0, gt=0, description="a StoreBatch or Import stream that sends nothing this long ends")
    max_streams_per_caller: int = Field(
        16, gt=0, description="streams (StoreBatch, Import, Export, health Watch, reflection) "
        "open at once per key; without keys per address, every loopback address one caller")
    max_open_streams: int = Field(
        0, ge=0, description="streams open at once in all; 0: half of max_concurrent_rpcs, so "
        "unary calls always find a slot")
    health_address: str = Field(
        "", description="a plaintext port serving only gRPC health (probes, when TLS is on)")

