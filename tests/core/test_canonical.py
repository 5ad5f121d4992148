from __future__ import annotations

import hashlib
import json
import random
import struct
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from hashee_sdk.core.canonical import (
    MAX_SAFE_INTEGER,
    CanonicalizationError,
    canonical_hash,
    canonicalize,
    pointer_token,
    sha256_hex,
)


def from_hex(bits: str) -> float:
    return float(struct.unpack(">d", bytes.fromhex(bits))[0])


# RFC 8785 Appendix B: IEEE-754 bit patterns and their canonical text.
RFC_NUMBERS = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


@pytest.mark.parametrize(("bits", "expected"), RFC_NUMBERS)
def test_it_serializes_numbers_like_rfc_8785_appendix_b(bits: str, expected: str) -> None:
    assert canonicalize(from_hex(bits)) == expected.encode()


@pytest.mark.parametrize(
    ("literal", "expected"),
    [
        ("1e21", "1e+21"),
        ("1E-7", "1e-7"),
        ("-0", "0"),
        ("-0.0", "0"),
        ("4.50", "4.5"),
        ("2e-3", "0.002"),
        ("1E30", "1e+30"),
    ],
)
def test_it_serializes_number_literals_the_ecmascript_way(literal: str, expected: str) -> None:
    assert canonicalize(json.loads(literal)) == expected.encode()


def test_it_matches_the_rfc_8785_section_3_2_example() -> None:
    source = (
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        ' "literals": [null, true, false]}'
    )
    expected = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    assert canonicalize(json.loads(source)) == expected.encode("utf-8")


def test_it_sorts_keys_by_utf16_code_units_including_non_bmp() -> None:
    value = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    keys = [k for k in json.loads(canonicalize(value))]
    assert keys == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


def test_it_escapes_only_what_rfc_8785_requires() -> None:
    assert canonicalize('\u001f\t\n"\\/é😀') == '"\\u001f\\t\\n\\"\\\\/é😀"'.encode()


def test_it_writes_no_whitespace() -> None:
    assert canonicalize({"b": [1, 2], "a": {"c": None}}) == b'{"a":{"c":null},"b":[1,2]}'


def test_it_hashes_the_canonical_bytes_with_sha256() -> None:
    value = {"b": 1, "a": [True]}
    expected = hashlib.sha256(b'{"a":[true],"b":1}').hexdigest()
    assert canonical_hash(value) == expected == sha256_hex(canonicalize(value))
    assert len(expected) == 64 and expected == expected.lower()


def test_it_accepts_the_safe_integer_bounds() -> None:
    assert canonicalize([MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER]) == b"[9007199254740991,-9007199254740991]"


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"a": [1, {"b": 2**53}]}, "/a/1/b"),
        ([-(2**53)], "/0"),
        ({"a/b": {"~": 2**60}}, "/a~1b/~0"),
        ({"x": 1, "y": [float("nan")]}, "/y/0"),
        ({"y": float("inf")}, "/y"),
        ({"z": {1: "non-string key"}}, "/z"),
        ({"s": {1, 2}}, "/s"),
        ({"bytes": b"x"}, "/bytes"),
        ({"lone": "\ud800"}, "/lone"),
    ],
)
def test_it_reports_the_pointer_of_the_first_value_it_cannot_canonicalize(value: Any, path: str) -> None:
    with pytest.raises(CanonicalizationError) as caught:
        canonicalize(value)
    assert caught.value.path == path
    assert caught.value.message


def test_big_integer_error_says_why() -> None:
    with pytest.raises(CanonicalizationError) as caught:
        canonicalize({"tools": [{"timeout_ms": 2**53}]})
    assert caught.value.path == "/tools/0/timeout_ms"
    assert "2^53" in caught.value.message
    assert isinstance(caught.value, ValueError)


def test_it_reports_the_first_offender_in_document_order() -> None:
    with pytest.raises(CanonicalizationError) as caught:
        canonicalize({"a": [1, 2**60], "b": 2**60})
    assert caught.value.path == "/a/1"


def test_it_does_not_crash_on_values_nested_too_deep_for_recursion() -> None:
    value: Any = 2**60
    for _ in range(5000):
        value = [value]
    with pytest.raises(CanonicalizationError) as caught:
        canonicalize(value)
    assert caught.value.path == "/0" * 5000


def test_pointer_token_escapes_tilde_before_slash() -> None:
    assert pointer_token("~/") == "~0~1"


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=30,
)


def reorder(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {key: reorder(member, rng) for key, member in items}
    if isinstance(value, list):
        return [reorder(item, rng) for item in value]
    return value


@settings(max_examples=300, deadline=None)
@given(value=json_values, rng=st.randoms(use_true_random=False), indent=st.sampled_from([None, 0, 2, "\t"]))
def test_the_hash_ignores_key_order_and_whitespace(value: Any, rng: random.Random, indent: int | str | None) -> None:
    separators = rng.choice([(",", ":"), (", ", ": "), (" ,\n", " :  ")])
    text = json.dumps(reorder(value, rng), indent=indent, separators=separators, ensure_ascii=rng.random() < 0.5)
    assert canonical_hash(json.loads(text)) == canonical_hash(value)


def has_float_written_as_big_integer(value: Any) -> bool:
    if isinstance(value, float):
        return value.is_integer() and 2**53 <= abs(value) < 1e21
    if isinstance(value, dict):
        return any(map(has_float_written_as_big_integer, value.values()))
    if isinstance(value, list):
        return any(map(has_float_written_as_big_integer, value))
    return False


@settings(max_examples=200, deadline=None)
@given(value=json_values.filter(lambda v: not has_float_written_as_big_integer(v)))
def test_canonical_bytes_are_json_that_canonicalizes_to_itself(value: Any) -> None:
    canonical = canonicalize(value)
    assert canonicalize(json.loads(canonical)) == canonical


def test_a_float_beyond_2_53_canonicalizes_but_its_integer_spelling_does_not() -> None:
    # RFC 8785 writes the double 2^53 as 9007199254740992; read back, that is an integer
    # outside ±(2^53 - 1), which the SPEC rejects. The round trip above excludes such floats.
    assert canonicalize(2.0**53) == b"9007199254740992"
    with pytest.raises(CanonicalizationError):
        canonicalize(json.loads(b"9007199254740992"))


_json_scalars = st.none() | st.booleans() | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1) | st.text()
_json_values = st.recursive(
    _json_scalars | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_json_values)
def test_the_fast_path_writes_exactly_what_rfc8785_writes(value: Any) -> None:
    try:
        expected = rfc8785.dumps(value)
    except Exception:
        return
    assert canonicalize(value) == expected


@pytest.mark.parametrize("value", [
    {"\U0001f600": 1, "\ufb01": 2},  # non-BMP key: UTF-16 order differs from code points
    {"a": "\x00\x1f\x7f\u2028\"\\\b\f\n\r\t"},
    {"n": 2**53 - 1, "m": -(2**53 - 1), "t": True, "f": False, "z": None, "l": [1, "x", {}]},
])
def test_fast_and_slow_paths_agree_on_edge_cases(value: Any) -> None:
    assert canonicalize(value) == rfc8785.dumps(value)
