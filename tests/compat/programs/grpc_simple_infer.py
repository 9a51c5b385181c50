"""Simple inference over gRPC (simple_grpc_infer_client's pattern): results as numpy, the
response as a protobuf message and as JSON."""

import argparse
import json

import numpy as np
import tritonclient.grpc as grpcclient

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8001")
parser.add_argument("-v", "--verbose", action="store_true")
args = parser.parse_args()

triton_client = grpcclient.InferenceServerClient(url=args.url, verbose=args.verbose)
inputs = [
    grpcclient.InferInput("INPUT0", [1, 16], "INT32"),
    grpcclient.InferInput("INPUT1", [1, 16], "INT32"),
]
input0_data = np.expand_dims(np.arange(start=0, stop=16, dtype=np.int32), axis=0)
input1_data = np.ones(shape=(1, 16), dtype=np.int32)
inputs[0].set_data_from_numpy(input0_data)
inputs[1].set_data_from_numpy(input1_data)
outputs = [grpcclient.InferRequestedOutput("OUTPUT0"), grpcclient.InferRequestedOutput("OUTPUT1")]
results = triton_client.infer(
    model_name="simple", inputs=inputs, outputs=outputs, headers={"test": "1"}, request_id="r1"
)
statistics = triton_client.get_inference_statistics(model_name="simple")
if len(statistics.model_stats) != 1:
    raise SystemExit("FAILED: Inference Statistics")
output0_data = results.as_numpy("OUTPUT0")
output1_data = results.as_numpy("OUTPUT1")
assert np.array_equal(output0_data, input0_data + input1_data)
response = results.get_response()
as_json = results.get_response(as_json=True)
output = results.get_output("OUTPUT1")
triton_client.close()
print(
    "RESULT "
    + json.dumps(
        {
            "sum": output0_data.tolist(),
            "difference": output1_data.tolist(),
            "id": response.id,
            "model": response.model_name,
            "version": as_json["model_version"],
            "output1": [output.name, output.datatype, list(output.shape)],
            "raw": len(response.raw_output_contents),
        }
    )
)
