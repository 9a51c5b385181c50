"""Concurrency primitives in async/sync pairs, for the code ``scripts/unasync.py`` generates.

The asyncio sources (``client/aio.py``, ``grpc/stream_aio.py``) use the ``Async*`` names; the
script maps each to its sync twin, so the generated module is the same code on threads:

==========================================  ============================================
async (one event loop)                      sync (threads)
==========================================  ============================================
:data:`AsyncLock` (``asyncio.Lock``)        :data:`Lock` (``threading.Lock``)
:class:`AsyncSemaphore`                     :class:`Semaphore`
:class:`AsyncCondition`                     :data:`Condition` (``threading.Condition``)
:class:`AsyncBackground` (a task)           :class:`Background` (a daemon thread)
:func:`async_sleep` (``asyncio.sleep``)     :func:`sleep` (``time.sleep``)
==========================================  ============================================

A pair offers the same operations, so that code written against one runs unchanged against
the other: ``with cond:`` around every look at the shared state, ``cond.wait(timeout)`` and
``cond.wait_for(predicate, timeout)`` (both return whether they were woken in time),
``background.join(timeout)`` (whether it ended).

Example::

    cond = AsyncCondition()           # generated: Condition()
    with cond:                        # free on one loop; a lock on threads
        while not items:
            await cond.wait(5.0)      # generated: cond.wait(5.0)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = [
    "AsyncBackground",
    "AsyncCondition",
    "AsyncLock",
    "AsyncSemaphore",
    "Background",
    "Condition",
    "Lock",
    "Semaphore",
    "async_sleep",
    "sleep",
]

T = TypeVar("T")

AsyncLock = asyncio.Lock
Lock = threading.Lock
Condition = threading.Condition
#: Wait ``seconds`` (a retry's backoff): the loop runs other tasks meanwhile; a thread blocks.
async_sleep = asyncio.sleep
sleep = time.sleep


class AsyncSemaphore(asyncio.Semaphore):
    """``asyncio.Semaphore`` whose wait can be bounded (:meth:`acquire_within`)."""

    async def acquire_within(self, timeout: float | None) -> bool:
        """Take a slot, waiting at most ``timeout`` seconds (``None``: as long as it takes);
        whether one was taken."""
        if timeout is None:
            return await self.acquire()
        try:
            # A slot that came as the wait timed out is kept: wait_for returns it.
            return await asyncio.wait_for(self.acquire(), timeout)
        except asyncio.TimeoutError:
            return False


class Semaphore(threading.Semaphore):
    """``threading.Semaphore`` with :meth:`acquire_within`, the twin of the async one."""

    def acquire_within(self, timeout: float | None) -> bool:
        """Take a slot, waiting at most ``timeout`` seconds (``None``: as long as it takes);
        whether one was taken."""
        return self.acquire(timeout=timeout)


class AsyncCondition:
    """``threading.Condition`` for the tasks of one event loop.

    ``with cond:`` costs nothing: on one loop nothing else runs between two awaits, so the
    state a block looks at cannot change under it, and a waiter registers before it yields
    (no wake-up is lost). Unlike ``asyncio.Condition`` its waits take a timeout.
    """

    __slots__ = ("_waiters",)

    def __init__(self) -> None:
        self._waiters: list[asyncio.Future[None]] = []

    def __enter__(self) -> bool:
        return True

    def __exit__(self, *exc_info: object) -> None:
        return None

    def notify_all(self) -> None:
        """Wake every task waiting now."""
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait for :meth:`notify_all`; False when ``timeout`` seconds passed first."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            if timeout is None:
                await waiter
            else:
                await asyncio.wait_for(waiter, timeout)
        except asyncio.TimeoutError:
            return False
        finally:
            if waiter.cancelled():  # timed out, or the waiting task was cancelled
                with contextlib.suppress(ValueError):  # a notify_all took the list meanwhile
                    self._waiters.remove(waiter)
        return True

    async def wait_for(self, predicate: Callable[[], T], timeout: float | None = None) -> T:
        """Wait until ``predicate()`` is true (checked at each wake-up) or ``timeout``
        passed; its last value."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not (result := predicate()):
            left = None
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
            await self.wait(left)
        return result


class AsyncBackground:
    """Runs ``target(*args)`` as a task of the running loop, from :meth:`start` on."""

    __slots__ = ("_args", "_name", "_target", "_task")

    def __init__(
        self, name: str, target: Callable[..., Coroutine[Any, Any, None]], *args: Any
    ) -> None:
        self._name = name
        self._target = target
        self._args = args
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._target(*self._args), name=self._name)

    def is_current(self) -> bool:
        """Whether this is the task running now."""
        return self._task is not None and asyncio.current_task() is self._task

    def done(self) -> bool:
        return self._task is None or self._task.done()

    async def join(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` seconds) for it to end; whether it did. Cancelling the
        waiter does not cancel the task."""
        if self._task is None:
            return True
        done, _ = await asyncio.wait((self._task,), timeout=timeout)
        return bool(done)


class Background:
    """Runs ``target(*args)`` on a daemon thread named ``name``, from :meth:`start` on."""

    __slots__ = ("_thread",)

    def __init__(self, name: str, target: Callable[..., None], *args: Any) -> None:
        self._thread = threading.Thread(target=target, args=args, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def is_current(self) -> bool:
        """Whether this is the thread running now."""
        return threading.current_thread() is self._thread

    def done(self) -> bool:
        return not self._thread.is_alive()

    def join(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` seconds) for it to end; whether it did."""
        self._thread.join(timeout)
        return not self._thread.is_alive()
