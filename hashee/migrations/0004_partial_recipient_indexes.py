"""The agent and audience indexes of the event log hold only the rows that name one.

On PostgreSQL the new indexes are built, and the old ones dropped, CONCURRENTLY: the log
takes every relayed message, and a plain CREATE INDEX would stop its writes while it reads
the whole table. That needs a migration outside a transaction; a run cut short leaves at
worst both sets of indexes, and running it again finishes the job. SQLite does it in one
transaction.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models, transaction

OLD = [models.Index(fields=["agent", "id"], name="hashee_even_agent_i_1433c6_idx"),
       models.Index(fields=["audience", "id"], name="hashee_even_audienc_9dd5da_idx")]
NEW = [models.Index(fields=["agent", "id"], name="hashee_event_agent_partial",
                    condition=models.Q(agent__isnull=False)),
       models.Index(fields=["audience", "id"], name="hashee_event_audience_partial",
                    condition=models.Q(audience__isnull=False))]


def _swap(schema_editor: Any, model: Any, add: list[models.Index], drop: list[models.Index]) -> None:
    if schema_editor.connection.vendor != "postgresql":
        with transaction.atomic(using=schema_editor.connection.alias):
            for index in drop:
                schema_editor.remove_index(model, index)
            for index in add:
                schema_editor.add_index(model, index)
        return
    quote = schema_editor.quote_name
    for index in add:
        # A build cut short leaves an INVALID index of this name: start it again.
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {quote(index.name)}")
        schema_editor.execute(index.create_sql(model, schema_editor, concurrently=True))
    for index in drop:
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {quote(index.name)}")


def forwards(apps: Any, schema_editor: Any) -> None:
    _swap(schema_editor, apps.get_model("hashee", "Event"), add=NEW, drop=OLD)


def backwards(apps: Any, schema_editor: Any) -> None:
    _swap(schema_editor, apps.get_model("hashee", "Event"), add=OLD, drop=NEW)


class Migration(migrations.Migration):
    atomic = False  # CREATE / DROP INDEX CONCURRENTLY cannot run inside a transaction

    dependencies = [("hashee", "0003_drop_redundant_fk_indexes")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                *(migrations.RemoveIndex(model_name="event", name=index.name) for index in OLD),
                *(migrations.AddIndex(model_name="event", index=index) for index in NEW),
            ],
            database_operations=[migrations.RunPython(forwards, backwards)],
        ),
    ]
