"""gRPC with keepalive options and channel arguments (simple_grpc_keepalive_client's
pattern): pings every 10 s (not reached here) and message size limits."""

import argparse
import json

import numpy as np
import tritonclient.grpc as grpcclient

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8001")
args = parser.parse_args()

keepalive_options = grpcclient.KeepAliveOptions(
    keepalive_time_ms=10000,
    keepalive_timeout_ms=20000,
    keepalive_permit_without_calls=False,
    http2_max_pings_without_data=2,
)
channel_args = [
    ("grpc.max_send_message_length", 16 << 20),
    ("grpc.max_receive_message_length", 16 << 20),
]
answers = []
for options in (
    {"keepalive_options": keepalive_options},
    {"keepalive_options": grpcclient.KeepAliveOptions()},
    {"channel_args": channel_args},
):
    with grpcclient.InferenceServerClient(url=args.url, **options) as client:
        x = grpcclient.InferInput("INPUT0", [1, 1024], "FP32")
        x.set_data_from_numpy(np.arange(1024, dtype=np.float32).reshape(1, 1024))
        result = client.infer("identity_fp32", [x])
        answers.append([client.is_server_live(), float(result.as_numpy("OUTPUT0").sum())])
print("RESULT " + json.dumps({"answers": answers}))
