"""The layout is the architecture (docs/architecture.md): imports point one way.

``hashee/`` is the project package — settings, URLs, ASGI, checks and the plumbing every
app shares — and imports no app, except where the project is wired together (its
settings, URLs and ASGI entry point). ``hashee/core/`` is pure Python: no Django, no app,
no server module. Imports inside functions count too: they are how cycles hide.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ("agents", "relations", "toolcalls", "portal", "eventlog")
WIRING = {"hashee/settings.py", "hashee/urls.py", "hashee/asgi.py"}
FRAMEWORKS = ("django", "rest_framework", "channels", "drf_spectacular", "asgiref", "csp", "whitenoise")


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth of its code (absolute imports only)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def top(module: str) -> str:
    return module.split(".")[0]


def project_modules() -> list[Path]:
    return sorted(path for path in (ROOT / "hashee").rglob("*.py")
                  if "migrations" not in path.parts and str(path.relative_to(ROOT)) not in WIRING)


@pytest.mark.parametrize("path", project_modules(), ids=lambda path: str(path.relative_to(ROOT)))
def test_the_project_package_imports_no_app(path: Path) -> None:
    assert {module for module in imported_modules(path) if top(module) in APPS} == set()


@pytest.mark.parametrize("path", sorted((ROOT / "hashee" / "core").rglob("*.py")),
                         ids=lambda path: str(path.relative_to(ROOT)))
def test_the_pure_core_imports_no_framework_and_no_server_module(path: Path) -> None:
    imported = imported_modules(path)
    server = {module for module in imported
              if top(module) in APPS or (top(module) == "hashee" and not module.startswith("hashee.core"))}
    assert {module for module in imported if top(module) in FRAMEWORKS} == set()
    assert server == set()


def test_a_forbidden_import_is_seen_even_inside_a_function(tmp_path: Path) -> None:
    hidden = tmp_path / "hidden.py"
    hidden.write_text("def f():\n    from agents.models import Agent\n    import django.db\n")

    assert imported_modules(hidden) == {"agents.models", "django.db"}


def test_the_project_package_owns_no_models() -> None:
    from django.apps import apps

    assert list(apps.get_app_config("hashee").get_models()) == []


def test_every_event_type_is_documented_in_the_openapi_document() -> None:
    from hashee.openapi import EVENT_TYPES
    from hashee_sdk.core.event_types import EventType

    assert set(EVENT_TYPES) == set(EventType)
