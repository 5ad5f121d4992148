"""Hand-written SELECTs on the hot paths, read into model instances the ORM's way.

Django compiles a queryset to SQL on every evaluation. For a two-table lookup that is
~0.4 ms of Python, more than the round trip to PostgreSQL; the relay's two lookups per
message (API key, relation) spent ~2.4 ms there. Here the SQL is written once, and rows
go through the same converters the ORM applies (JSON, UUIDs and datetimes on SQLite), so
the instances are indistinguishable from a queryset's, with only the listed fields
loaded (others load on access, as with ``.only()``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import Model
from django.db.models.sql import Query


@dataclass(frozen=True)
class Columns:
    """``fields`` of ``model`` selected from the table aliased ``alias`` (in the model's
    field order, which ``Model.from_db`` expects)."""

    model: type[Model]
    alias: str
    fields: tuple[str, ...]
    _attnames: list[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        wanted = {self.model._meta.get_field(name) for name in self.fields}
        ordered = [f for f in self.model._meta.concrete_fields if f in wanted]
        if len(ordered) != len(self.fields):
            raise ValueError(f"{self.fields} are not distinct concrete fields of {self.model.__name__}")
        object.__setattr__(self, "fields", tuple(f.name for f in ordered))
        object.__setattr__(self, "_attnames", [f.attname for f in ordered])

    def sql(self) -> str:
        quote = connection.ops.quote_name
        return ", ".join(f"{quote(self.alias)}.{quote(self.model._meta.get_field(name).column)}"
                         for name in self.fields)

    def table(self) -> str:
        quote = connection.ops.quote_name
        return f"{quote(self.model._meta.db_table)} {quote(self.alias)}"


_converters: dict[tuple[str, tuple[Columns, ...]], Any] = {}


def _compiler_and_converters(parts: tuple[Columns, ...]) -> tuple[Any, Any]:
    key = (connection.vendor, parts)
    found = _converters.get(key)
    if found is None:
        compiler = connection.ops.compiler("SQLCompiler")(Query(parts[0].model), connection, connection.alias)
        columns = [part.model._meta.get_field(name).get_col(part.alias) for part in parts for name in part.fields]
        found = _converters[key] = (compiler, compiler.get_converters(columns))
    return found


def read(sql: str, params: Sequence[Any], *parts: Columns) -> list[tuple[Model, ...]]:
    """Run ``sql`` (its select list: each part's ``sql()`` in order) and return one tuple
    of instances per row. Parameters must already be database values
    (``Field.get_db_prep_value``)."""
    compiler, converters = _compiler_and_converters(parts)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows: Any = cursor.fetchall()
    if converters:
        rows = compiler.apply_converters(rows, converters)
    result = []
    for row in rows:
        start = 0
        instances = []
        for part in parts:
            end = start + len(part.fields)
            instances.append(part.model.from_db(connection.alias, part._attnames, tuple(row[start:end])))
            start = end
        result.append(tuple(instances))
    return result


def db_value(model: type[Model], name: str, value: Any) -> Any:
    """``value`` as a parameter for ``model.name`` on this database (a UUID is hex on SQLite)."""
    return model._meta.get_field(name).get_db_prep_value(value, connection)
