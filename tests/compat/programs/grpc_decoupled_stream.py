"""A decoupled model on a gRPC stream with start_stream / async_stream_infer / stop_stream
(the decoupled examples' pattern): several responses per request, the empty final
response when asked for, an error for a failing request without ending the stream.

The failing request goes once the decoupled ones are answered: Triton 2.51 writes two
models' responses on one stream unguarded, and two writes at once can crash it or lose a
response (see kserve_v2.testing.TritonServer.known_crash)."""

import argparse
import json
import queue
from functools import partial

import numpy as np
import tritonclient.grpc as grpcclient

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8001")
args = parser.parse_args()


def callback(user_data, result, error):
    user_data.put((result, error))


responses = queue.Queue()
client = grpcclient.InferenceServerClient(url=args.url)
client.start_stream(callback=partial(callback, responses))
data = grpcclient.InferInput("IN", [4], "INT32").set_data_from_numpy(np.arange(4, dtype=np.int32))
repeat = grpcclient.InferInput("REPEAT", [1], "INT32")
for n, request_id in ((3, "a"), (2, "b")):
    repeat.set_data_from_numpy(np.array([n], dtype=np.int32))
    client.async_stream_infer(
        "repeat_decoupled",
        [data, repeat],
        request_id=request_id,
        enable_empty_final_response=request_id == "b",
    )


def is_final(result, error):
    if error is not None:
        return False
    response = result.get_response()
    return response.parameters["triton_final_response"].bool_param


# One model instance answers "a", then "b": b's empty final response is the last of both.
received = []
while not received or not is_final(*received[-1]):
    received.append(responses.get(timeout=30))
bad = grpcclient.InferInput("INPUT0", [2], "INT32").set_data_from_numpy(np.zeros(2, np.int32))
client.async_stream_infer("failing", [bad], request_id="c")
client.stop_stream()
while not responses.empty():
    received.append(responses.get())

seen, errors = [], []
for result, error in received:
    if error is not None:
        errors.append(error.message())
        continue
    response = result.get_response()
    final = response.parameters["triton_final_response"].bool_param
    idx = result.as_numpy("IDX")
    seen.append([response.id, None if idx is None else int(idx[0]), final])
try:
    client.async_stream_infer("repeat_decoupled", [data, repeat])
except Exception as e:
    errors.append(type(e).__name__)
client.close()
print("RESULT " + json.dumps({"responses": sorted(seen, key=str), "errors": errors}))
