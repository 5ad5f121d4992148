"""The hand-written statements name each model's columns literally: they must be the
model's fields, in its order (Model.from_db expects it), and whole rows where whole
instances are read; a renamed or added field fails here, not in production."""

from __future__ import annotations

from typing import Any, cast

import pytest
from django.db.models import Field, Model

from toolcalls import statements

WHOLE_ROWS = [statements.USER, statements.API_KEY, statements.ACCESS_TOKEN, statements.RELATION]
PARTS = [*WHOLE_ROWS, statements.MESSAGING_AGENT, statements.TOOLS_AGENT]


def columns(model: type[Model], fields: tuple[str, ...]) -> list[str | None]:
    return [cast("Field[Any, Any]", model._meta.get_field(name)).column for name in fields]


@pytest.mark.parametrize("part", WHOLE_ROWS, ids=lambda part: part[0].__name__)
def test_whole_rows_list_every_field_of_the_model_in_its_order(part: statements.Part) -> None:
    model, fields = part
    assert list(fields) == [f.name for f in model._meta.concrete_fields]


@pytest.mark.parametrize("part", PARTS, ids=lambda part: f"{part[0].__name__}{len(part[1])}")
def test_every_listed_field_is_the_models_in_its_order(part: statements.Part) -> None:
    model, fields = part
    order = [f.name for f in model._meta.concrete_fields]
    assert sorted(fields, key=order.index) == list(fields) and len(set(fields)) == len(fields)


def test_the_selects_name_those_columns_in_that_order() -> None:
    def listed(sql: str, alias: str) -> list[str]:
        select = sql.split("FROM")[0].replace("SELECT", "")
        names = [name.strip() for name in select.replace(statements._RELATION_COLUMNS, "").split(",")]
        return [name.split(".")[1] for name in names if name.startswith(f"{alias}.")]

    assert listed(statements._API_KEYS_BY_PREFIX, "k") == columns(*statements.API_KEY)
    assert listed(statements._API_KEYS_BY_PREFIX, "u") == columns(*statements.USER)
    assert listed(statements._ACCESS_TOKENS_BY_PREFIX, "t") == columns(*statements.ACCESS_TOKEN)
    assert listed(statements._ACCESS_TOKENS_BY_PREFIX, "k") == columns(*statements.API_KEY)
    relation = [name.strip().split(".")[1] for name in statements._RELATION_COLUMNS.split(",")]
    assert relation == columns(*statements.RELATION)
    for agent, sql in statements._RELATION_WITH_AGENT.items():
        assert listed(sql, "a") == columns(*agent)
