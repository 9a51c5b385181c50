"""kserve-v2 conformance model ``identity_<datatype>``: OUTPUT0 = INPUT0, same datatype and shape.

The same file serves every datatype; it reads the datatype from the model configuration.
"""

import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.data_type = pb_utils.get_output_config_by_name(config, "OUTPUT0")["data_type"]

    def execute(self, requests):
        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            if self.data_type == "TYPE_BF16":
                # numpy has no bfloat16, so as_numpy() refuses BF16 tensors; DLPack hands the
                # buffer through untouched (the stub supports kDLBfloat for from_dlpack).
                output = pb_utils.Tensor.from_dlpack("OUTPUT0", tensor.to_dlpack())
            else:
                output = pb_utils.Tensor("OUTPUT0", tensor.as_numpy())
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses
