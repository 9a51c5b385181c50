"""tritonclient.grpc.aio: concurrent requests and metadata calls from one event loop
(simple_grpc_aio_infer_client's pattern)."""

import argparse
import asyncio
import json

import numpy as np
import tritonclient.grpc.aio as grpcclient
from tritonclient.utils import InferenceServerException

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8001")
args = parser.parse_args()


async def main():
    client = grpcclient.InferenceServerClient(url=args.url)
    ready = await client.is_server_ready()
    metadata = await client.get_model_metadata("simple", as_json=True)
    config = await client.get_model_config("simple")
    inputs = [
        grpcclient.InferInput("INPUT0", [1, 16], "INT32"),
        grpcclient.InferInput("INPUT1", [1, 16], "INT32"),
    ]
    inputs[0].set_data_from_numpy(np.arange(16, dtype=np.int32).reshape(1, 16))
    inputs[1].set_data_from_numpy(np.full((1, 16), 3, dtype=np.int32))
    results = await asyncio.gather(
        *(client.infer("simple", inputs, request_id=str(i)) for i in range(6))
    )
    try:
        await client.infer("no_such_model", inputs)
        error = None
    except InferenceServerException as e:
        error = e.status()
    await client.close()
    return {
        "ready": ready,
        "metadata": metadata,
        "max_batch_size": config.config.max_batch_size,
        "ids": sorted(r.get_response().id for r in results),
        "sums": [r.as_numpy("OUTPUT0")[0, :4].tolist() for r in results],
        "error": error,
    }


print("RESULT " + json.dumps(asyncio.run(main())))
