"""The quick subset (``python -m pytest -m quick``) reaches every module of the package: a change anywhere under
``src/theseus_pl`` is imported by at least one of its tests, so the inner loop cannot pass while that module no
longer imports.

Read from the source, not by running it: a test file reaches what it imports, what the test helpers beside it
import, and every module those import in turn, at any depth and inside functions too (the package imports its
heavier parts where it uses them). Dotted names in its strings count as well (``importlib.import_module``,
``python -m theseus_pl.deploy``, Hydra's ``_target_``).
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.quick

ROOT = Path(__file__).parents[1]
PACKAGE = ROOT / "src" / "theseus_pl"
TESTS = ROOT / "tests"
DOTTED = re.compile(r"\btheseus_pl(?:\.\w+)*")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    module_name(path): path for path in PACKAGE.rglob("*.py") if "conf" not in path.relative_to(PACKAGE).parts[:1]
}
HELPERS = {path.stem: path for path in TESTS.glob("*.py") if not path.name.startswith("test_")}


def with_parents(name: str) -> set[str]:
    """``a.b.c`` and the packages importing it runs: ``a``, ``a.b``."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


def is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name | ast.Attribute) and ast.unparse(node.test).endswith("TYPE_CHECKING")


def package_of(path: Path) -> str:
    """The package a relative import in ``path`` starts from (none outside the package)."""
    if not path.is_relative_to(PACKAGE):
        return ""
    name = module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


@functools.cache
def imported_names(path: Path) -> frozenset[str]:
    """Every dotted name ``path`` imports (and every ``theseus_pl`` name its strings hold), relative imports
    resolved; nothing under ``if TYPE_CHECKING:``, which never runs."""
    package = package_of(path)
    tree = ast.parse(path.read_text())
    skipped = {id(child) for node in ast.walk(tree) if isinstance(node, ast.If) and is_type_checking(node)
               for child in ast.walk(node)}  # fmt: skip
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            names |= {base} | {f"{base}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names |= set(DOTTED.findall(node.value))
    return frozenset(names)


def reached(test_file: Path) -> set[str]:
    """The package's modules ``test_file`` imports, directly, through the test helpers, and through each other."""
    seen: set[str] = set()
    helpers_seen: set[str] = set()
    to_read = [test_file, TESTS / "conftest.py"]
    while to_read:
        for name in imported_names(to_read.pop()):
            if name in HELPERS and name not in helpers_seen:
                helpers_seen.add(name)
                to_read.append(HELPERS[name])
            for module in with_parents(name) & MODULES.keys() - seen:
                seen.add(module)
                to_read.append(MODULES[module])
    return seen


def marked_quick(path: Path) -> bool:
    """Whether the file marks all its tests ``quick`` (``pytestmark = pytest.mark.quick``, or a list holding it)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            return "pytest.mark.quick" in ast.unparse(node.value)
    return False


QUICK_FILES = sorted(path for path in TESTS.rglob("test_*.py") if marked_quick(path))


def test_the_quick_subset_imports_every_module_of_the_package():
    reached_by_quick = set().union(*map(reached, QUICK_FILES))
    missing = sorted(MODULES.keys() - reached_by_quick)
    assert not missing, f"no test marked quick imports these modules: mark a test file that does, or add one: {missing}"


def test_the_reach_is_read_through_helpers_relative_imports_and_strings(tmp_path):
    """The reading above can fail: a module only a helper imports, a relative import, a dotted name in a string."""
    assert "theseus_pl.app.config.resolvers" in reached(TESTS / "app_runs.py")  # what app_runs imports by name
    assert "theseus_pl.core.families" in reached(PACKAGE / "core" / "__init__.py")  # from .families import ...
    strings = tmp_path / "test_strings.py"
    strings.write_text('COMMAND = ["python", "-m", "theseus_pl.report"]\n')
    assert "theseus_pl.report" in reached(strings)
    guarded = tmp_path / "test_guarded.py"
    guarded.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import theseus_pl.deploy\n")
    assert "theseus_pl.deploy" not in reached(guarded) - reached(TESTS / "conftest.py")
