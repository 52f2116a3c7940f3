"""The operator's HTTP port (``CELESTIAL_METRICS_ADDRESS``): ``/metrics`` for Prometheus and
``/orrery?tenant=...``, a live picture of a tenant's zones (static files in ``orrery/``, no build
step, nothing from a CDN), fed by ``/orrery/data``.

``/metrics`` carries no content and is open, even with API keys; it names the largest tenants
unless ``CELESTIAL_METRICS_HIDE_TENANTS`` labels them by a hash (observability/metrics.py). ``/orrery/data``
carries content (the page shows what a memory says on hover), so it asks what the gRPC port asks:
with API keys, a key of the read role for the tenant (``Authorization: Bearer``; the page takes
it from its URL's ``#key=...``, which browsers never send to a server); without keys, it answers
only on a loopback address unless the server runs with ``--insecure-no-auth``. It runs in
threads of its own, beside the gRPC server's loop.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from celestial_memory.access.credentials import credential
from celestial_memory.access.keys import KeyRing
from celestial_memory.access.roles import Role, checked_tenant
from celestial_memory.domain.models import MemoryFilter
from celestial_memory.domain.zones import Zone
from celestial_memory.errors import CelestialError, InvalidArgument, PermissionDenied, Unauthenticated
from celestial_memory.memory.service import MemoryService
from celestial_memory.observability.metrics import REGISTRY
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

log = logging.getLogger(__name__)
STATIC = {"orrery.js": "text/javascript", "orrery.css": "text/css"}
SHOWN_CHARS = 280  # of a memory's content on hover


def orrery_data(service: MemoryService, tenant: str, max_dots: int) -> dict[str, Any]:
    """The tenant's memories as the page draws them: every one up to ``max_dots``, else a
    sample of each zone in proportion to its count (ids are random, so id order samples)."""
    stats = service.stats(tenant)
    counts = {z.zone: z.count for z in stats.zones}
    total = sum(counts.values())
    sampled = total > max_dots
    dots: list[dict[str, Any]] = []
    for zone in Zone:
        want = counts[zone] if not sampled else round(max_dots * counts[zone] / total)
        cursor = None
        while want > 0:
            page, more = service.listing.in_id_order(
                tenant, MemoryFilter(zones=[zone]), min(want, 500),
                None if cursor is None else (None, cursor))
            for m in page:
                b = service.breakdown(m)
                dots.append({
                    "id": m.id, "zone": zone.name.lower(), "score": round(m.score, 4),
                    "recall_count": m.recall_count, "importance": round(m.importance, 3),
                    "pinned": m.pinned, "created_at": m.created_at,
                    "content": m.content[:SHOWN_CHARS] + ("…" if len(m.content) > SHOWN_CHARS else ""),
                    "breakdown": {"recall": round(b.recall, 4), "freshness": round(b.freshness, 4),
                                  "importance": round(b.importance, 4),
                                  "context": round(b.context, 4), "total": round(b.total, 4)}})
            want -= len(page)
            if not more or not page:
                break
            cursor = page[-1].id
    return {"tenant": tenant, "total": total, "archived": stats.archived, "sampled": sampled,
            "max_dots": max_dots, "zones": {z.name.lower(): counts[z] for z in Zone},
            "memories": dots}


class _IPv6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class OpsServer:
    def __init__(self, service: MemoryService, address: str, keys: KeyRing | None,
                 open_without_keys: bool) -> None:
        self.service, self.keys = service, keys
        self.open_without_keys = open_without_keys
        host, _, port = address.rpartition(":")
        ops = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 30  # seconds a connection may sit idle: each holds a thread

            def do_GET(self) -> None:
                ops.handle(self)

            def log_message(self, fmt: str, *args: Any) -> None:
                log.debug("ops http: " + fmt, *args)

        host = host.strip("[]") or "0.0.0.0"
        server = _IPv6Server if ":" in host else ThreadingHTTPServer
        self._http = server((host, int(port)), Handler)
        self._http.daemon_threads = True
        self.port = int(self._http.server_address[1])
        self._thread = threading.Thread(target=self._http.serve_forever, name="ops-http",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()
        log.info("metrics and orrery on http://%s:%d (/metrics, /orrery)",
                 self._http.server_address[0], self.port)

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def _tenant(self, req: BaseHTTPRequestHandler, requested: str) -> str:
        default = self.service.settings.default_tenant
        limit = self.service.settings.max_tenant_chars
        if self.keys is None:
            if not self.open_without_keys:
                raise PermissionDenied("the orrery shows content: without API keys it answers "
                                       "on a loopback address only")
            # A page elsewhere could rebind its own name to this machine: only a request that
            # names a loopback host is this machine's own browser.
            host = (req.headers.get("Host") or "").rpartition(":")[0] or req.headers.get("Host", "")
            if host.strip("[]") not in ("localhost", "127.0.0.1", "::1"):
                raise PermissionDenied("without API keys the orrery answers only requests for "
                                       "localhost, 127.0.0.1 or [::1]")
            return checked_tenant(requested, limit) if requested else default
        key = credential([(k.lower(), v) for k, v in req.headers.items()])
        if key is None:
            raise Unauthenticated("an API key is required (open the page as /orrery#key=...)")
        caller = self.keys.authenticate(key)
        caller.require(Role.READ, "the orrery")
        return caller.tenant(requested, default, limit)

    def handle(self, req: BaseHTTPRequestHandler) -> None:
        url = urlsplit(req.path)
        try:
            if url.path == "/metrics":
                self._send(req, HTTPStatus.OK, CONTENT_TYPE_LATEST, generate_latest(REGISTRY))
            elif url.path in ("/orrery", "/orrery/"):
                page = resources.files("celestial_memory.ops.orrery").joinpath("index.html")
                self._send(req, HTTPStatus.OK, "text/html; charset=utf-8", page.read_bytes())
            elif url.path.startswith("/orrery/") and url.path[8:] in STATIC:
                name = url.path[8:]
                body = resources.files("celestial_memory.ops.orrery").joinpath(name).read_bytes()
                self._send(req, HTTPStatus.OK, STATIC[name], body)
            elif url.path == "/orrery/data":
                query = parse_qs(url.query)
                tenant = self._tenant(req, query.get("tenant", [""])[0])
                data = orrery_data(self.service, tenant, self.service.settings.orrery_max_dots)
                self._send(req, HTTPStatus.OK, "application/json",
                           json.dumps(data, ensure_ascii=False).encode())
            else:
                self._send(req, HTTPStatus.NOT_FOUND, "text/plain", b"not found\n")
        except (Unauthenticated, PermissionDenied, InvalidArgument) as exc:
            status = {Unauthenticated: HTTPStatus.UNAUTHORIZED,
                      PermissionDenied: HTTPStatus.FORBIDDEN}.get(type(exc), HTTPStatus.BAD_REQUEST)
            self._send(req, status, "application/json", json.dumps({"error": str(exc)}).encode())
        except CelestialError as exc:
            self._send(req, HTTPStatus.SERVICE_UNAVAILABLE, "application/json",
                       json.dumps({"error": str(exc)}).encode())
        except Exception:
            log.exception("ops http: %s failed", url.path)
            self._send(req, HTTPStatus.INTERNAL_SERVER_ERROR, "text/plain", b"internal error\n")

    @staticmethod
    def _send(req: BaseHTTPRequestHandler, status: HTTPStatus, ctype: str, body: bytes) -> None:
        req.send_response(status)
        req.send_header("Content-Type", ctype)
        req.send_header("Content-Length", str(len(body)))
        req.send_header("Cache-Control", "no-store")
        req.send_header("X-Content-Type-Options", "nosniff")
        req.end_headers()
        req.wfile.write(body)
