"""Classification over gRPC in the style of image_client: batched "images" as score
vectors, top classes parsed, async requests with a callback."""

import argparse
import json
import queue
from functools import partial

import numpy as np
import tritonclient.grpc as grpcclient

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8001")
parser.add_argument("-c", "--classes", type=int, default=2)
args = parser.parse_args()

client = grpcclient.InferenceServerClient(args.url)
metadata = client.get_model_metadata("classify")
config = client.get_model_config("classify").config
input_metadata, output_metadata = metadata.inputs[0], metadata.outputs[0]
assert config.output[0].label_filename == "labels.txt"


def completion(queue_, result, error):
    queue_.put((result, error))


done = queue.Queue()
for seed in range(4):
    scores = np.random.default_rng(seed).random(5).astype(np.float32)
    x = grpcclient.InferInput(input_metadata.name, [5], input_metadata.datatype)
    x.set_data_from_numpy(scores)
    wanted = grpcclient.InferRequestedOutput(output_metadata.name, class_count=args.classes)
    client.async_infer(
        "classify", [x], partial(completion, done), outputs=[wanted], request_id=str(seed)
    )
answers = {}
for _ in range(4):
    result, error = done.get(timeout=30)
    assert error is None, error
    parsed = []
    for raw in result.as_numpy(output_metadata.name):
        score, index, label = raw.decode().split(":")
        parsed.append([round(float(score), 4), int(index), label])
    answers[result.get_response().id] = parsed
client.close()
print("RESULT " + json.dumps(answers))
