"""kserve_v2.concurrency: the async primitives behave as their sync twins (threading's)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from kserve_v2.concurrency import AsyncBackground, AsyncCondition, Background, Condition


async def test_condition_wait_is_woken_by_notify_all() -> None:
    cond = AsyncCondition()
    items: list[int] = []

    async def consume() -> int:
        with cond:
            while not items:
                assert await cond.wait()
            return items.pop()

    consumer = asyncio.ensure_future(consume())
    await asyncio.sleep(0)  # the consumer runs up to its wait
    with cond:
        items.append(7)
        cond.notify_all()
    assert await consumer == 7


async def test_condition_wait_times_out_and_forgets_the_waiter() -> None:
    cond = AsyncCondition()
    with cond:
        assert await cond.wait(0.01) is False
    assert cond._waiters == []


async def test_condition_wait_for_returns_the_predicates_last_value() -> None:
    cond = AsyncCondition()
    assert await cond.wait_for(lambda: 0, timeout=0.01) == 0
    assert await cond.wait_for(lambda: "yes", timeout=0.01) == "yes"
    state = {"n": 0}

    async def bump() -> None:
        for _ in range(3):
            await asyncio.sleep(0)
            with cond:
                state["n"] += 1
                cond.notify_all()

    bumper = asyncio.ensure_future(bump())
    with cond:
        assert await cond.wait_for(lambda: state["n"] == 3) is True
    await bumper


async def test_a_cancelled_waiter_leaves_nothing_behind() -> None:
    cond = AsyncCondition()

    async def wait() -> None:
        with cond:
            await cond.wait()

    waiter = asyncio.ensure_future(wait())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert cond._waiters == []


def test_sync_condition_is_threadings() -> None:
    assert Condition is threading.Condition
    cond = Condition()
    with cond:
        assert cond.wait(0.01) is False
        assert cond.wait_for(lambda: 5, 0.01) == 5


async def test_background_task_join() -> None:
    gate = asyncio.Event()
    seen: list[bool] = []

    async def target(flag: bool) -> None:
        seen.append(flag)
        await gate.wait()

    task = AsyncBackground("kserve-v2 test task", target, True)
    assert task.done()  # not started
    assert not task.is_current()
    task.start()
    assert not task.done()
    assert await task.join(0.01) is False  # still running; joining did not cancel it
    gate.set()
    assert await task.join() is True
    assert task.done()
    assert seen == [True]


def test_background_thread_join() -> None:
    gate = threading.Event()
    seen: list[bool] = []

    def target(flag: bool) -> None:
        seen.append(thread.is_current())
        gate.wait(60)

    thread = Background("kserve-v2 test thread", target, True)
    thread.start()
    assert not thread.is_current()
    assert thread.join(0.01) is False
    gate.set()
    assert thread.join() is True
    assert thread.done()
    assert seen == [True]
