"""The grpc.aio server: the memory service, health checking (NOT_SERVING while the store does
not answer), reflection, the periodic rebalance, and a graceful stop on SIGTERM/SIGINT (in-flight
calls have the grace period to finish, what is left is cancelled, the store is flushed).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import signal
import time

import grpc
from celestial_client.v1 import memory_pb2, memory_pb2_grpc
from celestial_memory.access.keys import KeyRing
from celestial_memory.access.rate import RateLimiter
from celestial_memory.api.connect.server import HttpServer
from celestial_memory.api.grpc.auth import Authenticator
from celestial_memory.api.grpc.call_limit import CallLimiter
from celestial_memory.api.grpc.decoding import DecodeGuard
from celestial_memory.api.grpc.gossip import Gossip, SharingServicer
from celestial_memory.api.grpc.observer import CallObserver
from celestial_memory.api.grpc.servicer import MemoryServicer
from celestial_memory.api.grpc.stream_limit import StreamLimiter
from celestial_memory.api.grpc.tls import ServerCertificates
from celestial_memory.config import Settings
from celestial_memory.errors import FailedPrecondition, InvalidArgument
from celestial_memory.memory.service import MemoryService
from celestial_memory.observability import metrics, telemetry
from celestial_memory.ops.http import OpsServer
from celestial_memory.sharing.node import SharingNode
from celestial_memory.understanding.chat import endpoints_in_use
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import _async as reflection_async
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

log = logging.getLogger(__name__)
# After the grace period, how long cancelled work may take to reach its next check.
STOP_WAIT_S = 30.0
SERVICE_NAME = memory_pb2.DESCRIPTOR.services_by_name["MemoryService"].full_name
SHARING_SERVICE = memory_pb2.DESCRIPTOR.services_by_name["PolicySharingService"].full_name


REFLECTION_V1 = "grpc.reflection.v1.ServerReflection"


def serve_reflection(server: grpc.aio.Server, services: tuple[str, ...]) -> None:
    """Reflection as v1alpha (grpcio-reflection) and as v1, which tools such as buf curl ask for
    first. The two protocols' messages are the same on the wire, so v1 is the v1alpha servicer
    under v1's name."""
    names = (*services, reflection.SERVICE_NAME, REFLECTION_V1)
    servicer = reflection_async.ReflectionServicer(names)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(REFLECTION_V1, {
        "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
            servicer.ServerReflectionInfo,
            request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
            response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString),
    }),))


def server_options(s: Settings) -> list[tuple[str, int]]:
    """One server per port, message sizes, streams per connection, idle connections, and
    keepalive enforcement (a client pinging more often than every 10 s without calls is
    disconnected)."""
    return [
        # gRPC lets a second server bind a port in use (SO_REUSEPORT), and the kernel then
        # splits new connections between the two: a second server must fail to start instead.
        ("grpc.so_reuseport", 0),
        ("grpc.max_receive_message_length", s.max_message_bytes),
        ("grpc.max_send_message_length", s.max_message_bytes),
        ("grpc.max_concurrent_streams", s.max_streams_per_connection),
        ("grpc.max_connection_idle_ms", int(s.max_connection_idle_s * 1000)),
        ("grpc.keepalive_time_ms", 60_000),
        ("grpc.keepalive_timeout_ms", 20_000),
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        ("grpc.http2.max_ping_strikes", 2),
    ]


def check_exposure(address: str, keys: bool, insecure: bool, tls: bool = False) -> None:
    """Without API keys anyone who reaches the port can read and change every tenant, so the
    server binds only a loopback address unless told otherwise explicitly."""
    loopback = is_loopback(address)
    if keys:
        if not loopback and not tls:
            log.warning("API keys without TLS on %s: keys cross the network in plaintext "
                        "(CELESTIAL_TLS_CERT / CELESTIAL_TLS_KEY)", address)
        return
    if loopback:
        log.warning("no API keys configured (CELESTIAL_API_KEYS_FILE): serving %s only; every "
                    "caller on this machine can use every tenant", address)
    elif insecure:
        log.warning("no API keys and --insecure-no-auth: anyone who reaches %s can read, change "
                    "and delete every tenant's memories", address)
    else:
        raise InvalidArgument(
            "address", f"{address} is reachable from other machines and no API keys are "
            "configured: set CELESTIAL_API_KEYS_FILE (celestial keys create), bind localhost, "
            "or pass --insecure-no-auth")


def is_loopback(address: str) -> bool:
    """Whether ``host:port`` (``[v6]:port`` too) binds only this machine."""
    host = address.rpartition(":")[0].strip("[]")
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class MemoryServer:
    """One running server. ``start`` binds (port 0 picks a free port); ``stop`` drains."""

    def __init__(self, service: MemoryService, address: str | None = None) -> None:
        self.service = service
        self.address = address or service.settings.address
        self._rebalance_task: asyncio.Task[None] | None = None
        self._optimize_task: asyncio.Task[None] | None = None
        self._understand_task: asyncio.Task[None] | None = None
        self._reflect_task: asyncio.Task[None] | None = None
        self._health_task: asyncio.Task[None] | None = None
        self._gossip_task: asyncio.Task[None] | None = None
        self.gossip: Gossip | None = None
        self.port = 0
        self.http: HttpServer | None = None  # the Connect port (api/connect/), when set
        self.http_port = 0

    async def start(self) -> int:
        # Built here, not in __init__: a grpc.aio server belongs to the loop that creates it.
        s = self.service.settings
        keys = KeyRing(s.api_keys_file, s.api_keys_reload_s) if s.api_keys_file else None
        check_exposure(self.address, keys is not None, s.insecure_no_auth, s.tls_cert is not None)
        if s.http_address:
            check_exposure(s.http_address, keys is not None, s.insecure_no_auth,
                           s.tls_cert is not None)
        rate = RateLimiter(s.rate_per_key, s.rate_burst) if s.rate_per_key > 0 else None
        if s.largest_memory_bytes() > s.max_message_bytes:
            log.warning("a memory at every input limit takes up to %d bytes, more than "
                        "max_message_bytes (%d): such a memory could not be read or exported; "
                        "lower the input limits or raise max_message_bytes",
                        s.largest_memory_bytes(), s.max_message_bytes)
        self.calls = CallLimiter(s.max_concurrent_rpcs, self.service.activity)
        # Innermost: it counts streams by the caller the authenticator has set.
        self.streams = StreamLimiter(s.max_streams_per_caller,
                                     s.max_open_streams or max(1, s.max_concurrent_rpcs // 2))
        # Outermost first; the HTTP port runs every call through the same ones.
        self.interceptors: list[grpc.aio.ServerInterceptor] = [  # type: ignore[type-arg]
            CallObserver(), self.calls, DecodeGuard(),
            Authenticator((SERVICE_NAME, SHARING_SERVICE), keys, rate),
            self.streams]
        # Off unless peers are listed; its service answers either way (FAILED_PRECONDITION).
        self.sharing = (SharingNode.from_settings(s, self.service.observing.policies,
                                                  self.service.store, self.service.clock)
                        if s.policy_peers else None)
        self.gossip = Gossip(self.sharing, s) if self.sharing is not None else None
        if self.sharing is not None and keys is None:
            log.warning("policy sharing without API keys: any caller that reaches this port "
                        "may speak for any listed peer (docs/sharing.md, peer keys)")
        self._server = grpc.aio.server(interceptors=self.interceptors, options=server_options(s))
        self._health = health.aio.HealthServicer()  # type: ignore[attr-defined]
        self.servicer = MemoryServicer(self.service)
        memory_pb2_grpc.add_MemoryServiceServicer_to_server(self.servicer, self._server)
        self.servicer.sharing = self.sharing
        memory_pb2_grpc.add_PolicySharingServiceServicer_to_server(
            SharingServicer(self.sharing), self._server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        serve_reflection(self._server, (SERVICE_NAME, SHARING_SERVICE, health.SERVICE_NAME))
        try:
            if s.tls_cert is not None and s.tls_key is not None:
                certs = ServerCertificates(s.tls_cert, s.tls_key, s.tls_client_ca)
                self.port = self._server.add_secure_port(self.address, certs.credentials())
            else:
                self.port = self._server.add_insecure_port(self.address)
        except RuntimeError:  # grpc says only "Failed to bind"
            self.port = 0
        if self.port == 0:
            # Released now, on the loop: a grpc.aio server freed later, off its loop (by the
            # collector, say), can crash the process.
            await self._server.stop(None)
            del self._server
            raise FailedPrecondition(
                f"cannot listen on {self.address}: the port is in use (another server?) or "
                "the address is not this machine's")
        self._health_server: grpc.aio.Server | None = None
        if s.health_address:  # Kubernetes' gRPC probes speak plaintext only
            self._health_server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
            health_pb2_grpc.add_HealthServicer_to_server(self._health, self._health_server)
            self.health_port = self._health_server.add_insecure_port(s.health_address)
            await self._health_server.start()
        if s.otlp_endpoint:
            telemetry.configure(s.otlp_endpoint)
        metrics.watch_service(self.service, s.metrics_top_tenants, s.metrics_zone_refresh_s)
        self.ops: OpsServer | None = None
        if s.metrics_address:
            self.ops = OpsServer(self.service, s.metrics_address, keys,
                                 open_without_keys=is_loopback(s.metrics_address)
                                 or s.insecure_no_auth)
            self.ops.start()
        # Before the first call: no operation a stopped server left is shown as running.
        await asyncio.to_thread(self.service.reflection.recover)
        await self._server.start()
        if s.http_address:
            self.http = HttpServer(s, s.http_address)
            try:
                self.http_port = await self.http.start(self.servicer, self.interceptors,
                                                       keys=keys is not None)
            except BaseException:
                await self._server.stop(None)
                raise
        await self._set_health(serving=True)
        self._health_task = asyncio.create_task(
            self._health_loop(self.service.settings.health_interval_s))
        interval = self.service.settings.rebalance_interval_s
        # With the admin clock a replay drives time and decides when to rebalance.
        if interval > 0 and not self.service.settings.admin_clock:
            self._rebalance_task = asyncio.create_task(self._rebalance_loop(interval))
        if self.service.understanding is not None:
            self._understand_task = asyncio.create_task(self._understand_loop())
        # Reflections' upkeep: what a stopped server left unfinished, leases, the trigger.
        self._reflect_task = asyncio.create_task(self._reflect_loop())
        if self.sharing is not None and self.gossip is not None:
            self._gossip_task = asyncio.create_task(self.gossip.run())
            log.info("sharing turn policies with %d peers every %g s as %s (%s)",
                     len(self.sharing.peers), s.policy_share_interval_s, self.sharing.address,
                     f"noise {s.policy_share_noise:g}" if s.policy_share_noise else "no noise")
        if self.service.settings.optimize_interval_s > 0:
            self._optimize_task = asyncio.create_task(
                self._optimize_loop(self.service.settings.optimize_interval_s)
            )
        log.info("serving on %s (port %d, %s)", self.address, self.port,
                 "mTLS" if s.tls_client_ca else "TLS" if s.tls_cert else "plaintext")
        # Said once here: a model left unset (or misspelt) shows only when a reflection fails.
        for line in endpoints_in_use(s) or ["no model endpoint (CELESTIAL_LLM_BASE_URL, "
                                            "CELESTIAL_LLM_MODEL): reflection is refused"]:
            log.info("%s", line)
        return self.port

    async def _set_health(self, serving: bool) -> None:
        status = (health_pb2.HealthCheckResponse.SERVING if serving
                  else health_pb2.HealthCheckResponse.NOT_SERVING)
        for name in ("", SERVICE_NAME):
            await self._health.set(name, status)

    async def _health_loop(self, interval: float) -> None:
        # NOT_SERVING while the store does not answer (load balancers and Kubernetes stop
        # sending calls), SERVING again once it does.
        serving = True
        while True:
            await asyncio.sleep(interval)
            try:
                now = await asyncio.to_thread(self.service.store_available)
            except Exception:
                log.exception("health probe failed")
                now = False
            if now != serving:
                serving = now
                log.warning("store %s: health %s", "answers" if now else "unavailable",
                            "SERVING" if now else "NOT_SERVING")
                await self._set_health(serving)

    async def _rebalance_loop(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                for tenant in await asyncio.to_thread(self.service.tenants):
                    rep = await asyncio.to_thread(self.service.rebalance, tenant)
                    log.info(  # quoted: a tenant's name must not forge a log line
                        "rebalance %r: %d scanned, %d moved",
                        tenant[:256], rep.scanned, sum(rep.moved.values()),
                    )
            except Exception:
                log.exception("periodic rebalance failed")

    async def _understand_loop(self) -> None:
        # The model's queue, off the request path: a pass that found work is followed at once
        # by the next; an idle queue is looked at every understand_poll_s.
        queue = self.service.understanding
        assert queue is not None
        while True:
            try:
                done = await asyncio.to_thread(queue.run_once)
                if done.understood or done.retried or done.given_up or done.over_budget:
                    await asyncio.to_thread(queue.waiting)  # the queue-depth gauge, when it moved
            except Exception:
                log.exception("model understanding failed")
                done = None
            if done is None or not (done.understood or done.retried or done.given_up):
                await asyncio.sleep(self.service.settings.understand_poll_s)

    async def _reflect_loop(self) -> None:
        # Off the request path (reflection/operations.py): an operation a stopped server left
        # running is ended (at once on the first turn), this server's leases are renewed, and
        # the tenants that reached reflect_after new memories get an automatic reflection.
        reflections = self.service.reflection
        while True:
            try:
                await asyncio.to_thread(reflections.tend)
            except Exception:
                log.exception("reflection upkeep failed")
            await asyncio.sleep(self.service.settings.understand_poll_s)

    async def _optimize_loop(self, interval: float) -> None:
        # Recall needs the HNSW index at scale (61 -> 10 ms at 100,000 memories); building it
        # takes minutes there, so it runs in a worker thread and never on a request.
        while True:
            await asyncio.sleep(interval)
            try:
                # The build holds the interpreter throughout: started in a gap between calls.
                await asyncio.to_thread(self.service.activity.gap, time.monotonic()
                                        + self.service.settings.background_yield_ms / 1000)
                started = time.perf_counter()
                if await asyncio.to_thread(self.service.build_indexes):
                    log.info("vector indexes built in %.1f s", time.perf_counter() - started)
            except Exception:
                log.exception("building the vector indexes failed")

    async def stop(self, grace: float | None = None) -> None:
        await self._health.enter_graceful_shutdown()
        for task in (self._rebalance_task, self._optimize_task, self._health_task,
                     self._understand_task, self._reflect_task, self._gossip_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self.gossip is not None:
            await self.gossip.close()
        g = self.service.settings.grace_seconds if grace is None else grace
        if self.http is not None:
            await self.http.stop()
        await self._server.stop(g)
        if self._health_server is not None:
            await self._health_server.stop(0)
        # Calls still running after the grace period were cancelled; their worker threads stop
        # at their next check (memory/cancellation.py). The store is closed only once they have.
        self.servicer.inflight.cancel_all()
        if not await asyncio.to_thread(self.servicer.inflight.wait_idle, STOP_WAIT_S):
            log.warning("%d calls still running after %.0f s; closing the store anyway",
                        len(self.servicer.inflight), STOP_WAIT_S)
        if self.ops is not None:
            self.ops.stop()
        self.service.close()
        log.info("stopped; store flushed and closed")

    async def wait(self) -> None:
        await self._server.wait_for_termination()


async def serve(service: MemoryService) -> None:
    server = MemoryServer(service)
    try:
        await server.start()
    except BaseException:
        service.close()
        raise
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("signal received: draining")
    await server.stop()
