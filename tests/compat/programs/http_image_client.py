"""Classification over HTTP in the style of image_client: "preprocess" a batch of score
vectors, ask for the top classes, parse "score:index:label" strings."""

import argparse
import json

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import triton_to_np_dtype

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8000")
parser.add_argument("-c", "--classes", type=int, default=3)
args = parser.parse_args()

client = httpclient.InferenceServerClient(args.url)
metadata = client.get_model_metadata("classify")
config = client.get_model_config("classify")
input_name = metadata["inputs"][0]["name"]
output_name = metadata["outputs"][0]["name"]
dtype = triton_to_np_dtype(metadata["inputs"][0]["datatype"])


def preprocess(seed):
    rng = np.random.default_rng(seed)
    scores = rng.random(5).astype(dtype)
    return scores / scores.sum()


def postprocess(results):
    out = []
    for raw in results.as_numpy(output_name):
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        score, index, *label = text.split(":")
        out.append([round(float(score), 4), int(index), label[0] if label else None])
    return out


answers = []
for seed in range(3):
    x = httpclient.InferInput(input_name, [5], metadata["inputs"][0]["datatype"])
    x.set_data_from_numpy(preprocess(seed))
    wanted = httpclient.InferRequestedOutput(output_name, class_count=args.classes)
    answers.append(postprocess(client.infer("classify", [x], outputs=[wanted])))
client.close()
print(
    "RESULT "
    + json.dumps({"labels_file": config["output"][0]["label_filename"], "answers": answers})
)
