"""kserve-v2 test model ``bytes_reverse``: each BYTES element of INPUT0 reversed, byte by byte.

Byte-wise (not character-wise) on purpose: arbitrary binary elements, including NUL bytes and
invalid UTF-8, must survive the round trip.
"""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            reversed_ = np.array([bytes(item)[::-1] for item in data.ravel()], dtype=np.object_)
            output = pb_utils.Tensor("OUTPUT0", reversed_.reshape(data.shape))
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses
