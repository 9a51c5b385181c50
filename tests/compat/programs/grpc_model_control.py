"""Model control over gRPC against a server in explicit mode (simple_grpc_model_control's
pattern): the repository index as a message, unload, load, load with a configuration."""

import argparse
import json

import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8001")
args = parser.parse_args()

client = grpcclient.InferenceServerClient(url=args.url)
model = "simple"
steps = []
client.load_model(model)
steps.append(client.is_model_ready(model))
client.unload_model(model)
steps.append(client.is_model_ready(model))
try:
    client.get_model_config(model)
    steps.append("config of an unloaded model")
except InferenceServerException as e:
    steps.append(e.status())
config = json.dumps(
    {
        "backend": "python",
        "max_batch_size": 2,
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
steps.append(client.get_model_config(model).config.max_batch_size)
client.load_model(model)
steps.append(client.get_model_config(model, as_json=True)["config"]["max_batch_size"])
index = client.get_model_repository_index(as_json=True)
client.close()
print(
    "RESULT "
    + json.dumps(
        {
            "steps": steps,
            "simple": [m.get("state") for m in index["models"] if m["name"] == "simple"],
        }
    )
)
