"""kserve-v2 conformance model ``versioned``: OUTPUT0 = INPUT0 + the model version (1 or 2).

The same file serves both versions; it reads its version from the arguments Triton passes.
"""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.version = int(args["model_version"])

    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            output = pb_utils.Tensor("OUTPUT0", (data + self.version).astype(np.int32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses
