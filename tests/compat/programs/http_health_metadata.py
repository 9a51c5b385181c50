"""Health, metadata, configuration and statistics over HTTP (simple_http_health_metadata's
pattern): dicts, as Triton's JSON."""

import argparse
import json

import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8000")
args = parser.parse_args()

client = httpclient.InferenceServerClient(url=args.url)
assert client.is_server_live(headers={"test": "1"})
assert client.is_server_ready()
assert client.is_model_ready("simple")
server = client.get_server_metadata()
metadata = client.get_model_metadata("simple", model_version="1")
config = client.get_model_config("simple")
stats = client.get_inference_statistics("simple")
log = client.get_log_settings()
trace = client.get_trace_settings()
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
            "server": server["name"],
            "extensions": "system_shared_memory" in server["extensions"],
            "metadata": metadata,
            "max_batch_size": config["max_batch_size"],
            "inputs": [i["name"] for i in config["input"]],
            "stats_models": [m["name"] for m in stats["model_stats"]],
            "log_keys": sorted(log),
            "trace_level": trace["trace_level"],
            "error": error,
        }
    )
)
