"""kserve-v2 conformance model ``sequence_accumulate`` (and ``sequence_accumulate_string``).

OUTPUT = running sum of INPUT within one sequence (INT32, wrapping). The sequence batcher
supplies the control tensors START and END (INT32 0/1); the sum restarts at START and is
forgotten after END. Sequences are told apart by the CORRID control tensor (UINT64) where the
configuration has one, else by request.correlation_id(), which is an int or a str.
``sequence_accumulate_string`` has no CORRID control input because Triton 2.51 builds a
malformed TYPE_STRING CORRID tensor ("unexpected number of string elements 2 for inference
input 'CORRID', expecting 1").
"""

import numpy as np
import triton_python_backend_utils as pb_utils


def _scalar(request, name):
    return pb_utils.get_input_tensor_by_name(request, name).as_numpy().reshape(-1)[0]


class TritonPythonModel:
    def initialize(self, args):
        self.sums = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            corrid = pb_utils.get_input_tensor_by_name(request, "CORRID")
            if corrid is not None:
                key = int(corrid.as_numpy().reshape(-1)[0])
            else:
                key = request.correlation_id()
            if _scalar(request, "START"):
                self.sums[key] = 0
            total = (self.sums.get(key, 0) + int(_scalar(request, "INPUT"))) & 0xFFFFFFFF
            total = total - (1 << 32) if total >= 1 << 31 else total  # back to signed INT32
            if _scalar(request, "END"):
                self.sums.pop(key, None)
            else:
                self.sums[key] = total
            output = pb_utils.Tensor("OUTPUT", np.array([total], dtype=np.int32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses
