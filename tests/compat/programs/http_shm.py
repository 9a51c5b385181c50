"""System shared memory over HTTP: inputs and outputs in regions registered with the
server (simple_http_shm_client's pattern)."""

import argparse
import json
import os

import numpy as np
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8000")
args = parser.parse_args()

triton_client = httpclient.InferenceServerClient(url=args.url)
triton_client.unregister_system_shared_memory()

input0_data = np.arange(start=0, stop=16, dtype=np.int32)
input1_data = np.ones(shape=16, dtype=np.int32)
input_byte_size = input0_data.size * input0_data.itemsize
output_byte_size = input_byte_size

tag = os.getpid()
shm_op_handle = shm.create_shared_memory_region(
    "output_data", f"/output_simple_{tag}", output_byte_size * 2
)
triton_client.register_system_shared_memory(
    "output_data", f"/output_simple_{tag}", output_byte_size * 2
)
shm_ip_handle = shm.create_shared_memory_region(
    "input_data", f"/input_simple_{tag}", input_byte_size * 2
)
shm.set_shared_memory_region(shm_ip_handle, [input0_data])
shm.set_shared_memory_region(shm_ip_handle, [input1_data], offset=input_byte_size)
triton_client.register_system_shared_memory(
    "input_data", f"/input_simple_{tag}", input_byte_size * 2
)

inputs = [
    httpclient.InferInput("INPUT0", [1, 16], "INT32"),
    httpclient.InferInput("INPUT1", [1, 16], "INT32"),
]
inputs[0].set_shared_memory("input_data", input_byte_size)
inputs[1].set_shared_memory("input_data", input_byte_size, offset=input_byte_size)
outputs = [
    httpclient.InferRequestedOutput("OUTPUT0", binary_data=True),
    httpclient.InferRequestedOutput("OUTPUT1", binary_data=True),
]
outputs[0].set_shared_memory("output_data", output_byte_size)
outputs[1].set_shared_memory("output_data", output_byte_size, offset=output_byte_size)

results = triton_client.infer(model_name="simple", inputs=inputs, outputs=outputs)
output0 = results.get_output("OUTPUT0")
output0_data = shm.get_contents_as_numpy(shm_op_handle, np.int32, output0["shape"])
output1_data = shm.get_contents_as_numpy(shm_op_handle, np.int32, [1, 16], offset=output_byte_size)
# Views of the region: copied out before it is destroyed.
sums, differences = output0_data.tolist(), output1_data.tolist()
status = triton_client.get_system_shared_memory_status()
regions = sorted(r["name"] for r in status)
mapped = len([k for k in shm.mapped_shared_memory_regions() if str(tag) in k])

triton_client.unregister_system_shared_memory()
shm.destroy_shared_memory_region(shm_ip_handle)
shm.destroy_shared_memory_region(shm_op_handle)
print(
    "RESULT "
    + json.dumps(
        {
            "sum": sums,
            "difference": differences,
            "regions": regions,
            "mapped": mapped,
            "after": triton_client.get_system_shared_memory_status(),
        }
    )
)
