"""System shared memory over gRPC (simple_grpc_shm_client's pattern): the status as a
protobuf message, outputs read from the region."""

import argparse
import json
import os

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.utils.shared_memory as shm

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8001")
args = parser.parse_args()

triton_client = grpcclient.InferenceServerClient(url=args.url)
triton_client.unregister_system_shared_memory()
input0_data = np.arange(start=0, stop=16, dtype=np.int32)
input1_data = np.full(shape=16, fill_value=5, dtype=np.int32)
byte_size = input0_data.size * input0_data.itemsize
tag = os.getpid()
io_handle = shm.create_shared_memory_region("io_data", f"/grpc_io_{tag}", byte_size * 4)
shm.set_shared_memory_region(io_handle, [input0_data, input1_data])
triton_client.register_system_shared_memory("io_data", f"/grpc_io_{tag}", byte_size * 4)
status = triton_client.get_system_shared_memory_status()
status_json = triton_client.get_system_shared_memory_status(region_name="io_data", as_json=True)

inputs = [
    grpcclient.InferInput("INPUT0", [1, 16], "INT32"),
    grpcclient.InferInput("INPUT1", [1, 16], "INT32"),
]
inputs[0].set_shared_memory("io_data", byte_size)
inputs[1].set_shared_memory("io_data", byte_size, offset=byte_size)
outputs = [grpcclient.InferRequestedOutput("OUTPUT0"), grpcclient.InferRequestedOutput("OUTPUT1")]
outputs[0].set_shared_memory("io_data", byte_size, offset=2 * byte_size)
outputs[1].set_shared_memory("io_data", byte_size, offset=3 * byte_size)
results = triton_client.infer(model_name="simple", inputs=inputs, outputs=outputs)
output0 = results.get_output("OUTPUT0")
sums = shm.get_contents_as_numpy(io_handle, np.int32, list(output0.shape), offset=2 * byte_size)
diffs = shm.get_contents_as_numpy(io_handle, np.int32, [1, 16], offset=3 * byte_size)
sums, diffs = sums.tolist(), diffs.tolist()  # views of the region: copied out first
triton_client.unregister_system_shared_memory("io_data")
shm.destroy_shared_memory_region(io_handle)
after = triton_client.get_system_shared_memory_status()
triton_client.close()
print(
    "RESULT "
    + json.dumps(
        {
            "sum": sums,
            "difference": diffs,
            "regions": sorted(status.regions),
            "status": status_json["regions"]["io_data"]["byte_size"],
            "after": len(after.regions),
        }
    )
)
