"""kserve-v2 conformance model ``repeat_decoupled``: a decoupled model streaming REPEAT responses.

Response i carries OUT = IN and IDX = [i]; after the last one a response-less COMPLETE_FINAL
flag ends the stream, so REPEAT = 0 yields no data response at all. DELAY_MS (optional) waits
before each response; ERROR_AT (optional) sends an error response in place of response
number ERROR_AT, then carries on.

When the server's environment names a file in KSERVE_V2_SEND_LOG (the benchmarks do), each
request appends "<responses sent> <seconds its send loop took>" to it: the rate at which the
model itself produced responses, to compare with the rate a client received them.
"""

import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils

ERROR_MESSAGE = "kserve-v2 test failure: deliberate error"
SEND_LOG = os.environ.get("KSERVE_V2_SEND_LOG")


def _optional_scalar(request, name, default):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return default if tensor is None else tensor.as_numpy().reshape(-1)[0].item()


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            repeat = int(_optional_scalar(request, "REPEAT", 0))
            delay_s = max(float(_optional_scalar(request, "DELAY_MS", 0.0)), 0.0) / 1000.0
            error_at = int(_optional_scalar(request, "ERROR_AT", -1))
            started, sent = time.perf_counter(), 0
            for index in range(repeat):
                if request.is_cancelled():
                    break
                if delay_s:
                    time.sleep(delay_s)
                if index == error_at:
                    response = pb_utils.InferenceResponse(error=pb_utils.TritonError(ERROR_MESSAGE))
                else:
                    response = pb_utils.InferenceResponse(
                        output_tensors=[
                            pb_utils.Tensor("OUT", data.astype(np.int32)),
                            pb_utils.Tensor("IDX", np.array([index], dtype=np.int32)),
                        ]
                    )
                sender.send(response)
                sent += 1
            if SEND_LOG:
                with open(SEND_LOG, "a") as log:
                    log.write(f"{sent} {time.perf_counter() - started:.9f}\n")
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
