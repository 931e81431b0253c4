"""The gateway's Prometheus metrics (``GET /metrics``), with the official
``prometheus_client``.

One :class:`GatewayMetrics` per app, on a registry of its own (two gateways in one
process do not mix their counts). It is a :class:`~credo.serve.guard.GuardObserver`:
the Guard tells it of every question once, in the same place it writes the question's
decision log line, so the question counters equal the log's lines by status and cause.

================================================  =========================================
``credo_gateway_http_requests_total``             HTTP requests by route and status code
``credo_gateway_questions_total``                 questions by ``status`` (answered,
                                                  rejected, failed) and ``cause``: the log
``credo_gateway_question_samples``                answer samples drawn per decided question
``credo_gateway_question_seconds``                submission to answer, every question
``credo_gateway_queue_seconds``                   waiting for a free question thread
``credo_gateway_questions_in_flight``             questions sampling now
``credo_gateway_questions_pending``               questions taken and not ended
``credo_gateway_upstream_calls_total``            backend calls sent (retries included)
``credo_gateway_upstream_retries_total``          of them, retries
``credo_gateway_upstream_errors_total``           requests failed after retries, by kind
``credo_gateway_upstream_tokens_total``           tokens the servers reported, by type
``credo_gateway_samples_total``                   samples by ``source``: generated, cached
``credo_gateway_certificate_info``                the certificate served: id, method,
                                                  procedure, alpha, delta, threshold
================================================  =========================================
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from credo.generation.executor import ExecutionStats
from credo.serve.guard import Guard, Settled

__all__ = ["CONTENT_TYPE", "GatewayMetrics"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
"""The media type of ``GET /metrics`` (Prometheus text format 0.0.4)."""

SAMPLE_BUCKETS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256)
SECOND_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300)


class GatewayMetrics:
    """The metrics of one gateway over ``guard`` (module docstring)."""

    def __init__(self, guard: Guard) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.http = Counter("credo_gateway_http_requests", "HTTP requests by route and "
                            "status code", ("route", "status"), registry=r)
        self.questions = Counter("credo_gateway_questions", "Questions ended, by status "
                                 "(answered, rejected, failed) and cause (failed ones)",
                                 ("status", "cause"), registry=r)
        self.samples = Histogram("credo_gateway_question_samples", "Answer samples drawn "
                                 "per decided question", buckets=SAMPLE_BUCKETS, registry=r)
        self.latency = Histogram("credo_gateway_question_seconds", "Seconds from "
                                 "submission to the end of a question",
                                 buckets=SECOND_BUCKETS, registry=r)
        self.queued = Histogram("credo_gateway_queue_seconds", "Seconds a question waited "
                                "for a free question thread", buckets=SECOND_BUCKETS,
                                registry=r)
        self.calls = Counter("credo_gateway_upstream_calls", "Backend calls sent for the "
                             "questions, retries included", registry=r)
        self.retries = Counter("credo_gateway_upstream_retries", "Backend calls that were "
                               "retries", registry=r)
        self.errors = Counter("credo_gateway_upstream_errors", "Upstream requests failed "
                              "after their retries, by kind", ("kind",), registry=r)
        self.tokens = Counter("credo_gateway_upstream_tokens", "Tokens the servers "
                              "reported, by type", ("type",), registry=r)
        self.drawn = Counter("credo_gateway_samples", "Samples of the questions, by source "
                             "(generated, cached)", ("source",), registry=r)
        in_flight = Gauge("credo_gateway_questions_in_flight", "Questions sampling now",
                          registry=r)
        in_flight.set_function(lambda: guard.in_flight)
        pending = Gauge("credo_gateway_questions_pending", "Questions taken and not ended",
                        registry=r)
        pending.set_function(lambda: guard.pending)
        c = guard.cert.certificate
        Info("credo_gateway_certificate", "The certificate this gateway serves",
             registry=r).info({
                 "id": guard.id, "method": guard.cert.method, "procedure": guard.procedure,
                 "certify": c.procedure, "alpha": f"{c.alpha:g}",
                 "delta": "" if c.delta is None else f"{c.delta:g}",
                 "threshold": "" if c.threshold is None else repr(c.threshold),
                 "model": guard.model_identity})

    # ------------------------------------------------------------------ the observer

    def started(self, request_id: str, queued: float) -> None:
        """A question left the queue."""
        self.queued.observe(queued)

    def round(self, request_id: str, description: str, stats: ExecutionStats,
              start: float, end: float) -> None:
        """Rounds are counted once per question (:meth:`settled`), not here."""

    def settled(self, request_id: str, outcome: Settled) -> None:
        """A question ended: counted as its log line says."""
        self.questions.labels(outcome.status, outcome.cause or "").inc()
        self.latency.observe(outcome.seconds)
        if outcome.status != "failed":
            self.samples.observe(outcome.samples)
        u = outcome.upstream
        self.calls.inc(u.calls)
        self.retries.inc(u.retries)
        for kind in u.failures:
            self.errors.labels(kind).inc()
        self.tokens.labels("prompt").inc(u.prompt_tokens)
        self.tokens.labels("completion").inc(u.completion_tokens)
        self.drawn.labels("generated").inc(u.generated)
        self.drawn.labels("cached").inc(u.cached)

    # ------------------------------------------------------------------ HTTP

    def request(self, route: str, status: int) -> None:
        """One HTTP response."""
        self.http.labels(route, str(status)).inc()

    def exposition(self) -> bytes:
        """The metrics in Prometheus text format."""
        return generate_latest(self.registry)

