from __future__ import annotations

import json
import time
from typing import Any

import pytest

from hashee_sdk.core.strictjson import MAX_DEPTH, MalformedJSON, loads_strict


def nested(depth: int, open_: str = "[", close: str = "]") -> str:
    return open_ * depth + close * depth


HOSTILE: list[tuple[str, bytes | str, str]] = [
    ("duplicate key at the top", '{"a": 1, "a": 2}', "Duplicate"),
    ("duplicate key nested deep", '{"x": [{"y": {"k": 1, "k": 1}}]}', "Duplicate"),
    ("NaN", '{"a": NaN}', "NaN"),
    ("Infinity", "[Infinity]", "Infinity"),
    ("-Infinity", "[-Infinity]", "Infinity"),
    ("float overflowing to inf", '{"a": 1e400}', "overflows"),
    ("negative float overflowing to -inf", "[-1e400]", "overflows"),
    ("integer longer than the int conversion limit", "[" + "9" * 5000 + "]", "number"),
    ("lone high surrogate in a value", '{"a": "x\\ud800y"}', "lone surrogate"),
    ("lone low surrogate in a value", '["\\udc00"]', "lone surrogate"),
    ("lone high surrogate at the end of a value", '["abc\\uD83D"]', "lone surrogate"),
    ("reversed surrogate pair", '["\\ude00\\ud83d"]', "lone surrogate"),
    ("lone surrogate in a key", '{"\\ud800": 1}', "lone surrogate"),
    ("NUL in a value", '{"a": "x\\u0000"}', "\\u0000"),
    ("NUL in a key", '{"k\\u0000": 1}', "\\u0000"),
    ("raw control character in a string", '["a\x01b"]', "Invalid control character"),
    ("depth 65", nested(MAX_DEPTH + 1), "nested deeper than 64"),
    ("depth 65 of objects", '{"a":' * 65 + "1" + "}" * 65, "nested deeper than 64"),
    ("100000 open brackets", "[" * 100_000, "nested deeper than 64"),
    ("100000 balanced brackets", nested(100_000), "nested deeper than 64"),
    ("invalid UTF-8", b'{"a": "\xff\xfe"}', "UTF-8"),
    ("truncated UTF-8 sequence", b'["\xe4\xb8"]', "UTF-8"),
    ("UTF-8-encoded surrogate", b'["\xed\xa0\x80"]', "UTF-8"),
    ("empty body", b"", "empty"),
    ("whitespace only", "  \n\t ", "empty"),
    ("trailing garbage", '{"a": 1} x', "Extra data"),
    ("two documents", "[1][2]", "Extra data"),
    ("single quotes", "{'a': 1}", "line 1"),
    ("trailing comma", "[1, 2,]", "line 1"),
    ("unterminated string", '["abc', "Unterminated"),
    ("byte order mark", b'\xef\xbb\xbf{"a": 1}', "BOM"),
    ("str with a lone surrogate character", '["\ud800"]', "lone surrogate"),
]


@pytest.mark.parametrize(("data", "fragment"), [case[1:] for case in HOSTILE], ids=[case[0] for case in HOSTILE])
def test_it_rejects_hostile_input_with_malformed_json(data: bytes | str, fragment: str) -> None:
    with pytest.raises(MalformedJSON) as caught:
        loads_strict(data)
    assert fragment in caught.value.message
    assert str(caught.value) == caught.value.message


VALID: list[tuple[str, str]] = [
    ("object", '{"a": 1, "b": [true, false, null], "c": {"d": "e"}}'),
    ("top-level scalar", "42"),
    ("top-level string", '"hello"'),
    ("big integer beyond 2^53", "[9007199254740993, -9007199254740993]"),
    ("tiny float underflows to zero", "[1e-400]"),
    ("valid surrogate pair", '["\\ud83d\\ude00"]'),
    ("escaped backslash before u0000 is not a NUL", '["\\\\u0000"]'),
    ("escaped backslash before ud800 is not a surrogate", '{"\\\\ud800": "\\\\udc00"}'),
    ("brackets and quotes inside strings", '{"a": "[[[{{{", "b": "\\"]]]", "c": "\\\\"}'),
    ("depth 64", nested(MAX_DEPTH)),
    ("depth 64 of objects", '{"a":' * 64 + "1" + "}" * 64),
    ("depth 64 with many brackets inside strings", "[" * 64 + '"' + "[" * 500 + '"' + "]" * 64),
    ("many shallow containers", json.dumps([[{"a": [1]}] for _ in range(500)])),
    ("same key in sibling objects", '[{"a": 1}, {"a": 2}]'),
    ("unicode text", '{"名前": "ハッシー", "emoji": "😀"}'),
]


@pytest.mark.parametrize("text", [case[1] for case in VALID], ids=[case[0] for case in VALID])
def test_it_parses_valid_documents_like_json_loads(text: str) -> None:
    expected = json.loads(text)
    assert loads_strict(text) == expected
    assert loads_strict(text.encode("utf-8")) == expected


def test_it_keeps_big_integers_exact() -> None:
    assert loads_strict("[9007199254740993]") == [9007199254740993]


def test_it_reads_tiny_floats_as_zero() -> None:
    assert loads_strict("1e-400") == 0.0


def test_it_honours_a_custom_max_depth() -> None:
    assert loads_strict(nested(3), max_depth=3) == [[[]]]
    with pytest.raises(MalformedJSON):
        loads_strict(nested(4), max_depth=3)


def test_it_accepts_bytearray() -> None:
    assert loads_strict(bytearray(b'{"a": 1}')) == {"a": 1}


def test_it_says_where_a_syntax_error_is() -> None:
    with pytest.raises(MalformedJSON) as caught:
        loads_strict('{\n  "a": 1,\n  "b": }')
    assert "line 3" in caught.value.message


def test_it_says_where_a_lone_surrogate_is() -> None:
    with pytest.raises(MalformedJSON) as caught:
        loads_strict('{"tools": [{"a/b": "\\ud800"}]}')
    assert "/tools/0/a~1b" in caught.value.message


@pytest.mark.parametrize("data", ["[" * 100_000, nested(100_000), "[" * 65 + '"' + '\\"' * 50_000])
def test_it_rejects_very_deep_input_quickly(data: str) -> None:
    started = time.perf_counter()
    with pytest.raises(MalformedJSON):
        loads_strict(data)
    assert time.perf_counter() - started < 0.25


def test_it_parses_a_large_body_with_little_overhead_over_json_loads() -> None:
    body = json.dumps(_large_document(), indent=2).encode()
    assert 100_000 < len(body) < 140_000
    plain = _best_of(lambda: json.loads(body))
    strict = _best_of(lambda: loads_strict(body))
    # The SPEC budget is well under 1 ms; the bound is loose so a busy CI machine passes.
    assert strict - plain < 0.005


def _large_document() -> dict[str, Any]:
    properties = {f"field_{j}": {"type": "string", "description": f"Field {j} of the tool." * 3} for j in range(12)}
    tool = {"name": "tool", "input_schema": {"type": "object", "properties": properties}}
    return {"tools": [dict(tool, name=f"tool_{i}") for i in range(60)]}


def _best_of(call: Any, rounds: int = 7) -> float:
    timings = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        timings.append(time.perf_counter() - started)
    return min(timings)
