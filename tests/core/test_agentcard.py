from __future__ import annotations

import copy
from typing import Any

import pytest

from hashee_sdk.core.agentcard import FLAGS_EXTENSION_URI, build_agent_card, humanize

MANIFEST: dict[str, Any] = {
    "schema_version": "1.0",
    "agent_version": "1.2.0",
    "tools": [
        {
            "name": "read_file",
            "description_i18n_key": "agent.cap.read_file.description",
            "description_fallback": "Read a file you pick.",
            "input_schema": {"type": "object", "additionalProperties": False},
            "permission_scope": "filesystem:read",
        },
        {
            "name": "where_am_i",
            "description_i18n_key": "agent.cap.where_am_i.description",
            "input_schema": {"type": "object", "additionalProperties": False},
            "permission_scope": "location:read",
        },
    ],
    "permission_scopes": [
        {"id": "filesystem:read", "label_i18n_key": "a.fs", "sensitivity": "medium"},
        {"id": "location:read", "label_i18n_key": "a.loc", "sensitivity": "high"},
    ],
    "capability_flags": {"supports_streaming": True, "supports_voice": True},
}

SEED_KEYS = {
    "name",
    "description",
    "url",
    "provider",
    "version",
    "documentationUrl",
    "capabilities",
    "authentication",
    "defaultInputModes",
    "defaultOutputModes",
    "skills",
}
# JSON names of the A2A v1.0 AgentCard message (a2a.proto), which the SDK parses strictly.
V1_CARD_FIELDS = {
    "name",
    "description",
    "supportedInterfaces",
    "provider",
    "version",
    "documentationUrl",
    "capabilities",
    "securitySchemes",
    "securityRequirements",
    "defaultInputModes",
    "defaultOutputModes",
    "skills",
    "signatures",
    "iconUrl",
}
V1_SKILL_FIELDS = {"id", "name", "description", "tags", "examples", "inputModes", "outputModes", "securityRequirements"}
V1_CAPABILITY_FIELDS = {"streaming", "pushNotifications", "extensions", "extendedAgentCard"}


def card(shape: Any = "combined", **overrides: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "manifest": MANIFEST,
        "name": "Reader",
        "description": "Reads things for you.",
        "url": "https://hashee.example/agents/42",
        "version": 3,
        "documentation_url": "https://hashee.example/docs/agents/42",
        "shape": shape,
    }
    arguments.update(overrides)
    return build_agent_card(**arguments)


def test_the_seed_card_has_exactly_the_seed_fields() -> None:
    seed = card("seed")
    assert set(seed) == SEED_KEYS
    assert seed["url"] == "https://hashee.example/agents/42"
    assert seed["provider"] == {"organization": "Hashee", "url": "https://hashee.example"}
    assert seed["authentication"] == {"schemes": ["Bearer"]}
    assert seed["capabilities"] == {"streaming": True, "pushNotifications": False, "stateTransitionHistory": False}


def test_the_v1_card_uses_only_a2a_v1_fields() -> None:
    v1 = card("v1")
    assert set(v1) <= V1_CARD_FIELDS
    assert {"supportedInterfaces", "securitySchemes", "securityRequirements"} <= set(v1)
    assert set(v1["capabilities"]) <= V1_CAPABILITY_FIELDS
    assert all(set(skill) <= V1_SKILL_FIELDS for skill in v1["skills"])
    assert v1["supportedInterfaces"] == [
        {"url": "https://hashee.example/agents/42", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
    ]
    (scheme_name,) = v1["securitySchemes"]
    assert v1["securitySchemes"][scheme_name]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    assert v1["securityRequirements"] == [{"schemes": {scheme_name: {"list": []}}}]


def test_the_combined_card_carries_both_the_seed_and_the_v1_fields() -> None:
    combined = card("combined")
    assert set(combined) == SEED_KEYS | {"supportedInterfaces", "securitySchemes", "securityRequirements"}
    assert combined["authentication"] == {"schemes": ["Bearer"]}
    assert combined["capabilities"]["stateTransitionHistory"] is False
    assert combined["capabilities"]["extensions"] == card("v1")["capabilities"]["extensions"]
    assert combined["skills"] == card("seed")["skills"] == card("v1")["skills"]


def test_tools_become_skills_tagged_with_scope_and_sensitivity() -> None:
    assert card()["skills"] == [
        {
            "id": "read_file",
            "name": "Read file",
            "description": "Read a file you pick.",
            "tags": ["filesystem:read", "sensitivity:medium"],
            "inputModes": ["application/json"],
            "outputModes": ["application/json"],
        },
        {
            "id": "where_am_i",
            "name": "Where am i",
            "description": "agent.cap.where_am_i.description",
            "tags": ["location:read", "sensitivity:high"],
            "inputModes": ["application/json"],
            "outputModes": ["application/json"],
        },
    ]


def test_flags_become_capabilities_with_missing_flags_false() -> None:
    capabilities = card("v1")["capabilities"]
    assert capabilities["streaming"] is True
    (extension,) = capabilities["extensions"]
    assert extension["uri"] == FLAGS_EXTENSION_URI and extension["required"] is False
    assert extension["params"] == {
        "supports_streaming": True,
        "supports_artifacts": False,
        "supports_voice": True,
        "supports_group_chat": False,
    }


def test_a_manifest_without_flags_does_not_stream() -> None:
    manifest = copy.deepcopy(MANIFEST)
    del manifest["capability_flags"]
    assert card(manifest=manifest)["capabilities"]["streaming"] is False


@pytest.mark.parametrize("shape", ["combined", "v1", "seed"])
def test_the_version_is_a_string_and_documentation_is_optional(shape: str) -> None:
    built = card(shape, documentation_url=None, version=7, provider_name="Acme")
    assert built["version"] == "7"
    assert "documentationUrl" not in built
    assert built["provider"]["organization"] == "Acme"


def test_an_agent_without_tools_has_no_skills() -> None:
    assert card(manifest={"tools": [], "permission_scopes": []})["skills"] == []


@pytest.mark.parametrize(("name", "human"), [("read_file", "Read file"), ("notify", "Notify"), ("a__b", "A b")])
def test_humanize_turns_tool_names_into_words(name: str, human: str) -> None:
    assert humanize(name) == human


def test_the_official_a2a_sdk_parses_the_v1_card() -> None:
    from a2a.types import a2a_pb2  # a dev requirement: never skipped
    from google.protobuf import json_format
    parsed = json_format.ParseDict(card("v1"), a2a_pb2.AgentCard())
    assert parsed.name == "Reader"
    assert [skill.id for skill in parsed.skills] == ["read_file", "where_am_i"]
