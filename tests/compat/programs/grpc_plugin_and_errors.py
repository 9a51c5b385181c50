"""A client plugin adding headers, errors over gRPC and utils helpers (dtype conversions,
BYTES serialisation) used the way tritonclient programs use them."""

import argparse
import json

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.grpc import InferenceServerClientPlugin
from tritonclient.utils import (
    InferenceServerException,
    deserialize_bytes_tensor,
    np_to_triton_dtype,
    serialize_byte_tensor,
    triton_to_np_dtype,
)

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8001")
args = parser.parse_args()


class AddHeader(InferenceServerClientPlugin):
    def __init__(self):
        self.calls = 0

    def __call__(self, request):
        self.calls += 1
        request.headers["x-request-source"] = "compat-test"


client = grpcclient.InferenceServerClient(args.url)
plugin = AddHeader()
client.register_plugin(plugin)
assert client.plugin() is plugin
live = client.is_server_live()
x = grpcclient.InferInput("INPUT0", [2], "INT32").set_data_from_numpy(np.ones(2, np.int32))
try:
    client.infer("failing", [x])
except InferenceServerException as e:
    failing = [e.status(), e.message(), str(e)]
client.unregister_plugin()
calls = plugin.calls
client.is_server_live()
client.close()
serialized = serialize_byte_tensor(np.array([b"a", b"bc"], dtype=object))
print(
    "RESULT "
    + json.dumps(
        {
            "live": live,
            "calls": [calls, plugin.calls],
            "failing": failing,
            "dtypes": [
                np_to_triton_dtype(np.float16),
                np_to_triton_dtype(np.dtype(object)),
                triton_to_np_dtype("INT8").__name__,
                triton_to_np_dtype("BYTES").__name__,
            ],
            "serialized": serialized.item().hex(),
            "back": [v.decode() for v in deserialize_bytes_tensor(serialized.item())],
        }
    )
)
