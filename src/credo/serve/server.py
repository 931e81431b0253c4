"""``credo serve``: a :class:`~credo.serve.guard.Guard` behind the OpenAI protocol
(:func:`credo.serve.app.create_app`), served by uvicorn.

Order of events: every setting is checked first (limits, API keys: an empty key is
refused), then the Guard reads the certificate and refuses one whose settings differ
from the gateway's or whose threshold lies outside its method's scores (a
:class:`~credo.errors.UserError`: exit 2, one line) and checks every model, all before
anything listens; then the startup line says what the guarantee covers; then the port is
bound (a port in use is a user error too) and uvicorn serves.

Shutdown is a bounded drain, as vLLM's and LiteLLM's servers do it: on SIGTERM or SIGINT
the gateway stops accepting connections and new questions (503 with ``Retry-After`` on a
connection still open), lets the questions in flight finish for ``drain_timeout``
seconds, then ends the rest with 503 and ``Retry-After`` (their model calls cancelled,
each logged), flushes and syncs the decision log and exits 0. A second signal shortens
nothing: it prints what the drain still waits for and until when. The API key is
compared, never written: not to the log, not to the terminal.
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from credo.errors import UserError
from credo.serve.guard import DEFAULT_ABSTENTION, Guard, OnReject
from credo.serve.limits import DEFAULT_DRAIN_TIMEOUT, DEFAULT_MAX_QUESTION_CHARS

__all__ = ["DEFAULT_DRAIN_TIMEOUT", "Gateway", "ServeResult", "bind", "serve"]

CLOSE_GRACE_S = 3.0
"""Seconds uvicorn waits, past the drain, for the 503s to be written before it stops."""


@dataclass(frozen=True)
class ServeResult:
    """How a ``credo serve`` ended: the questions answered, those the drain ended with
    503, and the decision log."""

    answered: int
    log: Path | None
    drained: int = 0


def serve(
    certificate: str | Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8008,
    api_key: str | Sequence[str] | Any = None,
    log: str | Path | None = None,
    on_reject: OnReject = "flag",
    abstention: str = DEFAULT_ABSTENTION,
    max_concurrent: int = 64,
    max_queue: int = 256,
    timeout: float | None = None,
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT,
    max_body_bytes: int | None = None,
    max_json_depth: int | None = None,
    max_question_chars: int = DEFAULT_MAX_QUESTION_CHARS,
    otlp_endpoint: str | None = None,
    config: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    served_model: str | None = None,
    say: Callable[[str], None] = print,
    guard_options: Mapping[str, Any] | None = None,
) -> ServeResult:
    """Serve until SIGINT or SIGTERM (module docstring). ``api_key``: a key, several,
    or an :class:`~credo.serve.app.ApiKeys` (None: no auth). ``say`` prints the startup
    and the closing lines; ``guard_options`` go to :class:`~credo.serve.guard.Guard` as
    they are (tests hand in scripted models)."""
    import uvicorn

    from credo.serve.app import ApiKeys, Limits, create_app

    if not drain_timeout >= 0:
        raise UserError(f"--drain-timeout {drain_timeout:g}: give a number of seconds >= 0")
    limits = Limits(**{k: v for k, v in (("max_body_bytes", max_body_bytes),
                                         ("max_json_depth", max_json_depth)) if v is not None})
    keys: ApiKeys | None = ApiKeys.of(api_key)
    guard = Guard(certificate, config=config, overrides=overrides, on_reject=on_reject,
                  abstention=abstention, log=log, max_concurrent=max_concurrent,
                  max_queue=max_queue, timeout=timeout,
                  max_question_chars=max_question_chars, **dict(guard_options or {}))
    tracing = None
    drained = 0
    try:
        if otlp_endpoint:
            from credo.serve.tracing import Tracing

            tracing = Tracing(otlp_endpoint, guard.id)
            guard.add_observer(tracing)
        say(f"credo serve: {guard.guarantee()}")
        sock = bind(host, port)
        where = sock.getsockname()
        app = create_app(guard, api_key=keys, served_model=served_model, limits=limits)
        server = _DrainingServer(uvicorn.Config(
            app, log_config=None, log_level="warning", access_log=False, lifespan="off",
            timeout_graceful_shutdown=drain_timeout + CLOSE_GRACE_S),
            guard, drain_timeout, say)
        say(f"credo serve: listening on http://{where[0]}:{where[1]}/v1 (model "
            f"{served_model or guard.model_identity}; {guard.procedure}; "
            f"{'API key required' if keys else 'no API key'}; decision log "
            f"{log or 'off'}; metrics at /metrics"
            f"{f'; traces to {otlp_endpoint}' if otlp_endpoint else ''}); stop with Ctrl-C "
            f"or SIGTERM (drains for up to {drain_timeout:g} s)")
        with _quiet_after_signals():
            server.run(sockets=[sock])
        drained = server.drained()
    finally:
        guard.close(timeout=0.0)
        if tracing is not None:
            tracing.close()
    say(f"credo serve: stopped; {guard.answered} questions answered"
        + (f", {drained} ended by the drain (503)" if drained else "")
        + (f", decision log {log}" if log else ""))
    return ServeResult(guard.answered, Path(log) if log else None, drained)


class _DrainingServer:
    """uvicorn's server whose signals start the Guard's bounded drain: the first stops
    the listener and starts the drain; any later one says what it waits for and
    shortens nothing."""

    def __init__(self, config: Any, guard: Guard, drain_timeout: float,
                 say: Callable[[str], None]) -> None:
        import uvicorn

        self.guard, self.drain_timeout, self.say = guard, drain_timeout, say
        self._until: float | None = None
        self._drain: threading.Thread | None = None
        self._ended = 0
        outer = self

        class Server(uvicorn.Server):
            def handle_exit(self, sig: int, frame: Any) -> None:
                outer.signal(self, sig)

        self.server = Server(config)

    def run(self, sockets: list[socket.socket]) -> None:
        self.server.run(sockets=sockets)
        if self._drain is not None:
            self._drain.join()

    def drained(self) -> int:
        """How many questions the drain ended with 503."""
        return self._ended

    def signal(self, server: Any, sig: int) -> None:
        """SIGTERM / SIGINT (module docstring)."""
        name = signal.Signals(sig).name
        if self._drain is None:
            self._until = time.monotonic() + self.drain_timeout
            self.say(f"credo serve: {name}: draining: no new questions; "
                     f"{self.guard.waiting_for()}; the rest get 503 in "
                     f"{self.drain_timeout:g} s (--drain-timeout)")
            self._drain = threading.Thread(target=self._run_drain, name="credo-drain",
                                           daemon=True)
            self._drain.start()
            server.should_exit = True
            return
        left = max(0.0, (self._until or 0) - time.monotonic())
        self.say(f"credo serve: {name} again: still draining ({self.guard.waiting_for()}); "
                 f"what is left gets 503 in {left:.0f} s, then the log is synced and the "
                 "gateway exits (kill -9 would lose the answers in flight)")

    def _run_drain(self) -> None:
        self._ended = self.guard.drain(self.drain_timeout)


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (0: a free port); a
    :class:`~credo.errors.UserError` naming the option when it cannot be bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as e:
        sock.close()
        raise UserError(f"--host {host} --port {port}: cannot listen there "
                        f"({e.strerror or e})") from None
    sock.set_inheritable(True)
    return sock


class Gateway:
    """The HTTP gateway over ``guard`` in a background thread of this process (a notebook,
    a test, an application that keeps its own Guard)::

        with credo.Guard("cert.json") as guard, Gateway(guard) as url:
            client = openai.OpenAI(base_url=url, api_key="none")

    ``port`` 0 takes a free one; ``url`` is ``http://host:port/v1``. Leaving the ``with``
    stops it as uvicorn stops (requests in flight are answered first, for
    ``drain_timeout`` seconds at most); the Guard is its owner's to drain and close.
    ``app_options`` go to :func:`~credo.serve.app.create_app` (``limits``,
    ``metrics``)."""

    def __init__(self, guard: Guard, *, host: str = "127.0.0.1", port: int = 0,
                 api_key: str | Sequence[str] | Any = None, served_model: str | None = None,
                 timeout: float | None = None, drain_timeout: float = 60.0,
                 **app_options: Any) -> None:
        import uvicorn

        from credo.serve.app import create_app

        self._sock = bind(host, port)
        where = self._sock.getsockname()
        self.url = f"http://{where[0]}:{where[1]}/v1"
        self.app = create_app(guard, api_key=api_key, served_model=served_model,
                              timeout=timeout, **app_options)
        self._server = uvicorn.Server(uvicorn.Config(
            self.app, log_config=None, log_level="warning", access_log=False,
            lifespan="off", timeout_graceful_shutdown=drain_timeout + CLOSE_GRACE_S))
        self._thread = threading.Thread(target=self._server.run, args=([self._sock],),
                                        daemon=True, name="credo-gateway")

    def __enter__(self) -> str:
        self._thread.start()
        return self.url

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop taking connections, answer what is in flight, and return."""
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join()
        self._sock.close()


@contextmanager
def _quiet_after_signals() -> Iterator[None]:
    """uvicorn stops on SIGINT / SIGTERM, then raises the signal again under the handler
    it found, which would end the process before the Guard closes its log: the handler
    it finds is a no-op, and the real ones come back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGINT, signal.SIGTERM)
    before = {s: signal.signal(s, lambda *_: None) for s in signals}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
