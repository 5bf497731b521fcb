"""The import rules of the project (README, "How we work"), read from the source with ``ast``:

- no module imports another module's ``_underscore`` names (``from m import _x``, ``m._x``);
- nothing outside a package imports that package's ``_underscore`` modules (the tests, the
  benchmark and the demo use public names);
- no module imports a test module (``test_*``) or a ``conftest``: what tests share lives in
  fixtures (conftest.py) and helpers modules;
- no import cycles among the modules of ``murmur_conversations`` and of ``bench``;
- imports go one way: ``murmur_conversations`` never imports the demo project (``project``), the
  tests or the benchmark; its bottom modules (models, services, selectors and the rest of the core)
  never import its middle packages (api, realtime, admin, importers) or its hooks.

Every import counts wherever it stands (a function's lazy import runs too), except those under
``if TYPE_CHECKING:``, which never run. For cycles only module-level imports count: a lazy import
is how a module reaches one that imports it back, and it runs after both are loaded.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: The first-party top-level packages whose sources are read.
PACKAGES = ("murmur_conversations", "tests", "project", "bench")
#: The packages of ``murmur_conversations`` in the middle layer, and its hooks module.
MIDDLE = ("api", "realtime", "admin", "importers", "mcp", "hooks")
#: Modules of ``murmur_conversations`` that wire the layers together and so may import any.
ENTRY_POINTS = ("apps", "checks", "management", "migrations")

# Breaches allowed for a while, each exactly as ``offences()`` words it, with a comment saying who
# removes it and when. Empty since the write path's helpers moved into services/ under public
# names and the tests, the demo and the benchmark import public names only. A new breach, or an
# entry here that no longer offends, fails the test.
KNOWN_OFFENDERS: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Import:
    """One name an import statement binds: the absolute ``module`` it reads, the ``name`` taken
    from it (None for ``import module``), the local name ``bound``, its line, and whether it runs
    when the module is loaded (not in a function)."""

    module: str
    name: str | None
    bound: str
    line: int
    top_level: bool

    @property
    def targets(self) -> list[str]:
        """The first-party modules it loads: ``a.b`` for ``import a.b``; for ``from a import b``
        the module ``a.b`` when there is one, else ``a``."""
        if self.name is not None and f"{self.module}.{self.name}" in MODULES:
            return [f"{self.module}.{self.name}"]
        first_party = self.module.split(".")[0] in PACKAGES
        return [self.module] if self.module in MODULES or first_party else []

    @property
    def bound_module(self) -> str | None:
        """The first-party module the local name refers to, if it is one."""
        if self.name is None:
            return self.module if self.bound != self.module.split(".")[0] else None
        qualified = f"{self.module}.{self.name}"
        return qualified if qualified in MODULES else None


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    tree: ast.Module

    @property
    def package(self) -> str:
        """The package whose code this module is (itself for an ``__init__``)."""
        return self.name if self.path.name == "__init__.py" else self.name.rpartition(".")[0]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def read_modules() -> dict[str, Module]:
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = module_name(path)
            modules[name] = Module(name, path, ast.parse(path.read_text("utf-8"), str(path)))
    return modules


MODULES = read_modules()


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(module: Module) -> Iterator[Import]:
    """Every import of ``module`` that can run, relative ones made absolute."""

    def walk(node: ast.AST, top_level: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and is_type_checking(child.test):
                for other in child.orelse:
                    yield from walk(other, top_level)
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    yield Import(alias.name, None, bound, child.lineno, top_level)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = module.package.split(".")
                    anchor = anchor[: len(anchor) - (child.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in child.names:
                    bound = alias.asname or alias.name
                    yield Import(base, alias.name, bound, child.lineno, top_level)
            nested = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            yield from walk(child, top_level and not nested)

    yield from walk(module.tree, True)


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_owner(target: str) -> str | None:
    """For a module at or below an ``_underscore`` module or package, the package owning it."""
    parts = target.split(".")
    for index, part in enumerate(parts):
        if is_private(part):
            return ".".join(parts[:index])
    return None


def inside(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def breaches(module: Module) -> Iterator[str]:
    """The module's breaches of the first two rules, one line each."""
    bound: dict[str, str] = {}
    for entry in imports(module):
        for target in entry.targets:
            owner = private_owner(target)
            if owner is not None and not inside(module.name, owner):
                yield f"{module.name} imports private module {target}"
        if (
            entry.name is not None
            and is_private(entry.name)
            and entry.module in MODULES
            and not entry.targets[0].endswith("." + entry.name)
        ):
            yield f"{module.name} imports private name {entry.module}.{entry.name}"
        if entry.bound_module is not None:
            bound[entry.bound] = entry.bound_module
    for node in ast.walk(module.tree):
        if (
            isinstance(node, ast.Attribute)
            and is_private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in bound
        ):
            target = f"{bound[node.value.id]}.{node.attr}"
            if target not in MODULES:
                yield f"{module.name} uses private name {target}"
            elif not inside(module.name, bound[node.value.id]):
                yield f"{module.name} imports private module {target}"


