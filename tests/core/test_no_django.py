"""The pure contract library (hashee_sdk.core, and the server-only hashee.core) imports no Django
(nor the Django-based stack)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sdk"
CORES = {SDK: SDK / "hashee_sdk" / "core", ROOT: ROOT / "hashee" / "core"}  # import root → package
BLOCKED = ("django", "rest_framework", "drf_spectacular", "channels", "channels_redis", "django_ratelimit")

CORE_FILES = sorted(path for core in CORES.values() for path in core.rglob("*.py"))
CORE_MODULES = [".".join(path.relative_to(base).with_suffix("").parts).removesuffix(".__init__")
                for base, core in CORES.items() for path in sorted(core.rglob("*.py"))]


def imported_names(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
            "import_module",
            "__import__",
        ):
            names.extend(arg.value for arg in node.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str))
    return names


def test_there_are_core_modules_to_check() -> None:
    assert "hashee_sdk.core.manifest" in CORE_MODULES and "hashee_sdk.core.canonical" in CORE_MODULES


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: p.name)
def test_no_core_source_file_imports_django(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    offending = [name for name in imported_names(tree) if name.split(".")[0] in BLOCKED]
    assert offending == [], f"{path.relative_to(ROOT)} imports {offending}"


IMPORT_EVERYTHING = """
import importlib, json, sys

BLOCKED = set(json.loads(sys.argv[1]))
attempts = []

class RefuseDjango:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            attempts.append(name)
            raise ImportError(f"the pure core must not import {name}")
        return None

sys.meta_path.insert(0, RefuseDjango())
failures = {}
for module in json.loads(sys.argv[2]):
    try:
        importlib.import_module(module)
    except Exception as exc:
        failures[module] = f"{type(exc).__name__}: {exc}"
loaded = sorted(name for name in sys.modules if name.split(".")[0] in BLOCKED)
print(json.dumps({"failures": failures, "attempts": attempts, "loaded": loaded}))
"""


def test_importing_every_core_module_loads_no_django() -> None:
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(SDK)])
    completed = subprocess.run(
        [sys.executable, "-c", IMPORT_EVERYTHING, json.dumps(BLOCKED), json.dumps(CORE_MODULES)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report == {"failures": {}, "attempts": [], "loaded": []}
