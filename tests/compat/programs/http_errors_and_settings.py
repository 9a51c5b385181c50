"""Errors and settings over HTTP: InferenceServerException's message/status, a failing
model, a wrong dtype, request parameters, trace and log settings."""

import argparse
import json

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8000")
args = parser.parse_args()

client = httpclient.InferenceServerClient(args.url)
found = {}
x = httpclient.InferInput("INPUT0", [2], "INT32").set_data_from_numpy(np.zeros(2, np.int32))
try:
    client.infer("failing", [x])
except InferenceServerException as e:
    found["failing"] = [e.status(), e.message()]
try:
    httpclient.InferInput("INPUT0", [2], "INT32").set_data_from_numpy(np.zeros(2, np.float64))
except InferenceServerException as e:
    found["dtype"] = e.message()
try:
    client.infer("simple", [x], parameters={"sequence_id": 5})
except InferenceServerException as e:
    found["reserved"] = "reserved" in str(e)
echo = client.infer("params_echo", [x], parameters={"key": "value", "n": 3})
found["params"] = json.loads(echo.as_numpy("PARAMS")[0])
found["trace"] = client.update_trace_settings(model_name="simple", settings={"trace_rate": "7"})[
    "trace_rate"
]
client.update_trace_settings(model_name="simple", settings={"trace_rate": None})
found["log"] = client.update_log_settings({"log_verbose_level": 0})["log_verbose_level"]
client.close()
print("RESULT " + json.dumps(found))
