"""The test loops' watchdog (tests/loops.py): a hung test ends, on every loop kind."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests import loops
from tests.loops import LOOP_PARAMS


@pytest.mark.parametrize("loop_kind", LOOP_PARAMS)
def test_a_hung_coroutine_is_cancelled_by_the_watchdog(
    loop_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loops, "WATCHDOG", 0.2)
    started = time.monotonic()
    # (The cancel message reaches the CancelledError from Python 3.11 on only.)
    with pytest.raises(asyncio.CancelledError):
        loops.run(asyncio.Event().wait(), loop_kind)  # nothing will ever set it
    assert time.monotonic() - started < 30
