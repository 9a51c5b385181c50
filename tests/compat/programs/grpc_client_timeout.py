"""Deadlines over gRPC (client_timeout) and the server-side timeout (timeout, in
microseconds): a slow model past its deadline is DEADLINE_EXCEEDED."""

import argparse
import json

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8001")
args = parser.parse_args()

client = grpcclient.InferenceServerClient(url=args.url)
x = grpcclient.InferInput("DELAY_MS", [1], "FP32")
found = {}
x.set_data_from_numpy(np.array([300], dtype=np.float32))
try:
    client.infer("slow", [x], client_timeout=0.05)
except InferenceServerException as e:
    found["deadline"] = [e.status(), e.message()]
x.set_data_from_numpy(np.array([1], dtype=np.float32))
result = client.infer("slow", [x], client_timeout=30, timeout=30_000_000)
found["fast"] = result.as_numpy("OUTPUT0").tolist()
client.close()
print("RESULT " + json.dumps(found))
