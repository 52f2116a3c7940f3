"""TLS and mTLS on the service port, with certificates made in the test: round trips with the
Python client, a client certificate standing for a key, a plaintext client refused cleanly (its
error hints at TLS), a
renewed certificate served without a restart, and health on its own plaintext port."""

from __future__ import annotations

import asyncio
import ssl
import time
from pathlib import Path

import grpc
import httpx
import pytest
from celestial_client import TLS, CelestialClient
from celestial_client.errors import (
    TLS_EXPECTED_HINT,
    TLS_UNEXPECTED_HINT,
    UnauthenticatedError,
    UnavailableError,
)
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.access.keys import create_key
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.certs import CertificateAuthority
from tests.integration.conftest import running_server


async def test_tls_round_trip_and_plaintext_refused(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    ca = CertificateAuthority(tmp_path / "pki")
    server = ca.issue("server", "localhost", server=True)
    async with running_server(tmp_path / "d", embedder, clock, tls_cert=server.cert,
                              tls_key=server.key) as srv:
        target = f"localhost:{srv.port}"

        def calls() -> None:
            with CelestialClient(target, tls=TLS.from_files(ca.cert), timeout=10) as c:
                m = c.store("the boat is blue")
                assert c.get(m.id).content == "the boat is blue"
            with CelestialClient(target, timeout=3) as plain, pytest.raises(UnavailableError):
                plain.stats()
            other = CertificateAuthority(tmp_path / "other")  # a server the client does not trust
            with CelestialClient(target, tls=TLS.from_files(other.cert), timeout=3) as c, \
                    pytest.raises(UnavailableError):
                c.stats()

        await asyncio.to_thread(calls)


async def test_a_tls_mismatch_is_named_in_the_clients_error(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock, server: MemoryServer
) -> None:
    ca = CertificateAuthority(tmp_path / "pki")
    pair = ca.issue("server", "localhost", server=True)
    async with running_server(tmp_path / "d", embedder, clock, tls_cert=pair.cert,
                              tls_key=pair.key) as tls_server:

        # 127.0.0.1, where the server listens: "localhost" may try [::1] first, and gRPC then
        # reports whichever address failed last, a refused [::1] as often as the TLS mismatch.
        def calls() -> tuple[str, str, str]:
            with CelestialClient(f"127.0.0.1:{tls_server.port}", timeout=3) as plain, \
                    pytest.raises(UnavailableError) as plain_on_tls:
                plain.stats()
            with CelestialClient(f"127.0.0.1:{server.port}", tls=TLS.from_files(ca.cert),
                                 timeout=3) as c, pytest.raises(UnavailableError) as tls_on_plain:
                c.stats()
            with grpc.insecure_channel(f"127.0.0.1:{tls_server.port}") as ch, \
                    CelestialClient(channel=ch, timeout=3) as own, \
                    pytest.raises(UnavailableError) as own_channel:
                own.stats()
            return (plain_on_tls.value.details, tls_on_plain.value.details,
                    own_channel.value.details)

        plain_on_tls, tls_on_plain, own_channel = await asyncio.to_thread(calls)
    assert "Socket closed" in plain_on_tls and TLS_EXPECTED_HINT in plain_on_tls
    assert TLS_UNEXPECTED_HINT in tls_on_plain
    assert "TLS" not in own_channel  # whether the caller's own channel uses TLS is not known


async def test_mtls_needs_a_client_certificate_whose_subject_can_stand_for_a_key(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    ca = CertificateAuthority(tmp_path / "pki")
    server = ca.issue("server", "localhost", server=True)
    billing = ca.issue("billing", "billing-service", server=False)
    stranger = ca.issue("stranger", "someone-else", server=False)
    keys = tmp_path / "keys.json"
    create_key(keys, "billing", "write", ["billing"], subject="billing-service")
    _, api_key = create_key(keys, "ops", "read", ["billing"])
    async with running_server(tmp_path / "d", embedder, clock, tls_cert=server.cert,
                              tls_key=server.key, tls_client_ca=ca.cert,
                              api_keys_file=keys) as srv:
        target = f"localhost:{srv.port}"

        def calls() -> None:
            tls = TLS.from_files(ca.cert, billing.cert, billing.key)
            with CelestialClient(target, tls=tls, timeout=10) as c:  # the certificate is the key
                m = c.store("invoice 42 was paid")
                assert m.tenant == "billing"
            with CelestialClient(target, tls=tls, api_key="cm_00_zz", timeout=10) as c, \
                    pytest.raises(UnauthenticatedError):
                c.stats()  # a wrong key is refused, not replaced by the certificate
            other = TLS.from_files(ca.cert, stranger.cert, stranger.key)
            with CelestialClient(target, tls=other, timeout=10) as c, \
                    pytest.raises(UnauthenticatedError):
                c.stats()  # a valid certificate no key names: still needs a key
            with CelestialClient(target, tls=other, api_key=api_key, timeout=10) as c:
                assert c.stats().total == 1
            no_cert = TLS.from_files(ca.cert)
            with CelestialClient(target, tls=no_cert, timeout=3) as c, \
                    pytest.raises(UnavailableError):
                c.stats()  # the handshake fails without a client certificate

        await asyncio.to_thread(calls)


async def test_a_renewed_certificate_is_served_without_a_restart(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    old_ca, new_ca = CertificateAuthority(tmp_path / "old"), CertificateAuthority(tmp_path / "new")
    live = tmp_path / "live"
    live.mkdir()
    first = old_ca.issue("server", "localhost", server=True)
    cert, key = live / "server.pem", live / "server.key"
    cert.write_bytes(first.cert.read_bytes())
    key.write_bytes(first.key.read_bytes())
    async with running_server(tmp_path / "d", embedder, clock, tls_cert=cert, tls_key=key) as srv:
        target = f"localhost:{srv.port}"

        def stats(ca: Path) -> int:
            with CelestialClient(target, tls=TLS.from_files(ca), timeout=5) as c:
                return c.stats().total

        assert await asyncio.to_thread(stats, old_ca.cert) == 0
        renewed = new_ca.issue("server", "localhost", server=True)
        time.sleep(0.01)  # a new modification time
        key.write_bytes(renewed.key.read_bytes())
        cert.write_bytes(renewed.cert.read_bytes())
        assert await asyncio.to_thread(stats, new_ca.cert) == 0
        with pytest.raises(UnavailableError):
            await asyncio.to_thread(stats, old_ca.cert)


async def test_health_has_its_own_plaintext_port_when_tls_is_on(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    ca = CertificateAuthority(tmp_path / "pki")
    server = ca.issue("server", "localhost", server=True)
    async with (
        running_server(tmp_path / "d", embedder, clock, tls_cert=server.cert,
                       tls_key=server.key, health_address="127.0.0.1:0") as srv,
        grpc.aio.insecure_channel(f"127.0.0.1:{srv.health_port}") as ch,
    ):
        reply = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest())
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.aio.AioRpcError) as err:  # and nothing else is there
            await pb_grpc.MemoryServiceStub(ch).Stats(pb.StatsRequest())
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_the_http_port_serves_the_same_tls(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    """The Connect port takes the gRPC port's certificate: a client that trusts the CA gets its
    answer over HTTPS; plaintext and a client trusting another CA get none."""
    ca = CertificateAuthority(tmp_path / "pki")
    server = ca.issue("server", "localhost", server=True)
    other = CertificateAuthority(tmp_path / "other")
    body = {"content": "the boat is blue"}
    path = "/celestial.v1.MemoryService/Store"
    async with running_server(tmp_path / "d", embedder, clock, tls_cert=server.cert,
                              tls_key=server.key, http_address="localhost:0") as srv:
        base = f"localhost:{srv.http_port}"
        trusting = ssl.create_default_context(cafile=ca.cert)
        async with httpx.AsyncClient(base_url=f"https://{base}", verify=trusting) as h:
            stored = await h.post(path, json=body)
        assert stored.status_code == 200 and stored.json()["memory"]["content"] == body["content"]
        async with httpx.AsyncClient(base_url=f"http://{base}", timeout=5) as plain:
            with pytest.raises(httpx.TransportError):
                await plain.post(path, json=body)
        stranger = ssl.create_default_context(cafile=other.cert)
        async with httpx.AsyncClient(base_url=f"https://{base}", verify=stranger) as h:
            with pytest.raises(httpx.ConnectError):
                await h.post(path, json=body)
