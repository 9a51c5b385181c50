"""A load-generating worker process of ``kserve-v2 perf --workers N``.

Started as ``python -m kserve_v2.cli.perf.worker`` by :class:`ProcessPool`; it reads commands
from stdin and answers on stdout, each a pickled tuple behind a 4-byte big-endian length (the
parent is the only peer: this is a private pipe between two processes of one user). Commands:
``("setup", LoadConfig)``, ``("start", Step)``, ``("peek",)``, ``("snapshot",)``, ``("stop",)``,
``("close",)``; answers are ``("ok", value)`` or ``("error", message)``.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import struct
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

from kserve_v2.cli.perf.load import LoadConfig, LoadGenerator, Step, WindowStats

__all__ = ["ProcessPool", "main", "read_frame", "write_frame"]

_LENGTH = struct.Struct(">I")


def write_frame(stream: IO[bytes], message: tuple[Any, ...]) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(data)) + data)
    stream.flush()


def read_frame(stream: IO[bytes]) -> tuple[Any, ...] | None:
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (length,) = _LENGTH.unpack(head)
    data = stream.read(length)
    if len(data) < length:
        return None
    message = pickle.loads(data)  # our own parent, over a private pipe
    assert isinstance(message, tuple)
    return message


async def _serve(commands: IO[bytes], answers: IO[bytes]) -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[Any, ...] | None] = asyncio.Queue()

    def reader() -> None:
        while True:
            message = read_frame(commands)
            loop.call_soon_threadsafe(queue.put_nowait, message)
            if message is None or message[0] == "close":
                return

    threading.Thread(target=reader, daemon=True).start()
    generator: LoadGenerator | None = None
    while True:
        message = await queue.get()
        if message is None:
            break
        command = message[0]
        try:
            value: Any = None
            if command == "setup":
                generator = LoadGenerator(message[1])
                await generator.setup()
            elif generator is None:
                raise RuntimeError(f"{command} before setup")
            elif command == "start":
                generator.start(message[1])
            elif command == "peek":
                value = generator.completed_in_window()
            elif command == "snapshot":
                value = generator.snapshot()
            elif command == "stop":
                value = await generator.stop()
            elif command == "close":
                await generator.close()
                write_frame(answers, ("ok", None))
                return
            write_frame(answers, ("ok", value))
        except Exception as exc:
            write_frame(answers, ("error", f"{type(exc).__name__}: {exc}"))
    if generator is not None:
        await generator.close()


def main() -> None:
    """The worker's entry point: stdout is the answer channel, so prints go to stderr."""
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr
    asyncio.run(_serve(sys.stdin.buffer, answers))


class ProcessPool:
    """N worker processes, driven like one :class:`LoadGenerator`."""

    def __init__(self, config: LoadConfig, workers: int) -> None:
        import subprocess
        from dataclasses import replace
        from pathlib import Path

        import kserve_v2

        # The workers import the kserve_v2 this process runs, wherever it comes from.
        root = str(Path(kserve_v2.__file__).resolve().parents[1])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)

        self._configs = [replace(config, worker_index=i, workers=workers) for i in range(workers)]
        self._procs = [
            subprocess.Popen(
                [sys.executable, "-m", "kserve_v2.cli.perf.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
            for _ in range(workers)
        ]
        self._locks = [threading.Lock() for _ in range(workers)]

    def _call(self, index: int, message: tuple[Any, ...]) -> Any:
        proc = self._procs[index]
        assert proc.stdin is not None
        assert proc.stdout is not None
        with self._locks[index]:
            write_frame(proc.stdin, message)
            answer = read_frame(proc.stdout)
        if answer is None:
            raise RuntimeError(f"perf worker {index} exited (status {proc.poll()})")
        if answer[0] == "error":
            raise RuntimeError(f"perf worker {index}: {answer[1]}")
        return answer[1]

    async def _all(self, make: Callable[[int], tuple[Any, ...]]) -> list[Any]:
        loop = asyncio.get_running_loop()
        return list(
            await asyncio.gather(
                *(
                    loop.run_in_executor(None, self._call, i, make(i))
                    for i in range(len(self._procs))
                )
            )
        )

    async def setup(self) -> None:
        await self._all(lambda i: ("setup", self._configs[i]))

    async def start(self, step: Step) -> None:
        await self._all(lambda i: ("start", step))

    async def peek(self) -> int:
        return sum(await self._all(lambda i: ("peek",)))

    async def snapshot(self) -> list[WindowStats]:
        return await self._all(lambda i: ("snapshot",))

    async def stop(self) -> list[WindowStats]:
        return await self._all(lambda i: ("stop",))

    async def close(self) -> None:
        try:
            await self._all(lambda i: ("close",))
        except RuntimeError:
            pass
        finally:
            for proc in self._procs:
                if proc.stdin is not None:
                    proc.stdin.close()
                try:
                    proc.wait(timeout=10)
                except Exception:
                    proc.kill()
                    proc.wait()
                if proc.stdout is not None:
                    proc.stdout.close()


class LocalPool:
    """The load in this process (``--workers 1``), with the pool's interface."""

    def __init__(self, config: LoadConfig) -> None:
        self.generator = LoadGenerator(config)

    async def setup(self) -> None:
        await self.generator.setup()

    async def start(self, step: Step) -> None:
        self.generator.start(step)

    async def peek(self) -> int:
        return self.generator.completed_in_window()

    async def snapshot(self) -> list[WindowStats]:
        return [self.generator.snapshot()]

    async def stop(self) -> list[WindowStats]:
        return [await self.generator.stop()]

    async def close(self) -> None:
        await self.generator.close()


if __name__ == "__main__":
    main()
