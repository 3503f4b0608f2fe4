"""The queue core's and the local engine's layout holds (docs/architecture.md): packages by concern whose imports
run one way only, no import cycle anywhere in the product, few entries at the layer's top, and no long module without
its reason."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support import imports_of

ROOT = Path(__file__).resolve().parents[2]
LAYER = ROOT / "layers" / "taskqueue" / "taskqueue"
# Lowest first: a package may import those below it, never one above (taskqueue/__init__.py says why).
ORDER = ("core", "store", "observe", "wakeups", "workflows", "work", "matching", "services", "client")
LOCAL = ROOT / "local"
# The local engine's packages, lowest first (local/__init__.py says why); local/__main__.py may import them all.
LOCAL_ORDER = ("template", "iam", "faults", "emulator", "delivery", "engine", "reports", "scenarios")
# The product's code: the layer, the handlers, the operator CLI, the local engine.
PRODUCT = (("layers/taskqueue", "taskqueue"), ("cli", "taskq"), (".", "local"))
MAX_LINES = 400


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for base, package in PRODUCT:
        for path in sorted((ROOT / base / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT / base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def product_imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every product module ``name`` imports, at any depth of the file (a lazy import can close a cycle too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for base, names in imports_of(path, package):
        # ``from pkg import submodule`` depends on the submodule; ``from module import name`` on the module.
        for target in [f"{base}.{taken}" for taken in names] or [base]:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: product_imports(name, path, known) for name, path in found.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def rank(module: str, top: str = "taskqueue", order: tuple[str, ...] = ORDER) -> int | None:
    parts = module.split(".")
    if parts[0] != top or len(parts) < 2:
        return None
    return order.index(parts[1]) if parts[1] in order else None


def local_rank(module: str) -> int | None:
    return rank(module, "local", LOCAL_ORDER)


def upward_imports(ranking) -> list[str]:
    upward = []
    for module, targets in graph().items():
        mine = ranking(module)
        if mine is None:
            continue
        for target in targets:
            theirs = ranking(target)
            if theirs is not None and theirs > mine:
                upward.append(f"{module} -> {target}")
    return upward


def test_no_import_cycle_in_the_product() -> None:
    assert cycles(graph()) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_layer_imports_only_downward() -> None:
    assert upward_imports(rank) == []


def test_the_local_engine_imports_only_downward() -> None:
    assert upward_imports(local_rank) == []


def test_the_local_order_puts_the_template_lowest_and_leaves_main_out() -> None:
    assert local_rank("local.template.cron") < local_rank("local.engine.stack")
    assert local_rank("local.__main__") is None


def test_every_local_module_belongs_to_a_package_of_the_order() -> None:
    stray = [name for name in modules()
             if name.startswith("local.") and name != "local.__main__" and local_rank(name) is None]
    assert stray == []


def test_every_layer_module_belongs_to_a_package_of_the_order() -> None:
    stray = [name for name in modules() if name.startswith("taskqueue.") and rank(name) is None]
    assert stray == []


def test_the_layer_top_level_holds_at_most_ten_entries() -> None:
    # Eight packages, services.py and __init__.py: __init__, client, core, matching, observe, services, store, wakeups, work, workflows.
    entries = sorted(p.name for p in LAYER.iterdir() if p.name != "__pycache__")
    assert len(entries) <= 10, entries


def test_a_long_module_says_why_in_its_first_lines() -> None:
    unexplained = []
    for base in ("layers/taskqueue/taskqueue", "cli/taskq", "local", "functions", "bench"):
        for path in (ROOT / base).rglob("*.py"):
            text = path.read_text()
            lines = text.splitlines()
            reason = "400 lines" in (ast.get_docstring(ast.parse(text)) or "")
            if len(lines) > MAX_LINES and not reason:
                unexplained.append(f"{path.relative_to(ROOT)}: {len(lines)} lines")
    assert unexplained == []


@pytest.mark.parametrize("package", [p for p in ORDER if (LAYER / p).is_dir()])
def test_each_package_says_what_it_owns_and_may_import(package: str) -> None:
    doc = ast.get_docstring(ast.parse((LAYER / package / "__init__.py").read_text())) or ""
    assert "import" in doc, f"taskqueue/{package}/__init__.py must say what it may import"


@pytest.mark.parametrize("package", LOCAL_ORDER)
def test_each_local_package_says_what_it_owns_and_may_import(package: str) -> None:
    doc = ast.get_docstring(ast.parse((LOCAL / package / "__init__.py").read_text())) or ""
    assert "May import" in doc, f"local/{package}/__init__.py must say what it may import"
