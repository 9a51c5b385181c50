"""The conformance suite against other servers: KServe's Python model server (``kserve/``) and
MLServer (``mlserver/``), with the suite's models for each, run by ``run.py``
(``bash scripts/conformance_peers.sh``)."""
