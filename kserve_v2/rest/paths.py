"""Request targets of every REST endpoint, with percent-encoding and an optional base path.

Example::

    >>> from kserve_v2.rest.paths import RestPaths
    >>> paths = RestPaths("/serving/ns")
    >>> paths.model_infer("my model", "2")
    '/serving/ns/v2/models/my%20model/versions/2/infer'
    >>> RestPaths().server_live()
    '/v2/health/live'
    >>> RestPaths(origin="http://10.0.0.2:8000").server_live()
    'http://10.0.0.2:8000/v2/health/live'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import quote, urlencode

from kserve_v2.errors import InvalidInputError

__all__ = ["QueryParams", "RestPaths", "with_query"]

QueryParams = Mapping[str, object] | Sequence[tuple[str, object]]

_SHARED_MEMORY_PREFIX = {"system": "/systemsharedmemory", "cuda": "/cudasharedmemory"}


def _segment(value: str, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInputError(f"{what} must be a non-empty string, got {value!r}", value=value)
    # safe="" so that "/" inside a model name cannot change the route; "." and ".." are
    # escaped too, or a client or proxy that normalises dot segments would re-route them.
    if value in (".", ".."):
        return value.replace(".", "%2E")
    return quote(value, safe="")


def with_query(target: str, query: QueryParams | None) -> str:
    """Append a query string; booleans are written ``true``/``false``."""
    if not query:
        return target
    items = query.items() if isinstance(query, Mapping) else query
    pairs = [(k, ("true" if v else "false") if isinstance(v, bool) else str(v)) for k, v in items]
    return f"{target}{'&' if '?' in target else '?'}{urlencode(pairs)}"


class RestPaths:
    """Builds request targets; ``base_path`` prefixes every one (servers behind a gateway).

    With an ``origin`` (``http://host:port``) the targets are absolute URLs, which name the
    server themselves (``http://host:port/v2/...``); otherwise origin-form paths."""

    __slots__ = ("_infer_targets", "base")

    def __init__(self, base_path: str = "", origin: str = "") -> None:
        stripped = base_path.strip("/")
        self.base = origin + (f"/{quote(stripped, safe='/')}" if stripped else "")
        # The infer target is built on every request: remember it per (model, version).
        self._infer_targets: dict[tuple[str, str], str] = {}

    def _v2(self, rest: str = "") -> str:
        return f"{self.base}/v2{rest}"

    def _model(self, name: str, version: str = "") -> str:
        path = f"/models/{_segment(name, 'model name')}"
        if version:
            path += f"/versions/{_segment(str(version), 'model version')}"
        return path

    # core protocol
    def server_metadata(self) -> str:
        return self._v2()

    def server_live(self) -> str:
        return self._v2("/health/live")

    def server_ready(self) -> str:
        return self._v2("/health/ready")

    def model_metadata(self, name: str, version: str = "") -> str:
        return self._v2(self._model(name, version))

    def model_ready(self, name: str, version: str = "") -> str:
        return self._v2(self._model(name, version) + "/ready")

    def model_infer(self, name: str, version: str = "") -> str:
        key = (name, version)
        target = self._infer_targets.get(key)
        if target is None:
            target = self._v2(self._model(name, version) + "/infer")
            if len(self._infer_targets) < 1024:  # bounded: model names come from callers
                self._infer_targets[key] = target
        return target

    # Triton extensions
    def model_config(self, name: str, version: str = "") -> str:
        return self._v2(self._model(name, version) + "/config")

    def model_statistics(self, name: str = "", version: str = "") -> str:
        if not name:
            return self._v2("/models/stats")
        return self._v2(self._model(name, version) + "/stats")

    def repository_index(self) -> str:
        return self._v2("/repository/index")

    def repository_load(self, name: str) -> str:
        return self._v2(f"/repository/models/{_segment(name, 'model name')}/load")

    def repository_unload(self, name: str) -> str:
        return self._v2(f"/repository/models/{_segment(name, 'model name')}/unload")

    def shared_memory(self, kind: str, action: str, region: str = "") -> str:
        """``kind`` is ``"system"`` or ``"cuda"``; ``action`` is status/register/unregister."""
        prefix = _SHARED_MEMORY_PREFIX.get(kind)
        if prefix is None:
            raise InvalidInputError(
                f"shared-memory kind must be 'system' or 'cuda', got {kind!r}", value=kind
            )
        if region:
            prefix += f"/region/{_segment(region, 'region name')}"
        return self._v2(f"{prefix}/{action}")

    def trace_setting(self, model: str = "") -> str:
        return self._v2((self._model(model) if model else "") + "/trace/setting")

    def logging(self) -> str:
        return self._v2("/logging")

    def generate(self, name: str, version: str = "", *, stream: bool = False) -> str:
        return self._v2(
            self._model(name, version) + ("/generate_stream" if stream else "/generate")
        )
