"""The package's layers only look down, and no module reaches into another's private names.

Every module of ``kserve_v2`` is read as source (``ast``, nothing is imported) and each import
statement becomes an edge: module-level imports, imports inside functions and imports under
``if TYPE_CHECKING:`` alike, since each is a dependency of the design even when it is not one
at run time. The one exception are package ``__init__`` modules' lazy re-exports (PEP 562
``__getattr__``): they load a name on first use and are not an edge of the package itself.
``from package import name`` is an edge to ``package.name`` when that is a module, else to
``package``.

The checks, each naming every offender (module, line, what it imports):

* every module is assigned a layer in :data:`LAYERS`;
* no module imports a module of a higher layer;
* a package ``__init__`` imports eagerly only what every module under it may import (importing
  ``kserve_v2.h2.frames`` runs ``kserve_v2/__init__.py`` and ``kserve_v2/h2/__init__.py``
  first, so their eager imports are everyone's imports);
* generated code (``grpc/_generated``) is a leaf: it imports only itself;
* there is no import cycle between modules;
* no module takes a ``_private`` name from another (``from x import _y``, or ``x._y`` on an
  imported module); a ``_private`` module may be used only inside the package that holds it.
"""

from __future__ import annotations

import ast
import enum
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

PACKAGE = "kserve_v2"
PACKAGE_DIR = Path(__file__).resolve().parent.parent / PACKAGE


class Layer(enum.IntEnum):
    """Bottom to top: a module may import modules of its own layer or of layers below."""

    #: Value objects and argument checks: errors, datatypes, tensors, messages, options...
    VALUES = 0
    #: Sans-IO engines: wire formats and protocol state machines, no sockets.
    ENGINES = 1
    #: The protocols that backends and transports meet at (Backend/Call, Transport...).
    CONTRACT = 2
    #: The calls of each protocol (REST, gRPC) over the contract's transports.
    BACKENDS = 3
    #: Sockets, event loops, httpx and grpcio: the things that move bytes.
    TRANSPORTS = 4
    #: Client and AsyncClient, built from a backend and a transport.
    CLIENTS = 5
    #: What users import or run: the package root, the command line, the conformance suite
    #: and the Triton launcher for tests.
    FACADE = 6


#: Each module's layer. An entry names a module, or a package and everything under it unless a
#: longer entry says otherwise; the root package's entry covers itself only, so a new module
#: must be placed here on purpose.
LAYERS: dict[str, Layer] = {
    # -- values
    "kserve_v2._lazy": Layer.VALUES,  # the package inits' lazy re-exports
    "kserve_v2.arguments": Layer.VALUES,
    "kserve_v2.concurrency": Layer.VALUES,  # async/sync lock, condition... twins (unasync swaps)
    "kserve_v2.datatypes": Layer.VALUES,
    "kserve_v2.endpoint": Layer.VALUES,
    "kserve_v2.errors": Layer.VALUES,
    "kserve_v2.extensions": Layer.VALUES,
    "kserve_v2.hooks": Layer.VALUES,
    "kserve_v2.messages": Layer.VALUES,
    "kserve_v2.metrics": Layer.VALUES,
    "kserve_v2.options": Layer.VALUES,
    "kserve_v2.parameters": Layer.VALUES,
    "kserve_v2.pem": Layer.VALUES,  # TLS files into an SSLContext, errors naming the file
    "kserve_v2.retry": Layer.VALUES,  # RetryPolicy: what is retried (the clients sleep)
    "kserve_v2.shm": Layer.VALUES,
    "kserve_v2.tensors": Layer.VALUES,
    "kserve_v2.version": Layer.VALUES,
    # -- sans-IO engines
    "kserve_v2.h2": Layer.ENGINES,
    "kserve_v2.http1": Layer.ENGINES,
    "kserve_v2.rest": Layer.ENGINES,
    "kserve_v2.grpc._generated": Layer.ENGINES,
    "kserve_v2.grpc.codec": Layer.ENGINES,
    "kserve_v2.grpc.config": Layer.ENGINES,
    "kserve_v2.grpc.extensions": Layer.ENGINES,
    "kserve_v2.grpc.framing": Layer.ENGINES,
    "kserve_v2.grpc.status": Layer.ENGINES,
    "kserve_v2.grpc.wire": Layer.ENGINES,
    # -- contract
    "kserve_v2.backend": Layer.CONTRACT,
    "kserve_v2.interfaces": Layer.CONTRACT,
    # -- backends (kserve_v2.grpc itself re-exports the gRPC streams)
    "kserve_v2.grpc": Layer.BACKENDS,
    "kserve_v2.grpc.backend": Layer.BACKENDS,
    "kserve_v2.grpc.stream": Layer.BACKENDS,
    "kserve_v2.rest.backend": Layer.BACKENDS,
    # -- transports
    "kserve_v2.transport": Layer.TRANSPORTS,
    # -- clients
    "kserve_v2.client": Layer.CLIENTS,
    # -- facade
    "kserve_v2": Layer.FACADE,
    "kserve_v2.__main__": Layer.FACADE,
    "kserve_v2.cli": Layer.FACADE,  # the kserve-v2 command
    "kserve_v2.compat": Layer.FACADE,  # the tritonclient-compatible layer, on the clients
    "kserve_v2.conformance": Layer.FACADE,  # the conformance suite (cases use the clients)
    "kserve_v2.locust": Layer.FACADE,  # Locust users (optional extra), on the clients
    "kserve_v2.testing": Layer.FACADE,
}

