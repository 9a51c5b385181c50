"""Reusing input and output objects across requests over HTTP (reuse_infer_objects_client's
pattern): one InferInput per input, its data replaced each time, shapes changed."""

import argparse
import json

import numpy as np
import tritonclient.http as httpclient

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8000")
args = parser.parse_args()

client = httpclient.InferenceServerClient(args.url)
x = httpclient.InferInput("INPUT0", [1, 4], "FP32")
out = httpclient.InferRequestedOutput("OUTPUT0")
seen = []
for n in (4, 4, 8, 2):
    if x.shape() != [1, n]:
        x.set_shape([1, n])
    data = np.linspace(0, 1, n, dtype=np.float32).reshape(1, n) * n
    x.set_data_from_numpy(data, binary_data=n != 8)
    result = client.infer("identity_fp32", [x], outputs=[out])
    assert np.array_equal(result.as_numpy("OUTPUT0"), data)
    seen.append(result.as_numpy("OUTPUT0").round(4).tolist())
a = httpclient.InferInput("INPUT0", [1, 16], "INT32")
b = httpclient.InferInput("INPUT1", [1, 16], "INT32")
sums = []
for k in range(3):
    a.set_data_from_numpy(np.full((1, 16), k, np.int32))
    b.set_data_from_numpy(np.full((1, 16), 10 * k, np.int32))
    sums.append(int(client.infer("simple", [a, b]).as_numpy("OUTPUT0")[0, 0]))
client.close()
print(
    "RESULT "
    + json.dumps({"identity": seen, "sums": sums, "name": x.name(), "datatype": x.datatype()})
)
