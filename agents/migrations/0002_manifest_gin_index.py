"""GIN index (jsonb_path_ops) on the manifest for discovery's JSONB containment.

PostgreSQL only: SQLite has no JSON containment and discovery there uses the
denormalised index columns instead.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

INDEX = "agents_agent_manifest_gin"


def create(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {INDEX} ON agents_agent USING gin (capability_manifest jsonb_path_ops)")


def drop(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [("agents", "0001_initial")]
    operations = [migrations.RunPython(create, drop)]
