"""kserve-v2 conformance model ``text_generate``: a decoupled "LLM" that streams its input back.

Each response holds one word of text_input with the whitespace before it, so joining all
text_output values gives text_input without trailing whitespace. max_tokens (optional) caps
the number of responses. A final response-less COMPLETE_FINAL flag ends the stream.
"""

import re

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            text = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy()
            words = re.findall(rb"\s*\S+", bytes(text.reshape(-1)[0]))
            limit = pb_utils.get_input_tensor_by_name(request, "max_tokens")
            if limit is not None:
                words = words[: max(int(limit.as_numpy().reshape(-1)[0]), 0)]
            for word in words:
                if request.is_cancelled():
                    break
                output = pb_utils.Tensor("text_output", np.array([word], dtype=np.object_))
                sender.send(pb_utils.InferenceResponse(output_tensors=[output]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
