"""A locustfile without users, loaded next to the one under test (``-f a.py,counting.py``):
every process writes the requests it reported, by (type, name), with their failures, to
``$KSERVE_LOCUST_COUNTS/<role>-<pid>.json`` when it quits, so a test can check them against
the master's statistics."""

import json
import os
from collections import Counter

from locust import events
from locust.runners import MasterRunner, WorkerRunner

_requests: Counter = Counter()
_failures: Counter = Counter()
_messages: list = []


@events.request.add_listener
def _count(request_type, name, exception=None, **_kwargs):
    key = f"{request_type} {name}"
    _requests[key] += 1
    if exception is not None:
        _failures[key] += 1
        if len(_messages) < 5:
            _messages.append(str(exception))


@events.quitting.add_listener
def _write(environment, **_kwargs):
    directory = os.environ.get("KSERVE_LOCUST_COUNTS")
    if not directory:
        return
    runner = environment.runner
    role = (
        "master"
        if isinstance(runner, MasterRunner)
        else "worker"
        if isinstance(runner, WorkerRunner)
        else "local"
    )
    with open(os.path.join(directory, f"{role}-{os.getpid()}.json"), "w") as f:
        json.dump({"requests": _requests, "failures": _failures, "messages": _messages}, f)
