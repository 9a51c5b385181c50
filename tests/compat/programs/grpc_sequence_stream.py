"""Two interleaved sequences on one gRPC stream, one with an integer id and one with a
string id (simple_grpc_sequence_stream_infer_client's pattern)."""

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
    user_data.put(error if error else result)


def send(client, model, sequence_id, value, request_id, start=False, end=False):
    x = grpcclient.InferInput("INPUT", [1], "INT32")
    x.set_data_from_numpy(np.array([value], dtype=np.int32))
    client.async_stream_infer(
        model,
        [x],
        request_id=request_id,
        sequence_id=sequence_id,
        sequence_start=start,
        sequence_end=end,
    )


values = [11, 7, 5, 3, 2, 0, 1]
user_data = queue.Queue()
with grpcclient.InferenceServerClient(url=args.url) as client:
    client.start_stream(callback=partial(callback, user_data))
    send(client, "sequence_accumulate", 1000, 0, "i_0", start=True)
    send(client, "sequence_accumulate_string", "seq-a", 100, "s_0", start=True)
    for i, v in enumerate(values, 1):
        last = i == len(values)
        send(client, "sequence_accumulate", 1000, v, f"i_{i}", end=last)
        send(client, "sequence_accumulate_string", "seq-a", -v, f"s_{i}", end=last)
    client.stop_stream()
out = {}
while not user_data.empty():
    item = user_data.get()
    if isinstance(item, Exception):
        raise SystemExit(str(item))
    out[item.get_response().id] = int(item.as_numpy("OUTPUT")[0])
print("RESULT " + json.dumps(out))
