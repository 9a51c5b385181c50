"""kserve-v2 demo: start a local Triton, run inference over HTTP (and gRPC when installed).

Run it with ``bash scripts/demo.sh`` (sets everything up first), or, inside the set-up
environment, ``python examples/demo.py``.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import numpy as np

import kserve_v2
from kserve_v2.testing import TritonServer

MODELS = Path(__file__).resolve().parent.parent / "tests" / "models"


def show(title: str, **arrays: np.ndarray) -> None:
    print(f"  {title}")
    for name, array in arrays.items():
        print(
            f"    {name} {array.dtype}{list(array.shape)}: {np.array2string(array, threshold=20)}"
        )


def timed(label: str, fn, repeat: int = 200) -> None:  # type: ignore[no-untyped-def]
    fn()  # warm the connection
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    elapsed = (time.perf_counter() - start) / repeat
    print(f"  {label}: {elapsed * 1e6:.0f} us per request ({repeat} sequential requests)")


def demo_sync(url: str) -> None:
    print(f"\n== {url} (sync Client)")
    with kserve_v2.Client(url) as client:
        meta = client.server_metadata()
        print(
            f"  server {meta.name} {meta.version}; live={client.is_server_live()} "
            f"ready={client.is_server_ready()}"
        )
        print(f"  extensions: {', '.join(meta.extensions)}")
        model = client.model_metadata("simple")
        print(f"  model 'simple': inputs {[(t.name, t.datatype, t.shape) for t in model.inputs]}")

        a = np.arange(16, dtype=np.int32).reshape(1, 16)
        b = np.full((1, 16), 3, dtype=np.int32)
        result = client.infer("simple", {"INPUT0": a, "INPUT1": b}, request_id="demo-1")
        show("inputs", INPUT0=a, INPUT1=b)
        show(f"outputs (id={result.id!r})", **result.as_dict())
        timed("simple infer", lambda: client.infer("simple", {"INPUT0": a, "INPUT1": b}))
        timed(
            "simple infer, JSON",
            lambda: client.infer("simple", {"INPUT0": a, "INPUT1": b}, binary=False),
        )

        texts = np.array([b"hello", b"kserve-v2"], dtype=object)
        result = client.infer("bytes_reverse", {"INPUT0": texts})
        print(f"  bytes_reverse {texts.tolist()} -> {result.as_numpy('OUTPUT0').tolist()}")

        big = np.random.default_rng(0).standard_normal((1, 4 * 1024 * 1024), dtype=np.float32)
        start = time.perf_counter()
        out = client.infer("identity_fp32", {"INPUT0": big}).as_numpy("OUTPUT0")
        elapsed = time.perf_counter() - start
        assert np.array_equal(out, big)
        print(
            f"  16 MiB FP32 round trip: {elapsed * 1000:.1f} ms "
            f"({2 * big.nbytes / elapsed / 1e6:.0f} MB/s both ways)"
        )

        try:
            client.infer("failing", {"INPUT0": a.reshape(-1)})
        except kserve_v2.ServerError as exc:
            print(f"  server error surfaced: {exc}")


async def demo_async(url: str) -> None:
    print(f"\n== {url} (AsyncClient, 16 requests in flight)")
    async with kserve_v2.AsyncClient(url) as client:
        a = np.arange(16, dtype=np.int32).reshape(1, 16)
        start = time.perf_counter()
        results = await asyncio.gather(
            *(client.infer("simple", {"INPUT0": a * i, "INPUT1": a}) for i in range(16))
        )
        elapsed = time.perf_counter() - start
        print(
            f"  16 concurrent infers in {elapsed * 1000:.1f} ms; OUTPUT0[0][:4] of the last: "
            f"{results[-1].as_numpy('OUTPUT0')[0][:4].tolist()}"
        )


def main() -> int:
    print(f"kserve-v2 {kserve_v2.version.__version__}: starting a local Triton on {MODELS} ...")
    start = time.perf_counter()
    with TritonServer(MODELS) as server:
        print(
            f"Triton ready in {time.perf_counter() - start:.1f} s "
            f"(HTTP {server.http_url}, gRPC {server.grpc_url})"
        )
        demo_sync(server.http_url)
        asyncio.run(demo_async(server.http_url))
        try:
            import grpc  # noqa: F401
        except ImportError:
            print("\n(gRPC part skipped: pip install 'kserve-v2[grpc]')")
        else:
            grpc_url = server.grpc_url
            if "://" not in grpc_url:
                grpc_url = f"grpc://{grpc_url}"
            try:
                demo_sync(grpc_url)
                asyncio.run(demo_async(grpc_url))
            except NotImplementedError as exc:
                print(f"\n(gRPC part skipped: {exc})")
    print("\nserver stopped; done.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
