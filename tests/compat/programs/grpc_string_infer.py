"""String (BYTES) tensors over gRPC (simple_grpc_string_infer_client's pattern)."""

import argparse
import json

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.utils as utils

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8001")
args = parser.parse_args()

client = grpcclient.InferenceServerClient(args.url)
in0 = np.arange(start=0, stop=16, dtype=np.int32)
in0n = np.array([str(x).encode("utf-8") for x in in0.reshape(in0.size)], dtype=object)
input0_data = in0n.reshape([1, 16])
x = grpcclient.InferInput("INPUT0", [1, 16], utils.np_to_triton_dtype(input0_data.dtype))
x.set_data_from_numpy(input0_data)
result = client.infer("identity_bytes", [x])
out = result.as_numpy("OUTPUT0")
assert out.dtype == np.object_
words = grpcclient.InferInput("INPUT0", [2], "BYTES")
words.set_data_from_numpy(np.array(["abc", b"\x00\x01"], dtype=object))
rev = client.infer("bytes_reverse", [words])
client.close()
print(
    "RESULT "
    + json.dumps(
        {
            "identity": [int(v) for v in out.reshape(-1)],
            "reversed": [bytes(v).hex() for v in rev.as_numpy("OUTPUT0")],
            "datatype": rev.get_output("OUTPUT0").datatype,
            "raw": rev.get_response().raw_output_contents[0].hex(),
        }
    )
)
