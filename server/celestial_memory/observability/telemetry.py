"""OpenTelemetry traces, when ``CELESTIAL_OTLP_ENDPOINT`` names a collector (the ``otel``
extra): a span around each RPC (api/grpc/observer.py) and around each recall stage
(metrics.Stages).
With no endpoint nothing is set up and ``span`` costs one check.

The service's work runs in worker threads started with ``asyncio.to_thread``, which carries the
context along, so a stage's span is the child of its RPC's.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)
_tracer: Any = None


def configure(endpoint: str, service_name: str = "celestial-memory", exporter: Any = None) -> None:
    """Trace to the OTLP/gRPC ``endpoint`` (or to ``exporter``, which tests pass)."""
    global _tracer
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError as err:
        raise RuntimeError("CELESTIAL_OTLP_ENDPOINT needs the otel extra: "
                           "pip install 'celestial-memory[otel]'") from err
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    _tracer = provider.get_tracer("celestial_memory")
    log.info("tracing to %s", endpoint or type(exporter).__name__)


def disable() -> None:
    global _tracer
    _tracer = None


def enabled() -> bool:
    return _tracer is not None


@contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None,
         carrier: Mapping[str, str] | None = None) -> Iterator[Any]:
    """A span named ``name`` as the current span's child (or, given a ``carrier`` of W3C
    ``traceparent`` headers, as the caller's span's child), or nothing when tracing is off."""
    if _tracer is None:
        yield None
        return
    parent = None
    if carrier:
        from opentelemetry import propagate

        parent = propagate.extract(dict(carrier))
    with _tracer.start_as_current_span(name, context=parent,
                                       attributes=dict(attributes or {})) as s:
        yield s
