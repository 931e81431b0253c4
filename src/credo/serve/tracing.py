"""OpenTelemetry traces of the gateway (``credo serve --otlp-endpoint URL``).

Optional: ``opentelemetry-sdk`` and its OTLP/HTTP exporter are imported only when an
endpoint is given (the ``otel`` extra); without one nothing of OpenTelemetry is loaded.
:class:`Tracing` is a :class:`~credo.serve.guard.GuardObserver` that exports, per
question, one span ``credo.question`` from its submission to its end (attributes: the
request id, status, cause, accept, samples drawn, upstream calls and tokens, the
certificate's id), and under it one span ``credo.round`` per executor call its sampling
made (what it asked for, how many samples came from the cache, how many it generated,
the backend calls and tokens, failed requests). Spans go out in batches over OTLP/HTTP
(protobuf) to ``endpoint`` (a collector's ``/v1/traces``) from a background thread;
:meth:`Tracing.close` flushes them.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from credo.errors import UserError
from credo.generation.executor import ExecutionStats
from credo.serve.guard import Settled

__all__ = ["Tracing"]


class Tracing:
    """Spans of the questions of one gateway, exported to ``endpoint`` (module
    docstring); ``certificate`` is the served certificate's id (an attribute of every
    question span). ``exporter`` replaces the OTLP exporter (tests read spans in
    memory)."""

    def __init__(self, endpoint: str | None, certificate: str, *,
                 service_name: str = "credo-gateway", exporter: Any = None) -> None:
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError:
            raise UserError("--otlp-endpoint: OpenTelemetry is not installed; pip install "
                            "'credo[otel]' (opentelemetry-sdk and its OTLP exporter)") from None
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter,
            )

            exporter = OTLPSpanExporter(endpoint=endpoint)
        self.provider = TracerProvider(resource=Resource.create({"service.name":
                                                                 service_name}))
        self.provider.add_span_processor(BatchSpanProcessor(exporter))
        self.tracer = self.provider.get_tracer("credo.serve")
        self.certificate = certificate
        self._spans: dict[str, Any] = {}
        self._lock = threading.Lock()

    def started(self, request_id: str, queued: float) -> None:
        """Open the question's span at its submission (``queued`` seconds ago)."""
        span = self.tracer.start_span(
            "credo.question", start_time=_ns(time.time() - queued),
            attributes={"credo.request_id": request_id, "credo.certificate": self.certificate,
                        "credo.queued_seconds": queued})
        with self._lock:
            self._spans[request_id] = span

    def round(self, request_id: str, description: str, stats: ExecutionStats,
              start: float, end: float) -> None:
        """One executor call of the question, as a child span of its question's."""
        from opentelemetry import trace

        with self._lock:
            parent = self._spans.get(request_id)
        context = trace.set_span_in_context(parent) if parent is not None else None
        span = self.tracer.start_span(
            "credo.round", context=context, start_time=_ns(start),
            attributes={"credo.request_id": request_id, "credo.round": description,
                        "credo.samples_requested": stats.samples,
                        "credo.samples_cached": stats.cached_samples,
                        "credo.samples_generated": stats.generated_samples,
                        "credo.upstream_calls": stats.calls,
                        "credo.retries": stats.retries,
                        "credo.prompt_tokens": stats.prompt_tokens,
                        "credo.completion_tokens": stats.completion_tokens,
                        "credo.failed_requests": stats.failed_requests})
        span.end(end_time=_ns(end))

    def settled(self, request_id: str, outcome: Settled) -> None:
        """Close the question's span with how it ended (a question refused before it
        started gets a span of its own)."""
        with self._lock:
            span = self._spans.pop(request_id, None)
        if span is None:
            span = self.tracer.start_span(
                "credo.question", start_time=_ns(time.time() - outcome.seconds),
                attributes={"credo.request_id": request_id,
                            "credo.certificate": self.certificate})
        u = outcome.upstream
        span.set_attributes({
            "credo.status": outcome.status, "credo.cause": outcome.cause or "",
            "credo.samples": outcome.samples, "credo.upstream_calls": u.calls,
            "credo.prompt_tokens": u.prompt_tokens,
            "credo.completion_tokens": u.completion_tokens,
            "credo.samples_cached": u.cached, "credo.seconds": outcome.seconds})
        if outcome.status == "failed":
            from opentelemetry.trace import Status, StatusCode

            span.set_status(Status(StatusCode.ERROR, outcome.cause or "failed"))
        span.end()

    def close(self) -> None:
        """Export what is pending and stop the exporter."""
        self.provider.shutdown()


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)
