"""Imports run downward only, and no module imports itself around a circle.

Read from the source, so an import inside a function (a lazy import) counts like any other:
moving an import into a function hides a dependency, it does not remove it.
Layers, lowest first (docs/architecture.md):
  core                      the kernel: imports no app
  mail                      the outbox of mail to users, and its sending
  accounts
  captcha, virtual_numbers
  calls                     the call ledger: every app that places, routes or shows calls
                            reads and moves them through it
  history
  voiceapps                 scripts of verbs a call runs: their checks, TwiML, hooks
  realtime
  telephony, webhooks,      the SIP agent and its user agent; signed status webhooks;
    matrix                  the Matrix bot
  console                   pages for people: a client of the services below, like the API
  relay                     the roof: settings, urls, asgi, wsgi, admin site
Tests, benchmarks and migrations are not layers of the product and are not checked.
"""

import ast
from pathlib import Path

from django.conf import settings

ROOT = Path(settings.BASE_DIR)
LAYERS = [
    {"core"},
    {"mail"},
    {"accounts"},
    {"captcha", "virtual_numbers"},
    {"calls"},
    {"history"},
    {"voiceapps"},
    {"realtime"},
    {"telephony", "webhooks", "matrix"},
    {"console"},
    {"relay"},
]
RANK = {package: rank for rank, packages in enumerate(LAYERS) for package in packages}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def product_modules() -> dict[str, Path]:
    modules = {}
    for package in RANK:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" not in path.parts:
                modules[module_name(path)] = path
    return modules


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The product modules `name` imports, wherever in the file the import stands."""
    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            # The longest product module the target names (a module, or a name inside one).
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = product_modules()
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def test_no_module_imports_a_higher_layer():
    upward = []
    for name, targets in import_graph().items():
        for target in targets:
            if RANK[target.split(".")[0]] > RANK[name.split(".")[0]]:
                upward.append(f"{name} -> {target}")
    assert upward == []


def test_the_kernel_imports_no_app():
    for name, targets in import_graph().items():
        if name.split(".")[0] == "core":
            assert {t.split(".")[0] for t in targets} <= {"core"}, name


def test_no_import_cycle():
    graph = import_graph()
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    assert cycles == []
