"""kserve-v2 test model ``slow``: waits DELAY_MS milliseconds, then echoes the delay.

The wait is sliced so a request the server cancels (e.g. a gRPC call whose client went away)
frees the single instance early instead of blocking the requests queued behind it.
"""

import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            delay = pb_utils.get_input_tensor_by_name(request, "DELAY_MS").as_numpy()
            deadline = time.monotonic() + max(float(delay.reshape(-1)[0]), 0.0) / 1000.0
            while not request.is_cancelled():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                time.sleep(min(remaining, 0.05))
            if request.is_cancelled():
                error = pb_utils.TritonError("request cancelled", pb_utils.TritonError.CANCELLED)
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            output = pb_utils.Tensor("OUTPUT0", delay.astype("float32"))
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses
