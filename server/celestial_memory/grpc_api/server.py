"""The grpc.aio server: the memory service, health checking (NOT_SERVING while the store does
not answer), reflection, the periodic rebalance, and a graceful stop on SIGTERM/SIGINT (in-flight
calls have the grace period to finish, what is left is cancelled, the store is flushed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time

import grpc
from celestial.v1 import memory_pb2, memory_pb2_grpc
from celestial_memory.grpc_api.decoding import DecodeGuard
from celestial_memory.grpc_api.servicer import MemoryServicer
from celestial_memory.service import MemoryService
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

log = logging.getLogger(__name__)
# After the grace period, how long cancelled work may take to reach its next check.
STOP_WAIT_S = 30.0
SERVICE_NAME = memory_pb2.DESCRIPTOR.services_by_name["MemoryService"].full_name


class MemoryServer:
    """One running server. ``start`` binds (port 0 picks a free port); ``stop`` drains."""

    def __init__(self, service: MemoryService, address: str | None = None) -> None:
        self.service = service
        self.address = address or service.settings.address
        self._rebalance_task: asyncio.Task[None] | None = None
        self._optimize_task: asyncio.Task[None] | None = None
        self._health_task: asyncio.Task[None] | None = None
        self.port = 0

    async def start(self) -> int:
        # Built here, not in __init__: a grpc.aio server belongs to the loop that creates it.
        self._server = grpc.aio.server(interceptors=[DecodeGuard()])
        self._health = health.aio.HealthServicer()  # type: ignore[attr-defined]
        self.servicer = MemoryServicer(self.service)
        memory_pb2_grpc.add_MemoryServiceServicer_to_server(self.servicer, self._server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        reflection.enable_server_reflection(
            (SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), self._server
        )
        self.port = self._server.add_insecure_port(self.address)
        if self.port == 0:
            raise RuntimeError(f"could not bind {self.address}")
        await self._server.start()
        await self._set_health(serving=True)
        self._health_task = asyncio.create_task(
            self._health_loop(self.service.settings.health_interval_s))
        interval = self.service.settings.rebalance_interval_s
        # With the admin clock a replay drives time and decides when to rebalance.
        if interval > 0 and not self.service.settings.admin_clock:
            self._rebalance_task = asyncio.create_task(self._rebalance_loop(interval))
        if self.service.settings.optimize_interval_s > 0:
            self._optimize_task = asyncio.create_task(
                self._optimize_loop(self.service.settings.optimize_interval_s)
            )
        log.info("serving on %s (port %d)", self.address, self.port)
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
                    log.info(
                        "rebalance %s: %d scanned, %d moved",
                        tenant, rep.scanned, sum(rep.moved.values()),
                    )
            except Exception:
                log.exception("periodic rebalance failed")

    async def _optimize_loop(self, interval: float) -> None:
        # Recall needs the HNSW index at scale (61 -> 10 ms at 100,000 memories); building it
        # takes minutes there, so it runs in a worker thread and never on a request.
        while True:
            await asyncio.sleep(interval)
            try:
                started = time.perf_counter()
                if await asyncio.to_thread(self.service.build_indexes):
                    log.info("vector indexes built in %.1f s", time.perf_counter() - started)
            except Exception:
                log.exception("building the vector indexes failed")

    async def stop(self, grace: float | None = None) -> None:
        await self._health.enter_graceful_shutdown()
        for task in (self._rebalance_task, self._optimize_task, self._health_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        g = self.service.settings.grace_seconds if grace is None else grace
        await self._server.stop(g)
        # Calls still running after the grace period were cancelled; their worker threads stop
        # at their next check (cancellation.py). The store is closed only once they have.
        self.servicer.inflight.cancel_all()
        if not await asyncio.to_thread(self.servicer.inflight.wait_idle, STOP_WAIT_S):
            log.warning("%d calls still running after %.0f s; closing the store anyway",
                        len(self.servicer.inflight), STOP_WAIT_S)
        self.service.close()
        log.info("stopped; store flushed and closed")

    async def wait(self) -> None:
        await self._server.wait_for_termination()


async def serve(service: MemoryService) -> None:
    server = MemoryServer(service)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("signal received: draining")
    await server.stop()
