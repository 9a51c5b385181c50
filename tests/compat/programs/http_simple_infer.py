"""Simple inference over HTTP: two INT32 inputs, their sum and difference (the ``simple``
model), as NVIDIA's simple_http_infer_client does."""

import argparse
import json

import numpy as np
import tritonclient.http as httpclient

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8000")
parser.add_argument("-v", "--verbose", action="store_true")
args = parser.parse_args()

try:
    triton_client = httpclient.InferenceServerClient(url=args.url, verbose=args.verbose)
except Exception as e:
    print("channel creation failed: " + str(e))
    raise SystemExit(1) from e

inputs = [
    httpclient.InferInput("INPUT0", [1, 16], "INT32"),
    httpclient.InferInput("INPUT1", [1, 16], "INT32"),
]
input0_data = np.expand_dims(np.arange(16, dtype=np.int32), axis=0)
input1_data = np.full(shape=(1, 16), fill_value=-1, dtype=np.int32)
inputs[0].set_data_from_numpy(input0_data, binary_data=False)
inputs[1].set_data_from_numpy(input1_data, binary_data=True)
outputs = [
    httpclient.InferRequestedOutput("OUTPUT0", binary_data=True),
    httpclient.InferRequestedOutput("OUTPUT1", binary_data=False),
]
results = triton_client.infer("simple", inputs, outputs=outputs, request_id="1")

output0_data = results.as_numpy("OUTPUT0")
output1_data = results.as_numpy("OUTPUT1")
for i in range(16):
    print(f"{input0_data[0][i]} + {input1_data[0][i]} = {output0_data[0][i]}")
    if (input0_data[0][i] + input1_data[0][i]) != output0_data[0][i]:
        raise SystemExit("sync infer error: incorrect sum")
    if (input0_data[0][i] - input1_data[0][i]) != output1_data[0][i]:
        raise SystemExit("sync infer error: incorrect difference")

response = results.get_response()
triton_client.close()
print(
    "RESULT "
    + json.dumps(
        {
            "sum": output0_data.tolist(),
            "difference": output1_data.tolist(),
            "id": response["id"],
            "model": response["model_name"],
            "outputs": sorted(o["name"] for o in response["outputs"]),
            "output1_as_json": "data" in results.get_output("OUTPUT1"),
        }
    )
)