def offences() -> set[str]:
    return {line for module in MODULES.values() for line in breaches(module)}


def graph(package: str) -> dict[str, set[str]]:
    """Module-level imports among the modules of ``package``."""
    return {
        module.name: {
            target
            for entry in imports(module)
            if entry.top_level
            for target in entry.targets
            if inside(target, package) and target != module.name
        }
        for module in MODULES.values()
        if inside(module.name, package)
    }


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(edges.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = stack[stack.index(node) :]
            del stack[stack.index(node) :]
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def layer_of(name: str) -> str:
    """``middle``, ``entry`` or ``core`` for a module of ``murmur_conversations``."""
    first = name.split(".")[1] if "." in name else ""
    if first in MIDDLE:
        return "middle"
    if first in ENTRY_POINTS:
        return "entry"
    return "core"


# ----------------------------------------------------------------------------------- the tests


def test_the_sources_are_read() -> None:
    """A positive control: the walk finds modules and the imports they make."""
    assert {"murmur_conversations.models", "murmur_conversations.services", "bench"} <= set(MODULES)
    found = {
        target
        for entry in imports(MODULES["murmur_conversations.selectors"])
        for target in entry.targets
    }
    assert "murmur_conversations.models" in found


def test_no_module_imports_private_names_or_modules_of_another() -> None:
    found = offences()
    assert sorted(found - KNOWN_OFFENDERS) == [], "new offenders"
    assert sorted(KNOWN_OFFENDERS - found) == [], "no longer offending: drop from KNOWN_OFFENDERS"


def is_test_module(name: str) -> bool:
    last = name.rpartition(".")[2]
    return last.startswith("test_") or last == "conftest"


def test_no_module_imports_a_test_module_or_a_conftest() -> None:
    wrong = [
        f"{module.name}:{entry.line} imports {target}"
        for module in MODULES.values()
        for entry in imports(module)
        for target in entry.targets
        if is_test_module(target) and target != module.name
    ]
    assert wrong == []


@pytest.mark.parametrize("package", ["murmur_conversations", "bench"])
def test_no_import_cycles(package: str) -> None:
    assert cycles(graph(package)) == []


def test_imports_go_one_way() -> None:
    wrong = []
    for module in MODULES.values():
        if not inside(module.name, "murmur_conversations"):
            continue
        for entry in imports(module):
            if entry.module.split(".")[0] in ("project", "tests", "bench"):
                wrong.append(f"{module.name}:{entry.line} imports {entry.module}")
            for target in entry.targets:
                if layer_of(module.name) == "core" and layer_of(target) == "middle":
                    wrong.append(f"{module.name}:{entry.line} (core) imports {target}")
    assert wrong == []


def breaches_of(source: str, name: str = "tests.example") -> set[str]:
    """The breaches ``source`` would have as module ``name``."""
    module = Module(name, ROOT / (name.replace(".", "/") + ".py"), ast.parse(source))
    return set(breaches(module))


def test_the_rules_catch_what_they_name() -> None:
    """Each rule fails on a small example of its breach, and lets the allowed forms pass."""
    hidden = "murmur_conversations.services._hidden"
    assert breaches_of("from murmur_conversations.selectors import _x") == {
        "tests.example imports private name murmur_conversations.selectors._x"
    }
    assert breaches_of("from murmur_conversations import selectors\nselectors._x()") == {
        "tests.example uses private name murmur_conversations.selectors._x"
    }
    assert breaches_of(f"import {hidden} as h") == {
        f"tests.example imports private module {hidden}"
    }
    assert breaches_of(f"def f():\n    from {hidden} import x") == {
        f"tests.example imports private module {hidden}"
    }
    assert breaches_of(f"from {hidden} import x", "murmur_conversations.services.example") == set()
    assert breaches_of(f"if TYPE_CHECKING:\n    import {hidden}") == set()
    assert breaches_of("from murmur_conversations.selectors import __all__") == set()
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert is_test_module("tests.test_import") and is_test_module("tests.conftest")
    assert not is_test_module("tests.import_helpers")
    assert private_owner(hidden) == "murmur_conversations.services"
    assert private_owner("murmur_conversations.services.appending") is None
    assert layer_of("murmur_conversations.models") == "core"
    assert layer_of("murmur_conversations.services.appending") == "core"
    assert layer_of("murmur_conversations.api.viewsets") == "middle"
    assert layer_of("murmur_conversations.hooks") == "middle"
    assert layer_of("murmur_conversations.management.commands.export_conversation") == "entry"
