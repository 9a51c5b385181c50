"""Sequences on a gRPC stream with tritonclient.grpc.aio's stream_infer (an async request
iterator in, (result, error) pairs out; simple_grpc_aio_sequence_stream_infer_client's
pattern)."""

import argparse
import asyncio
import json

import numpy as np
import tritonclient.grpc.aio as grpcclient

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8001")
args = parser.parse_args()
values = [11, 7, 5, 3, 2, 0, 1]


async def requests(sequence_id):
    for i, value in enumerate([0, *values]):
        x = grpcclient.InferInput("INPUT", [1], "INT32")
        x.set_data_from_numpy(np.array([value if i else 100], dtype=np.int32))
        yield {
            "model_name": "sequence_accumulate",
            "inputs": [x],
            "outputs": [grpcclient.InferRequestedOutput("OUTPUT")],
            "request_id": f"{sequence_id}_{i}",
            "sequence_id": sequence_id,
            "sequence_start": i == 0,
            "sequence_end": i == len(values),
        }


async def main():
    async with grpcclient.InferenceServerClient(url=args.url) as client:
        out = {}
        async for result, error in client.stream_infer(inputs_iterator=requests(2000)):
            if error:
                raise SystemExit(str(error))
            response = result.get_response()
            out[response.id] = int(result.as_numpy("OUTPUT")[0])
        return out


print("RESULT " + json.dumps(asyncio.run(main())))
