"""The validator's problems in the page's language.

hashee_sdk.core.manifest is pure Python and speaks English (its messages are part of the
API's error details, which stay English). The portal translates them for its readers:
each message the core writes is matched by its code and wording, and its variable parts
(names, sizes, types) are carried into the translated sentence. A message no pattern
knows keeps its English text after a translated lead, so nothing is lost.
"""

from __future__ import annotations

import re
from typing import Any

from django.utils.translation import get_language
from django.utils.translation import gettext_lazy as _

Q = r"(?P<%s>'.*'|\".*\")"  # a value as the core quotes it (Python repr)


def _pattern(text: str) -> re.Pattern[str]:
    return re.compile(text)


PATTERNS: list[tuple[str, re.Pattern[str], Any]] = [
    ("UNKNOWN_FIELD", _pattern(rf"Unknown member {Q % 'name'}; allowed here: (?P<allowed>.+)\."),
     _("Unknown member %(name)s; allowed here: %(allowed)s.")),
    ("REQUIRED", _pattern(r"The member (?P<name>\S+) is required\."), _("The member %(name)s is required.")),
    ("INVALID_VALUE", _pattern(rf"schema_version must be exactly (?P<want>'[^']*'), not {Q % 'got'}\."),
     _("schema_version must be exactly %(want)s, not %(got)s.")),
    ("INVALID_SEMVER", _pattern(rf"agent_version {Q % 'got'} is not a SemVer 2\.0\.0 version such as 1\.4\.0\."),
     _("agent_version %(got)s is not a SemVer 2.0.0 version such as 1.4.0.")),
    ("INVALID_TYPE", _pattern(r"A permission scope must be an object, not (?P<type>.+)\."),
     _("A permission scope must be an object, not %(type)s.")),
    ("TOO_LONG", _pattern(r"The scope id is (?P<n>\d+) characters; at most (?P<max>\d+) are allowed\."),
     _("The scope id is %(n)s characters; at most %(max)s are allowed.")),
    ("PATTERN_MISMATCH", _pattern(rf"The scope id {Q % 'id'} must look like resource:action \((?P<pattern>.+)\)\."),
     _("The scope id %(id)s must look like resource:action (%(pattern)s).")),
    ("RESERVED_SCOPE_PREFIX", _pattern(rf"The scope id {Q % 'id'} uses a prefix reserved for the platform "
                                       r"\(hashee:, system:\)\."),
     _("The scope id %(id)s uses a prefix reserved for the platform (hashee:, system:).")),
    ("DUPLICATE", _pattern(rf"The scope id {Q % 'id'} is declared more than once\."),
     _("The scope id %(id)s is declared more than once.")),
    ("INVALID_VALUE", _pattern(rf"sensitivity must be one of low, medium, high, not {Q % 'got'}\."),
     _("sensitivity must be one of low, medium, high, not %(got)s.")),
    ("SENSITIVITY_BELOW_PRESET", _pattern(r"The preset scope (?P<id>\S+) has platform sensitivity (?P<floor>\w+); "
                                          r"it cannot be declared (?P<level>\w+)\."),
     _("The preset scope %(id)s has platform sensitivity %(floor)s; it cannot be declared %(level)s.")),
    ("TOO_LONG", _pattern(r"(?P<key>\w+) is longer than (?P<max>\d+) characters\."),
     _("%(key)s is longer than %(max)s characters.")),
    ("PATTERN_MISMATCH", _pattern(rf"(?P<key>\w+) {Q % 'value'} must be dotted lowercase words such as "
                                  r"agent\.cap\.read_file\.label\."),
     _("%(key)s %(value)s must be dotted lowercase words such as agent.cap.read_file.label.")),
    ("INVALID_VALUE", _pattern(r"(?P<key>\w+) must not be empty\."), _("%(key)s must not be empty.")),
    ("FALLBACK_EMPTY", _pattern(r"(?P<key>\w+) is empty; clients will show the key or id instead\."),
     _("%(key)s is empty; clients will show the key or id instead.")),
    ("FALLBACK_TOO_LONG", _pattern(r"(?P<key>\w+) is (?P<n>\d+) characters; clients may cut it short after "
                                   r"(?P<max>\d+), so the first ones should say what matters\."),
     _("%(key)s is %(n)s characters; clients may cut it short after %(max)s, so the first ones should say "
       "what matters.")),
    ("I18N_KEY_TOO_LONG", _pattern(r"(?P<key>\w+) is (?P<n>\d+) characters; translation tables expect at most "
                                   r"(?P<max>\d+)\."),
     _("%(key)s is %(n)s characters; translation tables expect at most %(max)s.")),
    ("TOO_LONG", _pattern(r"(?P<key>\w+) is (?P<n>\d+) characters; at most (?P<max>\d+) are allowed\."),
     _("%(key)s is %(n)s characters; at most %(max)s are allowed.")),
    ("INVALID_TYPE", _pattern(r"A tool must be an object, not (?P<type>.+)\."),
     _("A tool must be an object, not %(type)s.")),
    ("UNKNOWN_SCOPE", _pattern(rf"permission_scope {Q % 'scope'} is not one of permission_scopes\[\]\.id\."),
     _("permission_scope %(scope)s is not one of permission_scopes[].id.")),
    ("PATTERN_MISMATCH", _pattern(rf"The tool name {Q % 'name'} must match (?P<pattern>\S+) "
                                  r"\(2-32 lowercase characters\)\."),
     _("The tool name %(name)s must match %(pattern)s (2-32 lowercase characters).")),
    ("DUPLICATE", _pattern(rf"The tool name {Q % 'name'} is used more than once\."),
     _("The tool name %(name)s is used more than once.")),
    ("INVALID_TYPE", _pattern(r"timeout_ms must be a JSON integer such as 5000, not (?P<type>.+)\."),
     _("timeout_ms must be a JSON integer such as 5000, not %(type)s.")),
    ("OUT_OF_RANGE", _pattern(r"timeout_ms must be between 1 and (?P<max>\d+) milliseconds\."),
     _("timeout_ms must be between 1 and %(max)s milliseconds.")),
    ("INVALID_TYPE", _pattern(r"(?P<key>\w+) must be true or false, not (?P<type>.+)\."),
     _("%(key)s must be true or false, not %(type)s.")),
    ("INVALID_TYPE", _pattern(r"(?P<key>\w+) must be an object, not (?P<type>.+)\."),
     _("%(key)s must be an object, not %(type)s.")),
    ("INVALID_TYPE", _pattern(r"(?P<key>\w+) must be a string, not (?P<type>.+)\."),
     _("%(key)s must be a string, not %(type)s.")),
    ("INVALID_TYPE", _pattern(r"(?P<key>\w+) must be an array, not (?P<type>.+)\."),
     _("%(key)s must be an array, not %(type)s.")),
    ("INVALID_TYPE", _pattern(r"The manifest must be a JSON object, not (?P<type>.+)\."),
     _("The manifest must be a JSON object, not %(type)s.")),
    ("SCOPE_LABEL_FALLBACK_MISSING", _pattern(rf"The scope {Q % 'id'} has no label_fallback; "
                                              r"clients will show its id\."),
     _("The scope %(id)s has no label_fallback; clients will show its id.")),
    ("SCOPE_UNUSED", _pattern(rf"No tool uses the scope {Q % 'id'}\."), _("No tool uses the scope %(id)s.")),
    ("MANIFEST_TOO_LARGE", _pattern(r"The canonical manifest is (?P<size>\d+) bytes; the limit is (?P<max>\d+) bytes\."),
     _("The canonical manifest is %(size)s bytes; the limit is %(max)s bytes.")),
    ("MANIFEST_SIZE_WARNING", _pattern(r"The canonical manifest is (?P<size>\d+) bytes, close to the "
                                       r"(?P<max>\d+)-byte limit\."),
     _("The canonical manifest is %(size)s bytes, close to the %(max)s-byte limit.")),
    ("INVALID_VALUE", _pattern(r"The manifest is nested too deeply to be validated\."),
     _("The manifest is nested too deeply to be validated.")),
    ("INVALID_TYPE", _pattern(r'input_schema must be a JSON object: a JSON Schema with "type": "object"\.'),
     _('input_schema must be a JSON object: a JSON Schema with "type": "object".')),
    ("INPUT_SCHEMA_NOT_OBJECT", _pattern(r'input_schema must have "type": "object" at its top level\.'),
     _('input_schema must have "type": "object" at its top level.')),
    ("INVALID_TYPE", _pattern(r'output_schema must be a JSON object: a JSON Schema with "type": "object"\.'),
     _('output_schema must be a JSON object: a JSON Schema with "type": "object".')),
    ("INPUT_SCHEMA_NOT_OBJECT", _pattern(r'output_schema must have "type": "object" at its top level\.'),
     _('output_schema must have "type": "object" at its top level.')),
    ("INVISIBLE_CHARACTER", _pattern(r"(?P<what>The text|The member name) holds the invisible character "
                                     r"(?P<char>U\+[0-9A-F]+ \([^)]*\)) at position (?P<at>\d+)"
                                     r"(?: \((?P<n>\d+) such characters in all\))?; remove it\."),
     _("An invisible character, %(char)s, hides at position %(at)s of this text: remove it.")),
    ("AGENT_VERSION_NOT_BUMPED", _pattern(r"This change is breaking, but agent_version goes from (?P<old>\S+) to "
                                          r"(?P<new>\S+) without raising the major version \(SemVer: breaking "
                                          r"changes raise it\)\."),
     _("This change is breaking, but agent_version goes from %(old)s to %(new)s without raising the major version "
       "(SemVer: breaking changes raise it).")),
    ("AGENT_VERSION_NOT_BUMPED", _pattern(r"This change is breaking, but agent_version goes from (?P<old>\S+) to "
                                          r"(?P<new>\S+) without raising the minor version \(SemVer: breaking "
                                          r"changes raise it\)\."),
     _("This change is breaking, but agent_version goes from %(old)s to %(new)s without raising the minor version "
       "(SemVer: breaking changes raise it).")),
    ("INPUT_SCHEMA_NOT_CLOSED", _pattern(r'input_schema must have "additionalProperties": false at its top level\.'),
     _('input_schema must have "additionalProperties": false at its top level.')),
]
TYPE_TEXT: dict[str, Any] = {
    "null": "null", "a boolean": _("a boolean"), "an integer": _("an integer"), "a number": _("a number"),
    "a string": _("a string"), "an array": _("an array"), "an object": _("an object"),
}
# A translated lead for what no pattern knows (jsonschema's own wording, a syntax error).
CODE_TEXT: dict[str, Any] = {
    "INVALID_JSON_SCHEMA": _("Not a valid JSON Schema (Draft 2020-12)"),
    "REMOTE_REF": _("Only references inside this schema are allowed"),
    "UNRESOLVABLE_REF": _("This reference points at nothing"),
    "NOT_CANONICALIZABLE": _("This value cannot be hashed (RFC 8785)"),
    "MALFORMED_JSON": _("Not valid JSON"),
}


def problem_message(code: str, message: str) -> str:
    """``message`` (the core's English) in the active language."""
    if (get_language() or "en").startswith("en"):
        return message
    for known, pattern, template in PATTERNS:
        found = pattern.fullmatch(message) if known == code else None
        if found:
            values = {k: str(TYPE_TEXT.get(v, v)) if k == "type" else v for k, v in found.groupdict().items()}
            return str(template) % values
    lead = CODE_TEXT.get(code)
    return f"{lead}: {message}" if lead else message


def localized(issues: list[dict[str, str]]) -> list[dict[str, str]]:
    """Problems as the API gives them ({path, code, message}), with the message translated."""
    return [{**issue, "message": problem_message(issue["code"], issue["message"])} for issue in issues]