#: Generated stubs import nothing of ours but each other.
LEAF_PACKAGES = ("kserve_v2.grpc._generated",)


class Kind(enum.Enum):
    """Where an import statement sits."""

    #: At module level: runs when the module is imported.
    EAGER = "module level"
    #: Inside a function: runs when the function is called.
    FUNCTION = "in a function"
    #: Under ``if TYPE_CHECKING:``: seen by type checkers only.
    TYPING = "under TYPE_CHECKING"


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` (taking ``names`` from it, for ``from`` imports)."""

    source: str
    target: str
    line: int
    kind: Kind
    names: tuple[str, ...] = ()

    def where(self) -> str:
        return f"{self.source}:{self.line} ({self.kind.value})"


@dataclass(frozen=True)
class PrivateUse:
    """``source`` takes the private ``name`` of ``owner`` (a module, or a private module)."""

    source: str
    owner: str
    name: str
    line: int


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@cache
def _sources() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE_DIR.rglob("*.py"))}


def _is_package(module: str) -> bool:
    return _sources()[module].name == "__init__.py"


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


class _ImportCollector(ast.NodeVisitor):
    """Records a module's imports of the package, with where each sits, and the names bound
    to imported modules (to catch ``module._private`` attribute reads)."""

    def __init__(self, module: str) -> None:
        self.module = module
        self.package = module if _is_package(module) else module.rpartition(".")[0]
        self.edges: list[Edge] = []
        self.private: list[PrivateUse] = []
        self.module_aliases: dict[str, str] = {}  # local name -> module it is bound to
        self._function_depth = 0
        self._typing_depth = 0

    @property
    def _kind(self) -> Kind:
        if self._typing_depth:
            return Kind.TYPING
        return Kind.FUNCTION if self._function_depth else Kind.EAGER

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._function(node)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        lazy_reexport = (
            self._function_depth == 0 and node.name == "__getattr__" and _is_package(self.module)
        )
        if lazy_reexport:
            return  # PEP 562 re-exports: not an edge of the package itself
        self._function_depth += 1
        self.generic_visit(node)
        self._function_depth -= 1

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            self._typing_depth += 1
            for child in node.body:
                self.visit(child)
            self._typing_depth -= 1
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if not _ours(alias.name):
                continue
            self._edge(alias.name, node.lineno)
            if alias.asname:
                self.module_aliases[alias.asname] = alias.name
            else:  # ``import a.b.c`` binds ``a``; reads go through the full dotted path
                self.module_aliases[alias.name.partition(".")[0]] = alias.name.partition(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = self._resolve(node)
        if base is None:
            return
        sources = _sources()
        plain: list[str] = []
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            if submodule in sources:
                self._edge(submodule, node.lineno)
                self.module_aliases[alias.asname or alias.name] = submodule
            else:
                plain.append(alias.name)
                if _is_private(alias.name):
                    self.private.append(PrivateUse(self.module, base, alias.name, node.lineno))
        if plain or base not in sources:
            self._edge(base, node.lineno, tuple(plain))

    def _resolve(self, node: ast.ImportFrom) -> str | None:
        if not node.level:
            return node.module if node.module and _ours(node.module) else None
        parts = self.package.split(".")
        base = ".".join(parts[: len(parts) - node.level + 1])
        return f"{base}.{node.module}" if node.module else base

    def _edge(self, target: str, line: int, names: tuple[str, ...] = ()) -> None:
        self.edges.append(Edge(self.module, target, line, self._kind, names))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = _dotted(node)
        if dotted is not None:
            root, _, rest = dotted.partition(".")
            bound = self.module_aliases.get(root)
            if bound is not None:
                self._attribute_chain(bound, rest.split("."), node.lineno)
        self.generic_visit(node)

    def _attribute_chain(self, module: str, attributes: list[str], line: int) -> None:
        sources = _sources()
        for attribute in attributes:
            if f"{module}.{attribute}" in sources:
                module = f"{module}.{attribute}"  # a submodule: checked by its path below
                continue
            if _is_private(attribute):
                self.private.append(PrivateUse(self.module, module, attribute, line))
            return

    def collect(self, tree: ast.Module) -> None:
        self.visit(tree)


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _ours(name: str) -> bool:
    return name == PACKAGE or name.startswith(PACKAGE + ".")


@cache
def _collected() -> tuple[tuple[Edge, ...], tuple[PrivateUse, ...]]:
    edges: list[Edge] = []
    private: list[PrivateUse] = []
    for module, path in _sources().items():
        collector = _ImportCollector(module)
        collector.collect(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        edges += collector.edges
        private += collector.private
    return tuple(edges), tuple(private)


def _edges() -> tuple[Edge, ...]:
    return _collected()[0]


def layer_of(module: str) -> Layer | None:
    """The layer :data:`LAYERS` gives ``module``: its own entry or its nearest package's."""
    name = module
    while True:
        layer = LAYERS.get(name)
        if layer is not None and (name == module or name != PACKAGE):
            return layer
        if "." not in name:
            return None
        name = name.rpartition(".")[0]


def _private_module_owner(module: str) -> str | None:
    """The package holding the first ``_private`` component of ``module``'s path, if any."""
    parts = module.split(".")
    for index, part in enumerate(parts):
        if _is_private(part):
            return ".".join(parts[:index])
    return None


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _report(title: str, lines: list[str]) -> None:
    if lines:
        pytest.fail(f"{title} ({len(lines)}):\n  " + "\n  ".join(sorted(set(lines))), False)


# ---------------------------------------------------------------------------------------- tests


def test_the_package_is_found() -> None:
    assert {"kserve_v2", "kserve_v2.errors", "kserve_v2.h2.frames"} <= set(_sources())


def test_every_module_has_a_layer() -> None:
    _report(
        "modules without a layer in LAYERS",
        [module for module in _sources() if layer_of(module) is None],
    )


def test_every_layer_entry_names_a_module() -> None:
    _report("LAYERS entries naming no module", [name for name in LAYERS if name not in _sources()])


def test_every_import_of_the_package_names_a_module() -> None:
    _report(
        "imports of modules that do not exist",
        [f"{e.where()} imports {e.target}" for e in _edges() if e.target not in _sources()],
    )


def test_no_module_imports_a_higher_layer() -> None:
    problems = []
    for edge in _edges():
        source, target = layer_of(edge.source), layer_of(edge.target)
        if source is not None and target is not None and target > source:
            problems.append(
                f"{edge.where()} [{source.name.lower()}] imports {edge.target} "
                f"[{target.name.lower()}]"
            )
    _report("imports of a higher layer", problems)


def test_package_inits_eagerly_import_only_what_their_modules_may() -> None:
    sources = _sources()
    problems = []
    for package in (module for module in sources if _is_package(module)):
        below = [
            layer
            for module in sources
            if module.startswith(package + ".") and (layer := layer_of(module)) is not None
        ]
        if not below:
            continue
        floor = min(below)
        for edge in _edges():
            if edge.source != package or edge.kind is not Kind.EAGER:
                continue
            target = layer_of(edge.target)
            if target is not None and target > floor:
                problems.append(
                    f"{edge.where()} imports {edge.target} [{target.name.lower()}], above "
                    f"the lowest layer under it [{floor.name.lower()}]: make it lazy"
                )
    _report("package __init__ imports that every module under it pays for", problems)


def test_generated_code_is_a_leaf() -> None:
    problems = [
        f"{edge.where()} imports {edge.target}"
        for edge in _edges()
        for leaf in LEAF_PACKAGES
        if _inside(edge.source, leaf) and not _inside(edge.target, leaf)
    ]
    _report("generated modules importing the rest of the package", problems)


def _cycles(graph: dict[str, set[str]]) -> Iterator[tuple[list[str], list[str]]]:
    """Each strongly connected component of more than one module (or a module importing
    itself): one shortest cycle through it and all its members (Tarjan's algorithm, then a
    breadth-first search inside the component)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph.get(node, ())):
            if successor not in index:
                connect(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    for component in components:
        start = component[0]
        if len(component) == 1 and start not in graph.get(start, ()):
            continue
        members = set(component)
        # Breadth-first from start back to start, inside the component: a shortest cycle.
        paths: dict[str, list[str]] = {start: [start]}
        frontier = [start]
        found: list[str] | None = None
        while frontier and found is None:
            following = []
            for node in frontier:
                for successor in sorted(graph.get(node, ())):
                    if successor == start:
                        found = [*paths[node], start]
                        break
                    if successor in members and successor not in paths:
                        paths[successor] = [*paths[node], successor]
                        following.append(successor)
                if found is not None:
                    break
            frontier = following
        assert found is not None
        yield found, component


def test_no_import_cycles() -> None:
    graph: dict[str, set[str]] = {}
    lines: dict[tuple[str, str], list[str]] = {}
    for edge in _edges():
        if edge.target in _sources():
            graph.setdefault(edge.source, set()).add(edge.target)
            lines.setdefault((edge.source, edge.target), []).append(f"{edge.line}")
    problems = []
    for cycle, component in _cycles(graph):
        steps = [
            f"{a} -> {b} (line {', '.join(lines[a, b])})" for a, b in itertools.pairwise(cycle)
        ]
        if len(component) > len(cycle) - 1:
            steps.append(f"[all of: {', '.join(component)}]")
        problems.append("; ".join(steps))
    _report("import cycles", problems)


def test_no_module_takes_another_modules_private_names() -> None:
    edges, private = _collected()
    problems = [
        f"{use.source}:{use.line} takes {use.owner}.{use.name}"
        for use in private
        if use.owner != use.source
    ]
    for edge in edges:
        owner = _private_module_owner(edge.target)
        if owner is not None and not _inside(edge.source, owner):
            problems.append(f"{edge.where()} imports {edge.target}, private to {owner}")
    _report("private names used outside their module", problems)


def test_the_collector_sees_every_kind_of_import() -> None:
    source = """
import kserve_v2.h2.frames
from kserve_v2.h2 import connection as conn, _huffman
from kserve_v2.errors import _hidden, __all__
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from kserve_v2.client import Client
def f():
    from ..transport import native
    return conn._FRAME_HEADER, kserve_v2.h2.frames._HEADER, conn.H2Connection
def __getattr__(name):
    from kserve_v2.client import sync
"""
    collector = _ImportCollector("kserve_v2.grpc.framing")
    collector.collect(ast.parse(source))
    assert [(e.target, e.kind, e.names) for e in collector.edges] == [
        ("kserve_v2.h2.frames", Kind.EAGER, ()),
        ("kserve_v2.h2.connection", Kind.EAGER, ()),
        ("kserve_v2.h2._huffman", Kind.EAGER, ()),
        ("kserve_v2.errors", Kind.EAGER, ("_hidden", "__all__")),
        ("kserve_v2.client", Kind.TYPING, ("Client",)),
        ("kserve_v2.transport.native", Kind.FUNCTION, ()),
        ("kserve_v2.client.sync", Kind.FUNCTION, ()),  # a module's __getattr__ is a function
    ]
    assert [(p.owner, p.name) for p in collector.private] == [
        ("kserve_v2.errors", "_hidden"),
        ("kserve_v2.h2.connection", "_FRAME_HEADER"),
        ("kserve_v2.h2.frames", "_HEADER"),
    ]
    # In a package __init__, a module-level __getattr__ holds lazy re-exports: not edges.
    package = _ImportCollector("kserve_v2.h2")
    package.collect(ast.parse(source))
    assert "kserve_v2.client.sync" not in {e.target for e in package.edges}
    assert _private_module_owner("kserve_v2.h2._huffman") == "kserve_v2.h2"
    assert _private_module_owner("kserve_v2.grpc._generated.grpc_service_pb2") == "kserve_v2.grpc"
    assert _private_module_owner("kserve_v2.h2.hpack") is None


def test_layer_lookup() -> None:
    assert layer_of("kserve_v2") is Layer.FACADE
    assert layer_of("kserve_v2.h2.hpack") is Layer.ENGINES
    assert layer_of("kserve_v2.grpc.stream") is Layer.BACKENDS
    assert layer_of("kserve_v2.grpc._generated.health_pb2") is Layer.ENGINES
    assert layer_of("kserve_v2.transport.native") is Layer.TRANSPORTS
    assert layer_of("kserve_v2.new_module") is None  # the root's entry covers itself only
