"""Sequences over HTTP with infer(): two interleaved sequences, integer ids
(simple_http_sequence_sync_infer_client's pattern, on sequence_accumulate)."""

import argparse
import json

import numpy as np
import tritonclient.http as httpclient

parser = argparse.ArgumentParser()
parser.add_argument("-u", "--url", default="localhost:8000")
args = parser.parse_args()

client = httpclient.InferenceServerClient(args.url)


def send(sequence_id, value, start=False, end=False):
    x = httpclient.InferInput("INPUT", [1], "INT32")
    x.set_data_from_numpy(np.array([value], dtype=np.int32))
    result = client.infer(
        "sequence_accumulate", [x], sequence_id=sequence_id, sequence_start=start, sequence_end=end
    )
    return int(result.as_numpy("OUTPUT")[0])


values = [11, 7, 5, 3, 2, 0, 1]
first, second = 1000, 1001
out0 = [send(first, 0, start=True)]
out1 = [send(second, 100, start=True)]
for v in values:
    out0.append(send(first, v, end=v == 1))
    out1.append(send(second, -v, end=v == 1))
client.close()
print("RESULT " + json.dumps({"first": out0, "second": out1}))
