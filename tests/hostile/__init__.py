"""Hostile-input tests (ISSUE: schemathesis, JSON bombs, the authorization matrix)."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.urls import URLPattern, URLResolver, get_resolver

# Bookkeeping that reading with a valid key may touch; everything else must stay put.
VOLATILE_FIELDS = {"last_used_at", "last_login"}
SKIPPED_MODELS = {"sessions.session", "admin.logentry"}


def db_dump() -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every model, sorted, minus volatile bookkeeping fields."""
    dump: dict[str, list[tuple[Any, ...]]] = {}
    for model in apps.get_models():
        label = model._meta.label_lower
        if label in SKIPPED_MODELS:
            continue
        fields = [f.attname for f in model._meta.concrete_fields if f.attname not in VOLATILE_FIELDS]
        rows = model._default_manager.order_by("pk").values_list(*fields)
        dump[label] = [tuple(repr(v) for v in row) for row in rows]
    return dump


def api_routes() -> dict[str, Any]:
    """URL name → (route with <converters>, view class) for every named API route with a parameter."""
    found: dict[str, Any] = {}

    def walk(patterns: list[Any], prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                if not route.startswith(("admin/", "portal/")):
                    walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern) and pattern.name and ("<" in route or pattern.name == "events"):
                found[pattern.name] = (route, getattr(pattern.callback, "view_class", None))

    walk(get_resolver().url_patterns, "")
    return found
