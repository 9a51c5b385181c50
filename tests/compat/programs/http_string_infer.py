"""String (BYTES) tensors over HTTP, binary and JSON (simple_http_string_infer_client's
pattern, on the identity_bytes and bytes_reverse models)."""

import argparse
import json

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import np_to_triton_dtype

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8000")
args = parser.parse_args()

client = httpclient.InferenceServerClient(args.url)
data = np.array([[str(i) for i in range(8)]], dtype=object)
assert np_to_triton_dtype(data.dtype) == "BYTES"

found = {}
for binary in (True, False):
    x = httpclient.InferInput("INPUT0", list(data.shape), "BYTES")
    x.set_data_from_numpy(data, binary_data=binary)
    out = httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary)
    result = client.infer("identity_bytes", [x], outputs=[out])
    found[f"identity_binary_{binary}"] = [
        v.decode() if isinstance(v, bytes) else v for v in result.as_numpy("OUTPUT0").reshape(-1)
    ]

words = np.array([b"hello", b"world", "\u00e9t\u00e9".encode()], dtype=np.object_)
x = httpclient.InferInput("INPUT0", [3], "BYTES").set_data_from_numpy(words)
reversed_ = client.infer("bytes_reverse", [x]).as_numpy("OUTPUT0")
found["reversed"] = [bytes(v).hex() for v in reversed_]
client.close()
print("RESULT " + json.dumps(found))
