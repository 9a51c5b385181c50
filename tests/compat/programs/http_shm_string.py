"""String tensors through system shared memory over HTTP, serialised with
serialize_byte_tensor (simple_http_shm_string_client's pattern, on identity_bytes)."""

import argparse
import json
import os

import numpy as np
import tritonclient.http as httpclient
import tritonclient.utils as utils
import tritonclient.utils.shared_memory as shm

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8000")
args = parser.parse_args()

client = httpclient.InferenceServerClient(url=args.url)
data = np.array([[str(i * 11) for i in range(6)]], dtype=np.object_)
serialized = utils.serialize_byte_tensor(data)
size = utils.serialized_byte_size(serialized)

key = f"/string_shm_{os.getpid()}"
handle = shm.create_shared_memory_region("strings", key, size * 2)
shm.set_shared_memory_region(handle, [serialized])
client.register_system_shared_memory("strings", key, size * 2)

x = httpclient.InferInput("INPUT0", [1, 6], "BYTES")
x.set_shared_memory("strings", size)
y = httpclient.InferRequestedOutput("OUTPUT0")
y.set_shared_memory("strings", size, offset=size)
result = client.infer("identity_bytes", [x], outputs=[y])
out = shm.get_contents_as_numpy(handle, np.object_, [1, 6], offset=size)

client.unregister_system_shared_memory("strings")
shm.destroy_shared_memory_region(handle)
client.close()
print(
    "RESULT "
    + json.dumps(
        {
            "size": size,
            "strings": [v.decode() for v in out.reshape(-1)],
            "roundtrip": [v.decode() for v in utils.deserialize_bytes_tensor(serialized.item())],
            "shape": result.get_output("OUTPUT0")["shape"],
        }
    )
)
