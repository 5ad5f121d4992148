"""The contract library's modules import each other at the top only: an import hidden inside a
function is how a cycle hides (issue 16: manifest ↔ manifest_jsonschema was one)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.core.test_no_django import CORE_FILES, ROOT


def nested_imports(tree: ast.Module) -> list[str]:
    nested: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            nested.extend(f"line {inner.lineno}" for inner in ast.walk(node)
                          if isinstance(inner, ast.Import | ast.ImportFrom))
    return nested


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: p.name)
def test_no_core_module_imports_inside_a_function(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    assert nested_imports(tree) == [], f"{path.relative_to(ROOT)} imports inside a function"
