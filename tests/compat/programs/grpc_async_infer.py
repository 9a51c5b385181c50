"""async_infer over gRPC with a callback and user data (simple_grpc_async_infer_client's
pattern), several requests in flight, one cancelled before it was sent... or not."""

import argparse
import json
import queue
from functools import partial

import numpy as np
import tritonclient.grpc as grpcclient

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8001")
args = parser.parse_args()


class UserData:
    def __init__(self):
        self._completed_requests = queue.Queue()


def callback(user_data, result, error):
    user_data._completed_requests.put(error if error else result)


triton_client = grpcclient.InferenceServerClient(url=args.url)
user_data = UserData()
inputs = [
    grpcclient.InferInput("INPUT0", [1, 16], "INT32"),
    grpcclient.InferInput("INPUT1", [1, 16], "INT32"),
]
for k in range(6):
    inputs[0].set_data_from_numpy(np.full((1, 16), k, dtype=np.int32))
    inputs[1].set_data_from_numpy(np.ones((1, 16), dtype=np.int32))
    triton_client.async_infer(
        model_name="simple", inputs=inputs, callback=partial(callback, user_data), request_id=str(k)
    )
bad = grpcclient.InferInput("INPUT0", [2], "INT32").set_data_from_numpy(np.zeros(2, np.int32))
triton_client.async_infer("failing", [bad], partial(callback, user_data))

results, errors = {}, []
for _ in range(7):
    item = user_data._completed_requests.get(timeout=30)
    if isinstance(item, Exception):
        errors.append([item.status(), item.message()])
    else:
        results[item.get_response().id] = int(item.as_numpy("OUTPUT0")[0, 0])
triton_client.close()
print("RESULT " + json.dumps({"results": results, "errors": errors}))
