"""One harness (issue 55): the live processes the tests and the bench both start live in
harness/, which imports no test module, no conftest and no pytest; bench/ imports harness/ and
never a test module or a conftest; and the product imports neither.

Read from the source, as tests/relay/test_layers.py reads it: an import inside a function
counts like any other.
"""

import ast
import sys
from pathlib import Path

from harness.live import ROOT, child_environ, run_python
from tests.relay.test_layers import RANK


def imported(source: str, filename: str = "<source>") -> set[str]:
    """Every module `source` imports, absolute and dotted (`from a import b` gives a and a.b),
    wherever in the file the import stands."""
    found = set()
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            base = node.module or ""
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def refused(source: str, tops: set[str], filename: str = "<source>") -> set[str]:
    """The imports of `source` that name a package of `tops`, or a conftest anywhere."""
    return {
        name
        for name in imported(source, filename)
        if name.split(".")[0] in tops or "conftest" in name.split(".")
    }


def refused_in(folder: str, tops: set[str]) -> list[str]:
    found = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for name in sorted(refused(path.read_text(), tops, str(path))):
            found.append(f"{path.relative_to(ROOT)}: {name}")
    return found


def test_the_bench_imports_no_test_module_and_no_conftest():
    assert refused_in("bench", {"tests"}) == []


def test_the_harness_imports_no_test_module_no_pytest_and_not_the_bench():
    assert refused_in("harness", {"tests", "pytest", "_pytest", "bench"}) == []


def test_the_product_imports_neither_the_harness_nor_the_bench():
    found = []
    for app in RANK:
        found += refused_in(app, {"harness", "bench", "tests"})
    assert found == []


def test_a_test_module_or_a_conftest_imported_anywhere_is_found():
    """The check itself: at the top, inside a function, as a package or from one."""
    source = (
        "import tests\n"
        "from tests.live import wait_until\n"
        "def later():\n"
        "    from tests.telephony import conftest\n"
        "    import tests.telephony.interop.conftest as interop\n"
        "from harness.live import ROOT\n"
    )
    assert refused(source, {"tests"}) == {
        "tests",
        "tests.live",
        "tests.live.wait_until",
        "tests.telephony",
        "tests.telephony.conftest",
        "tests.telephony.interop.conftest",
    }


def test_every_module_of_the_harness_imports_from_the_root_without_pytest_or_django_set_up():
    """As the bench and a child started from the checkout import it: no settings module, no
    pytest, and nothing of tests/ pulled in on the way."""
    code = (
        "import importlib, pkgutil, sys\n"
        "import harness\n"
        "for module in pkgutil.iter_modules(harness.__path__):\n"
        "    importlib.import_module('harness.' + module.name)\n"
        "tops = ('pytest', '_pytest', 'tests')\n"
        "print(sorted(n for n in sys.modules if n.split('.')[0] in tops))\n"
        "print(harness.__file__)\n"
    )
    env = child_environ()
    assert "DJANGO_SETTINGS_MODULE" not in env
    done = run_python("-c", code, env=env)
    assert done.returncode == 0, done.stderr
    pulled_in, where = done.stdout.splitlines()
    assert pulled_in == "[]"
    assert Path(where) == ROOT / "harness" / "__init__.py"
    assert sys.modules["harness"].__file__ == where  # this run's harness, the checkout's own
