"""The event loops the asyncio tests run on: asyncio's own, and uvloop where it is installed
(``pip install 'kserve-v2[uvloop]'``; not on Windows).

Tests that make their loops themselves take a loop kind (``"asyncio"`` or ``"uvloop"``) and
call :func:`new_event_loop` or :func:`run`; ``async def`` tests in ``tests/transport``,
``tests/grpc`` and ``tests/client`` run on every kind through pytest-asyncio's
``pytest_asyncio_loop_factories`` hook (pytest-asyncio 1.x; older versions run them on
asyncio's loop only). Where uvloop is missing its cases are skipped, not dropped.

Example::

    @pytest.mark.parametrize("loop_kind", LOOP_PARAMS)
    def test_something(loop_kind: str) -> None:
        run(main(), loop_kind)
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

__all__ = [
    "HAS_UVLOOP",
    "LOOPS",
    "LOOP_PARAMS",
    "MODES",
    "NO_UVLOOP",
    "loop_factories",
    "loop_of",
    "new_event_loop",
    "run",
]

T = TypeVar("T")

HAS_UVLOOP = importlib.util.find_spec("uvloop") is not None
#: The loop kinds, asyncio's first.
LOOPS = ("asyncio", "uvloop")
#: The mark of a uvloop case: skipped where uvloop is not installed.
NO_UVLOOP = pytest.mark.skipif(not HAS_UVLOOP, reason="uvloop is not installed")
#: :data:`LOOPS` as pytest parameters.
LOOP_PARAMS = ["asyncio", pytest.param("uvloop", marks=NO_UVLOOP)]
#: The modes of the tests that run one body on the sync client and on the asyncio one:
#: ``"sync"``, ``"async"`` (asyncio's loop) and ``"async-uvloop"``; see :func:`loop_of`.
MODES = ["sync", "async", pytest.param("async-uvloop", marks=NO_UVLOOP)]


def loop_of(mode: str) -> str:
    """The loop kind of a mode or client kind whose name ends in ``-uvloop`` (else asyncio)."""
    return "uvloop" if mode.endswith("-uvloop") else "asyncio"


#: Seconds after which a test's loop cancels every task it runs. pytest-timeout (300 s) cannot
#: end a hung async test on its own: on uvloop its SIGALRM never reaches Python while the loop
#: waits (libuv retries epoll_wait after the signal without returning), and on asyncio's loop
#: the exception it raises is swallowed when it lands in a callback. Seen in CI: a stream test
#: on uvloop waited for ever. The loops made here are one test's (function scope).
WATCHDOG = 240.0


def _arm_watchdog(loop: asyncio.AbstractEventLoop) -> None:
    def expire() -> None:
        for task in asyncio.all_tasks(loop):
            task.cancel(f"tests/loops.py watchdog: the test ran on this loop for {WATCHDOG} s")

    loop.call_later(WATCHDOG, expire)


def new_event_loop(kind: str = "asyncio") -> asyncio.AbstractEventLoop:
    """A new event loop of ``kind`` (not set as the thread's current loop), whose tasks are
    cancelled after :data:`WATCHDOG` seconds."""
    loop: asyncio.AbstractEventLoop
    if kind == "asyncio":
        loop = asyncio.new_event_loop()
    elif kind == "uvloop":
        import uvloop

        loop = uvloop.new_event_loop()
    else:
        raise ValueError(f"unknown event loop kind {kind!r}")
    _arm_watchdog(loop)
    return loop


def run(main: Coroutine[Any, Any, T], kind: str = "asyncio") -> T:
    """``asyncio.run(main)`` on a new loop of ``kind`` (``asyncio.Runner``'s
    ``loop_factory`` is Python 3.11+), closed at the end."""
    loop = new_event_loop(kind)
    try:
        return loop.run_until_complete(main)
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


def loop_factories() -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    """What the conftests' ``pytest_asyncio_loop_factories`` hooks return: every installed
    loop kind by name."""
    kinds = [kind for kind in LOOPS if kind != "uvloop" or HAS_UVLOOP]
    return {kind: functools.partial(new_event_loop, kind) for kind in kinds}
