"""kserve-v2 conformance model ``failing``: answers every request with an error response.

The message is fixed so tests can check that the server's text reaches the caller verbatim.
"""

import triton_python_backend_utils as pb_utils

MESSAGE = "kserve-v2 test failure: deliberate error"


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(MESSAGE))
            for _ in requests
        ]
