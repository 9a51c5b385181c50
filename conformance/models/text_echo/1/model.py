"""kserve-v2 conformance model ``text_echo``: text_output = text_input, in one response.

With max_tokens (optional) only the first max_tokens words are kept, with the whitespace
before each, so the answer equals the concatenation of what text_generate streams.
"""

import re

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy()
            answer = bytes(text.reshape(-1)[0])
            limit = pb_utils.get_input_tensor_by_name(request, "max_tokens")
            if limit is not None:
                words = re.findall(rb"\s*\S+", answer)
                answer = b"".join(words[: max(int(limit.as_numpy().reshape(-1)[0]), 0)])
            output = pb_utils.Tensor("text_output", np.array([answer], dtype=np.object_))
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses
