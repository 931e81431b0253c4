"""``credo serve`` (issue 32): a :class:`~credo.serve.guard.Guard` behind the OpenAI
protocol (:func:`credo.serve.app.create_app`), served by uvicorn.

Order of events: the Guard reads the certificate and refuses one whose settings differ
from the gateway's (a :class:`~credo.errors.UserError`: exit 2, one line) and checks every
model before anything listens; then the startup line says what the guarantee covers; then
the port is bound (a port in use is a user error too) and uvicorn serves. SIGINT or
SIGTERM stop it gracefully: no new connection is taken, every request in flight gets its
answer, then the Guard answers what is still pending and closes the pool and the decision
log (synced). The API key is compared, never written: not to the log, not to the terminal.
"""

from __future__ import annotations

import signal
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from credo.errors import UserError
from credo.serve.guard import DEFAULT_ABSTENTION, Guard, OnReject

__all__ = ["Gateway", "ServeResult", "bind", "serve"]


@dataclass(frozen=True)
class ServeResult:
    """How a ``credo serve`` ended: the questions answered and the decision log."""

    answered: int
    log: Path | None


def serve(
    certificate: str | Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8008,
    api_key: str | None = None,
    log: str | Path | None = None,
    on_reject: OnReject = "flag",
    abstention: str = DEFAULT_ABSTENTION,
    max_concurrent: int = 64,
    max_queue: int = 256,
    timeout: float | None = None,
    batch_window: float = 0.02,
    grace: float = 300.0,
    config: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    served_model: str | None = None,
    say: Callable[[str], None] = print,
    guard_options: Mapping[str, Any] | None = None,
) -> ServeResult:
    """Serve until SIGINT or SIGTERM (module docstring). ``say`` prints the startup and
    the closing lines; ``guard_options`` go to :class:`~credo.serve.guard.Guard` as they
    are (tests hand in scripted models)."""
    import uvicorn

    from credo.serve.app import create_app
    from credo.serve.guardrail import add_guardrail_routes

    if timeout is not None and timeout <= 0:
        raise UserError(f"--timeout {timeout:g}: give a positive number of seconds")
    guard = Guard(certificate, config=config, overrides=overrides, on_reject=on_reject,
                  abstention=abstention, log=log, max_batch=max_concurrent,
                  max_queue=max_queue, batch_window=batch_window, **dict(guard_options or {}))
    try:
        say(f"credo serve: {guard.guarantee()}")
        sock = bind(host, port)
        where = sock.getsockname()
        app = create_app(guard, api_key=api_key, served_model=served_model, timeout=timeout)
        add_guardrail_routes(app, guard, timeout=timeout)  # LiteLLM's guardrail API
        server = uvicorn.Server(uvicorn.Config(
            app, log_config=None, log_level="warning", access_log=False, lifespan="off",
            timeout_graceful_shutdown=grace))
        say(f"credo serve: listening on http://{where[0]}:{where[1]}/v1 (model "
            f"{served_model or guard.model_identity}; {guard.procedure}; "
            f"{'API key required' if api_key else 'no API key'}; decision log "
            f"{log or 'off'}); stop with Ctrl-C or SIGTERM")
        with _quiet_after_signals():
            server.run(sockets=[sock])
    finally:
        guard.close()
    say(f"credo serve: stopped; {guard.answered} questions answered"
        + (f", decision log {log}" if log else ""))
    return ServeResult(guard.answered, Path(log) if log else None)


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
    stops it as ``credo serve`` stops (requests in flight are answered first); the Guard
    is its owner's to close."""

    def __init__(self, guard: Guard, *, host: str = "127.0.0.1", port: int = 0,
                 api_key: str | None = None, served_model: str | None = None,
                 timeout: float | None = None, grace: float = 60.0) -> None:
        import uvicorn

        from credo.serve.app import create_app
        from credo.serve.guardrail import add_guardrail_routes

        self._sock = bind(host, port)
        where = self._sock.getsockname()
        self.url = f"http://{where[0]}:{where[1]}/v1"
        app = create_app(guard, api_key=api_key, served_model=served_model, timeout=timeout)
        add_guardrail_routes(app, guard, timeout=timeout)  # LiteLLM's guardrail API
        self._server = uvicorn.Server(uvicorn.Config(
            app, log_config=None, log_level="warning", access_log=False, lifespan="off",
            timeout_graceful_shutdown=grace))
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
    """uvicorn stops gracefully on SIGINT / SIGTERM, then raises the signal again under
    the handler it found, which would end the process before the Guard closes its log:
    the handler it finds is a no-op, and the real ones come back afterwards."""
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
