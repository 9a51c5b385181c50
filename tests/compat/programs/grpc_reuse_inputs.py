"""Reusing inputs across gRPC requests, data replaced in place of new objects, and the same
inputs switched between data and shared memory (reuse_infer_objects_client's pattern)."""

import argparse
import json
import os

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.utils.shared_memory as shm

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8001")
args = parser.parse_args()

client = grpcclient.InferenceServerClient(args.url)
a = grpcclient.InferInput("INPUT0", [1, 16], "INT32")
b = grpcclient.InferInput("INPUT1", [1, 16], "INT32")
outputs = [grpcclient.InferRequestedOutput("OUTPUT0"), grpcclient.InferRequestedOutput("OUTPUT1")]
sums = []
for k in range(4):
    a.set_data_from_numpy(np.full((1, 16), k, np.int32))
    b.set_data_from_numpy(np.full((1, 16), 2 * k, np.int32))
    sums.append(int(client.infer("simple", [a, b], outputs=outputs).as_numpy("OUTPUT0")[0, 0]))

key = f"/reuse_{os.getpid()}"
handle = shm.create_shared_memory_region("reuse", key, 128)
shm.set_shared_memory_region(handle, [np.full(16, 7, np.int32), np.full(16, 1, np.int32)])
client.register_system_shared_memory("reuse", key, 128)
a.set_shared_memory("reuse", 64)
b.set_shared_memory("reuse", 64, offset=64)
from_shm = client.infer("simple", [a, b]).as_numpy("OUTPUT1")[0, 0]
a.set_data_from_numpy(np.full((1, 16), 9, np.int32))  # back to data
mixed = client.infer("simple", [a, b]).as_numpy("OUTPUT0")[0, 0]
client.unregister_system_shared_memory("reuse")
shm.destroy_shared_memory_region(handle)
client.close()
print("RESULT " + json.dumps({"sums": sums, "from_shm": int(from_shm), "mixed": int(mixed)}))
