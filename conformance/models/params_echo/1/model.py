"""kserve-v2 conformance model ``params_echo``: returns the request's parameters as JSON text.

request.parameters() is the JSON object Triton built from the request's "parameters"; it is
returned verbatim so tests see exactly what reached the model.
"""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            params = request.parameters().encode("utf-8")
            output = pb_utils.Tensor("PARAMS", np.array([params], dtype=np.object_))
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses
