"""Model control over HTTP against a server in explicit mode: repository index, unload,
load, load with a configuration (simple_http_model_control's pattern)."""

import argparse
import json

import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8000")
args = parser.parse_args()

client = httpclient.InferenceServerClient(url=args.url)
model = "simple"
steps = []
client.load_model(model)
steps.append(client.is_model_ready(model))
client.unload_model(model)
steps.append(client.is_model_ready(model))
try:
    client.infer(model, [httpclient.InferInput("INPUT0", [1, 16], "INT32")])
except InferenceServerException:
    steps.append("error")
config = json.dumps(
    {
        "backend": "python",
        "max_batch_size": 4,
        "input": [
            {"name": "INPUT0", "data_type": "TYPE_INT32", "dims": [16]},
            {"name": "INPUT1", "data_type": "TYPE_INT32", "dims": [16]},
        ],
        "output": [
            {"name": "OUTPUT0", "data_type": "TYPE_INT32", "dims": [16]},
            {"name": "OUTPUT1", "data_type": "TYPE_INT32", "dims": [16]},
        ],
    }
)
client.load_model(model, config=config)
steps.append(client.get_model_config(model)["max_batch_size"])
client.load_model(model)  # a reload keeps the configuration it was given
steps.append(client.get_model_config(model)["max_batch_size"])
index = {m["name"]: m.get("state") for m in client.get_model_repository_index()}
client.close()
print("RESULT " + json.dumps({"steps": steps, "simple": index.get("simple")}))
