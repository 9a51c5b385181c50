"""async_infer over HTTP: several requests in flight, results collected with get_result()
(simple_http_async_infer_client's pattern)."""

import argparse
import json

import numpy as np
import tritonclient.http as httpclient

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8000")
args = parser.parse_args()

triton_client = httpclient.InferenceServerClient(url=args.url, concurrency=4)

async_requests = []
for k in range(8):
    input0 = np.full((1, 16), k, dtype=np.int32)
    input1 = np.ones((1, 16), dtype=np.int32)
    inputs = [
        httpclient.InferInput("INPUT0", [1, 16], "INT32").set_data_from_numpy(input0),
        httpclient.InferInput("INPUT1", [1, 16], "INT32").set_data_from_numpy(input1),
    ]
    async_requests.append(triton_client.async_infer("simple", inputs, request_id=str(k)))

sums = []
for k, request in enumerate(async_requests):
    result = request.get_result()
    assert result.get_response()["id"] == str(k)
    sums.append(int(result.as_numpy("OUTPUT0")[0, 0]))

triton_client.close()
print("RESULT " + json.dumps({"sums": sums}))
