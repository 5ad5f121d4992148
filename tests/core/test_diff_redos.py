"""An owner's catastrophic regex cannot freeze the diff engine (issue 14).

Each diff that could hang runs in a child process (tests.in_child): a hang shows as a
timeout of a generous bounded wait; speed is measured in bench/redos.py.
"""

from __future__ import annotations

from typing import Any

import jsonschema_rs

from hashee_sdk.core.diff import diff_manifests
from hashee_sdk.core.examples import ExampleBuilder, Probe, WorkBudget
from tests.core.test_diff import root, with_schema
from tests.in_child import in_child

EVIL = "^(?:|a|A|0|-| |aaaa|abc123|not-a-valid-value)$|^(a|a)*b$"
BACKREFERENCE = r"^(a|aa)+\1b$"


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    return diff_manifests(with_schema(old), with_schema(new)).changes


def validator(schema: Any) -> Any:
    return jsonschema_rs.Draft202012Validator(schema, pattern_options=jsonschema_rs.RegexOptions())


def test_a_catastrophic_pattern_still_gets_its_change_and_a_verified_example() -> None:
    old = root(p={"type": "string", "maxLength": 300})
    new = root(p={"type": "string", "maxLength": 300, "pattern": EVIL})

    (change,) = in_child(changes, old, new)

    assert (change["rule"], change["breaking"]) == ("SCHEMA_CONSTRAINT_NARROWED", True)
    assert change["example"] == {"p": "a" * 256}
    assert validator(old).is_valid(change["example"]) and not validator(new).is_valid(change["example"])


def test_a_pattern_that_needs_backtracking_gets_no_example_but_its_change() -> None:
    old = root(p={"type": "string"})
    new = root(p={"type": "string", "pattern": BACKREFERENCE})

    (change,) = in_child(changes, old, new)

    assert (change["rule"], change["path"].rsplit("/", 1)[-1], change["breaking"]) == (
        "SCHEMA_CONSTRAINT_NARROWED", "pattern", True)
    assert "example" not in change


def test_a_catastrophic_pattern_property_does_not_hang_the_classification() -> None:
    name = "a" * 40
    old = root(o={"type": "object", "properties": {name: {"type": "string"}}})
    new = root(o={"type": "object", "patternProperties": {"^(a|a)*b$": {"type": "string"}},
                  "additionalProperties": False})

    found = in_child(changes, old, new)

    removed = [c for c in found if c["rule"] == "SCHEMA_PROPERTY_REMOVED"]
    assert [(c["path"].rsplit("/", 1)[-1], c["breaking"]) for c in removed] == [(name, True)]


def test_a_catastrophic_property_names_pattern_does_not_hang_the_example_search() -> None:
    names = {"a" * 40 + str(i): {"type": "string"} for i in range(3)}
    old = root(o={"type": "object", "required": sorted(names), "properties": names})
    new = root(o={"type": "object", "required": sorted(names), "properties": names,
                  "propertyNames": {"pattern": "^(a|a)*b$"}})

    (change,) = in_child(changes, old, new)

    assert (change["rule"], change["breaking"]) == ("SCHEMA_CHANGED_UNCLASSIFIED", True)
    assert validator(old).is_valid(change["example"]) and not validator(new).is_valid(change["example"])


def narrowed_tools(count: int, value: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``count`` tools whose only argument may be ``value``, then must also match ``^b$``."""
    old, new = with_schema(root()), with_schema(root())
    old["tools"], new["tools"] = [], []
    for i in range(count):
        base = {**with_schema(root())["tools"][0], "name": f"tool_{i}"}
        before = root(["p"], p={"enum": [value]})
        after = root(["p"], p={"enum": [value], "pattern": "^b$"})
        old["tools"].append({**base, "input_schema": before})
        new["tools"].append({**base, "input_schema": after})
    return old, new


def test_a_diff_whose_examples_cost_more_than_its_budget_keeps_every_change_but_leaves_later_examples_out() -> None:
    value = "a" * 5000  # each proof validates 5,000 characters against a pattern, twice
    old, new = narrowed_tools(6, value)

    found = diff_manifests(old, new).changes

    assert [c["tool"] for c in found] == [f"tool_{i}" for i in range(6)]
    assert [c.get("example") for c in found] == [{"p": value}] * 2 + [None] * 4


def test_an_example_search_the_budget_cannot_pay_for_is_left_out() -> None:
    old = root(["p"], p={"type": "string", "maxLength": 100})
    new = root(["p"], p={"type": "string", "maxLength": 10})
    probe = Probe((("p", old),), old["properties"]["p"], "replace", values=("a" * 11,))

    assert ExampleBuilder(old, new, WorkBudget(0)).build(probe) is None
    assert ExampleBuilder(old, new, WorkBudget()).build(probe) == {"p": "a" * 11}
