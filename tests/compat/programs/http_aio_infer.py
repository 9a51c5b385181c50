"""tritonclient.http.aio: concurrent requests from one event loop
(simple_http_aio_infer_client's pattern)."""

import argparse
import asyncio
import json

import numpy as np
import tritonclient.http.aio as httpclient
from tritonclient.utils import InferenceServerException

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8000")
args = parser.parse_args()


async def main():
    async with httpclient.InferenceServerClient(url=args.url) as client:
        live = await client.is_server_live()
        inputs = [
            httpclient.InferInput("INPUT0", [1, 16], "INT32"),
            httpclient.InferInput("INPUT1", [1, 16], "INT32"),
        ]
        inputs[0].set_data_from_numpy(np.arange(16, dtype=np.int32).reshape(1, 16))
        inputs[1].set_data_from_numpy(np.full((1, 16), 2, dtype=np.int32))
        results = await asyncio.gather(*(client.infer("simple", inputs) for _ in range(5)))
        metadata = await client.get_model_metadata("simple")
        try:
            await client.get_model_config("no_such_model")
            error = None
        except InferenceServerException as e:
            error = e.status()
        return {
            "live": live,
            "sums": [r.as_numpy("OUTPUT0").tolist() for r in results],
            "inputs": [i["name"] for i in metadata["inputs"]],
            "error_status": error,
        }


print("RESULT " + json.dumps(asyncio.run(main())))
