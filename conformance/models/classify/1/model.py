"""kserve-v2 conformance model ``classify``: OUTPUT0 = INPUT0; Triton does the classification.

Scores past the 10 labels of labels.txt come back as "value:index" without a label.
"""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            scores = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            output = pb_utils.Tensor("OUTPUT0", scores)
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses
