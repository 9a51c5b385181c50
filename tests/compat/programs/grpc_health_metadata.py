"""Health and metadata over gRPC (simple_grpc_health_metadata's pattern): protobuf
messages, and their JSON with as_json=True."""

import argparse
import json

import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8001")
args = parser.parse_args()

client = grpcclient.InferenceServerClient(url=args.url)
assert client.is_server_live(headers={"test": "1"})
assert client.is_server_ready()
assert client.is_model_ready("simple")
server = client.get_server_metadata()
metadata = client.get_model_metadata("simple", headers={"test": "1"})
config = client.get_model_config("simple", as_json=True)
stats = client.get_inference_statistics("simple", as_json=True)
index = client.get_model_repository_index()
log = client.get_log_settings()
trace = client.get_trace_settings(as_json=True)
try:
    client.get_model_metadata("wrong_model_name")
    error = None
except InferenceServerException as ex:
    error = [ex.status(), "wrong_model_name" in ex.message()]
client.close()
print(
    "RESULT "
    + json.dumps(
        {
            "server": server.name,
            "extensions": "model_repository" in list(server.extensions),
            "metadata": [
                metadata.name,
                list(metadata.versions),
                metadata.platform,
                [[t.name, t.datatype, list(t.shape)] for t in metadata.inputs],
            ],
            "config": [config["config"]["name"], config["config"]["max_batch_size"]],
            "stats": [
                stats["model_stats"][0]["name"],
                "inference_stats" in stats["model_stats"][0],
            ],
            "index": sorted(m.name for m in index.models if m.name.startswith("identity_"))[:3],
            "log": log.settings["log_info"].bool_param,
            "trace": trace["settings"]["trace_level"],
            "error": error,
        }
    )
)
