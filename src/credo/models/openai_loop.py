"""The event loop of the OpenAI-compatible backend
(:class:`~credo.models.openai_compat.OpenAIModel`), run in a background thread.

An ``AsyncOpenAI`` client is tied to the loop it first ran on, so one loop, started on
first use, serves every call of a model; the synchronous side hands it coroutines and
reads their outcomes (a queue, a future). Closing cancels what still runs, lets the
owner close its clients on the loop, then stops the loop and its thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

CLOSE_TIMEOUT_S = 10.0
"""How long closing waits for the shutdown on the loop, then for its thread."""


class LoopThread:
    """An asyncio event loop in a daemon thread named ``name``, started by :meth:`ensure`
    once; after :meth:`close` it cannot start again."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    def ensure(self, owner: object) -> asyncio.AbstractEventLoop:
        """The running loop, started on the first call; ``RuntimeError`` naming ``owner``
        once closed."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{owner!r} is closed")
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self.name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def close(self, finish: Callable[[], Awaitable[None]]) -> None:
        """Cancel the tasks still running on the loop (an abandoned call), await
        ``finish()`` there (closing clients), stop the loop and join its thread."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
            self._closed = True
        if loop is None:
            return
        closing = asyncio.run_coroutine_threadsafe(_shut_down(finish), loop)
        closing.result(timeout=CLOSE_TIMEOUT_S)
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=CLOSE_TIMEOUT_S)
        loop.close()


async def _shut_down(finish: Callable[[], Awaitable[None]]) -> None:
    """Cancel every other task on this loop, then await ``finish()``."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await finish()


__all__ = ["CLOSE_TIMEOUT_S", "LoopThread"]
