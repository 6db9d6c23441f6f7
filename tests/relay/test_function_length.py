"""No function in the call ledger, the telephony agent or its inbound desk runs over 50 lines
(issue 54, "The agent speaks one language"): there, a long function has been where one more
kind of call got one more inline branch, and a kind of call is an object of its own instead
(telephony.outbound, telephony.inbound.app_session).

A function's lines run from its `def` to its last line (`ast`'s end_lineno - lineno + 1: its
decorators left out, its docstring and its nested functions counted in). Read from the
source, like test_layers; no database.
"""

import ast
from pathlib import Path

from django.conf import settings

ROOT = Path(settings.BASE_DIR)
MOST_LINES = 50
CHECKED = ["calls", "telephony/agent.py", "telephony/inbound"]


def checked_files() -> list[Path]:
    files = []
    for name in CHECKED:
        path = ROOT / name
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return files


def long_functions(path: Path) -> list[str]:
    """`path:line name (lines)` for each function of `path` over MOST_LINES lines."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = node.end_lineno - node.lineno + 1
            if lines > MOST_LINES:
                where = path.relative_to(ROOT)
                found.append(f"{where}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_the_checked_places_exist():
    for name in CHECKED:
        assert (ROOT / name).exists(), name


def test_no_function_of_the_ledger_or_the_agent_is_over_50_lines():
    assert [line for path in checked_files() for line in long_functions(path)] == []
