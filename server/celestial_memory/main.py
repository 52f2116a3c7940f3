"""``celestial serve``: build the settings (env, then CLI flags), the service, and serve."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from collections.abc import Sequence
from typing import Any

from celestial_memory.config import Settings


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",")]


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def add_serve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--address", help="host:port to bind (CELESTIAL_ADDRESS)")
    p.add_argument("--http-address",
                   help="host:port serving the contract over HTTP/JSON (CELESTIAL_HTTP_ADDRESS)")
    p.add_argument("--backend", choices=["edge", "qdrant"], help="CELESTIAL_BACKEND")
    p.add_argument("--data-dir", help="embedded store folder (CELESTIAL_DATA_DIR)")
    p.add_argument("--qdrant-url", help="qdrant backend URL or :memory: (CELESTIAL_QDRANT_URL)")
    p.add_argument("--model", help="embedding model name or path (CELESTIAL_MODEL)")
    p.add_argument("--weights", type=_floats, help="w_recall,w_freshness,w_importance,w_context")
    p.add_argument("--thresholds", type=_floats, help="core,inner,outer,belt minimum scores")
    p.add_argument("--capacities", type=_ints, help="five zone capacities, 0 = unbounded")
    p.add_argument("--min-relevance", type=float, help="recall relevance gate")
    p.add_argument("--rebalance-interval", type=float, help="seconds; 0 disables")
    p.add_argument("--log-level", help="DEBUG, INFO, WARNING")
    p.add_argument("--api-keys-file", help="API key file (CELESTIAL_API_KEYS_FILE)")
    p.add_argument("--insecure-no-auth", action="store_true", default=None,
                   help="bind a non-loopback address without API keys (CELESTIAL_INSECURE_NO_AUTH)")


def settings_from_args(args: argparse.Namespace) -> Settings:
    return Settings(**serve_overrides(args))


def serve_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the flags of ``celestial serve`` set (they win over the environment)."""
    overrides: dict[str, Any] = {}
    simple = {
        "address": "address", "http_address": "http_address", "backend": "backend",
        "data_dir": "data_dir",
        "qdrant_url": "qdrant_url", "model": "model", "min_relevance": "min_relevance",
        "rebalance_interval": "rebalance_interval_s", "log_level": "log_level",
        "thresholds": "zone_thresholds", "capacities": "zone_capacities",
        "api_keys_file": "api_keys_file", "insecure_no_auth": "insecure_no_auth",
    }
    for arg, field in simple.items():
        value = getattr(args, arg, None)
        if value is not None:
            overrides[field] = value
    if args.weights is not None:
        if len(args.weights) != 4:
            raise SystemExit("--weights needs four comma-separated numbers")
        keys = ("w_recall", "w_freshness", "w_importance", "w_context")
        overrides.update(zip(keys, args.weights, strict=True))
    return overrides


def serve_main(args: argparse.Namespace) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    settings = settings_from_args(args)
    from celestial_memory.observability import json_logs

    json_logs.configure(settings.log_level, settings.log_format)
    from celestial_memory.api.grpc.server import serve
    from celestial_memory.app import build_service
    from celestial_memory.errors import CelestialError

    try:
        service = build_service(settings)
        asyncio.run(serve(service))
    except CelestialError as exc:  # e.g. the store cannot be reached: one line, no traceback
        logging.getLogger("celestial_memory").error("cannot start: %s", exc)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="celestial-server")
    add_serve_arguments(parser)
    return serve_main(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
