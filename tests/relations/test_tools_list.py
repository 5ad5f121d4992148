"""SPEC §10.1: the tools bob's relation lets DemoBot call now, as MCP, OpenAI (Chat
Completions and Responses) and Anthropic take them — for bob and the agent; mallory, alice
and strangers see nothing. Each shape is checked against the official SDK's own types."""

from __future__ import annotations

import copy
from typing import Any

import mcp.types
import pytest
from anthropic.types import ToolParam
from django.contrib.auth.models import User
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import FunctionToolParam
from openai.types.shared_params import FunctionDefinition
from pydantic import TypeAdapter
from rest_framework.test import APIClient

from agents import services as agent_services
from agents.apikey_services import api_key_create
from agents.models import Agent
from relations import services as relation_services
from relations.models import Relation
from tests.changes import breaking
from tests.conftest import client_for

pytestmark = pytest.mark.django_db

READ_FILE_SCHEMA = {"type": "object", "properties": {"path": {"type": "string", "maxLength": 1024}},
                    "required": ["path"], "additionalProperties": False}


def tools_of(api: APIClient, relation: Relation, query: str = "", **extra: Any) -> Any:
    return api.get(f"/h2a/relations/{relation.pk}/tools{query}", **extra)


def names(response: Any) -> list[str]:
    assert response.status_code == 200, response.content
    return [t["name"] for t in response.json()["tools"]]


def conforms(entry: dict[str, Any], typed: Any) -> None:
    """``entry`` is a value of the official SDK's TypedDict ``typed``: its types and required
    members, and no member the API does not know (TypedDicts would let one through)."""
    TypeAdapter(typed).validate_python(entry, strict=True)
    assert set(entry) <= typed.__required_keys__ | typed.__optional_keys__, (set(entry), typed.__name__)


def change(agent: Agent, manifest: dict[str, Any]) -> None:
    agent_services.agent_update(agent_id=agent.pk, actor=agent.owner, capability_manifest=manifest)


def test_bob_gets_an_mcp_tools_list_of_the_tools_he_granted(bob_api: APIClient, relation: Relation) -> None:
    response = tools_of(bob_api, relation)

    assert response.status_code == 200, response.content
    body = response.json()
    assert body == {"tools": [{"name": "read_file", "description": "Read a file you choose from this device",
                               "inputSchema": READ_FILE_SCHEMA}]}
    # The official MCP SDK reads every member under the name we gave it (none dropped or renamed).
    parsed = mcp.types.ListToolsResult.model_validate(body)
    assert parsed.model_dump(by_alias=True, exclude_none=True, mode="json")["tools"] == body["tools"]
    assert tools_of(bob_api, relation, "?format=mcp").json() == body


def test_the_agent_gets_the_same_list_as_openai_and_anthropic_tools(agent_api: APIClient,
                                                                   relation: Relation) -> None:
    openai = tools_of(agent_api, relation, "?format=openai")
    responses = tools_of(agent_api, relation, "?format=openai_responses")
    anthropic = tools_of(agent_api, relation, "?format=anthropic")

    assert openai.status_code == 200, openai.content
    assert openai.json() == {"tools": [{"type": "function", "function": {
        "name": "read_file", "description": "Read a file you choose from this device",
        "parameters": READ_FILE_SCHEMA}}]}
    assert responses.status_code == 200, responses.content
    assert responses.json() == {"tools": [{"type": "function", "name": "read_file",
                                           "description": "Read a file you choose from this device",
                                           "parameters": READ_FILE_SCHEMA, "strict": False}]}
    assert anthropic.json() == {"tools": [{"name": "read_file", "description": "Read a file you choose from this device",
                                           "input_schema": READ_FILE_SCHEMA}]}


def test_every_model_format_is_what_the_official_sdks_take(agent_api: APIClient, relation: Relation) -> None:
    relation_services.relation_reconsent(relation=relation, granted_scopes=["filesystem:read", "notification:send"])

    for entry in tools_of(agent_api, relation, "?format=openai").json()["tools"]:
        conforms(entry, ChatCompletionFunctionToolParam)
        conforms(entry["function"], FunctionDefinition)
    for entry in tools_of(agent_api, relation, "?format=openai_responses").json()["tools"]:
        conforms(entry, FunctionToolParam)  # the flat shape: a nested "function" would be refused here
    for entry in tools_of(agent_api, relation, "?format=anthropic").json()["tools"]:
        conforms(entry, ToolParam)
    assert len(tools_of(agent_api, relation, "?format=openai_responses").json()["tools"]) == 2


def test_descriptions_are_the_english_preset_text_else_the_fallback_else_the_key(
        alice: User, bob: User, bob_api: APIClient, manifest: dict[str, Any]) -> None:
    manifest["tools"][0]["description_i18n_key"] = "agent.scope.filesystem_read.description"
    del manifest["tools"][1]["description_fallback"]
    agent = agent_services.agent_create(owner=alice, name="Texts", capability_manifest=manifest)[0]
    relation = relation_services.relation_create(user=bob, agent_id=agent.pk,
                                                 granted_scopes=["filesystem:read", "notification:send"])

    tools = tools_of(bob_api, relation, HTTP_ACCEPT_LANGUAGE="zh-hans").json()["tools"]

    assert [(t["name"], t["description"]) for t in tools] == [
        ("read_file", "Open and read files you choose on this device."), ("send_notification", "agent.cap.send_notification.description")]


def test_a_breaking_change_withholds_the_tools_of_its_scopes_until_bob_consents_again(
        bob_api: APIClient, agent: Agent, relation: Relation, manifest: dict[str, Any]) -> None:
    relation_services.relation_reconsent(relation=relation, granted_scopes=["filesystem:read", "notification:send"])
    assert names(tools_of(bob_api, relation)) == ["read_file", "send_notification"]

    change(agent, breaking(manifest))  # read_file narrowed and filesystem:read raised: pending

    assert names(tools_of(bob_api, relation)) == ["send_notification"]
    relation.refresh_from_db()
    relation_services.relation_reconsent(relation=relation, granted_scopes=["filesystem:read", "notification:send"],
                                         acknowledged_manifest_version=2)
    assert names(tools_of(bob_api, relation)) == ["read_file", "send_notification"]


def test_a_pending_scope_that_stays_granted_still_withholds_its_tools(
        agent_api: APIClient, agent: Agent, relation: Relation, manifest: dict[str, Any]) -> None:
    narrowed = copy.deepcopy(manifest)
    narrowed["tools"][0]["input_schema"]["properties"]["path"]["maxLength"] = 64
    change(agent, narrowed)

    state = relation_services.relation_payload(Relation.objects.get(pk=relation.pk))
    assert state["granted_scopes"] == ["filesystem:read"] and state["pending_scopes"] == ["filesystem:read"]
    assert names(tools_of(agent_api, relation)) == []


def test_a_paused_agent_offers_nothing_and_a_deprecated_one_still_serves_its_relations(
        bob_api: APIClient, agent: Agent, relation: Relation) -> None:
    agent_services.agent_set_status(agent=agent, status="paused", actor=agent.owner)
    assert names(tools_of(bob_api, relation)) == []

    agent_services.agent_set_status(agent=agent, status="deprecated", actor=agent.owner)
    assert names(tools_of(bob_api, relation)) == ["read_file"]


def test_a_revoked_relation_offers_nothing(bob_api: APIClient, relation: Relation) -> None:
    relation_services.relation_revoke(relation=relation)

    assert names(tools_of(bob_api, relation)) == []


def test_anyone_but_the_relations_agent_and_user_gets_not_found(
        alice_api: APIClient, mallory: User, mallory_api: APIClient, anon: APIClient, relation: Relation,
        manifest: dict[str, Any]) -> None:
    other = agent_services.agent_create(owner=mallory, name="MalBot", capability_manifest=manifest)[0]
    strangers = {"alice, the owner": alice_api, "mallory": mallory_api,
                 "mallory's agent": client_for(secret=api_key_create(user=mallory, agent=other)[1])}

    for who, api in strangers.items():
        response = tools_of(api, relation)
        assert response.status_code == 404, who
        assert response.json()["error"]["code"] == "NOT_FOUND" and b"read_file" not in response.content, who
    assert tools_of(anon, relation).json()["error"]["code"] == "NOT_AUTHENTICATED"


def test_an_unknown_format_is_a_validation_error_naming_the_parameter(bob_api: APIClient,
                                                                      relation: Relation) -> None:
    response = tools_of(bob_api, relation, "?format=json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert [(d["path"], d["code"]) for d in error["details"]] == [("/format", "INVALID_VALUE")]


def test_the_mcp_list_carries_a_tools_output_schema_and_the_other_formats_do_not(
        alice: User, bob: User, bob_api: APIClient, manifest: dict[str, Any]) -> None:
    result_schema = {"type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"]}
    manifest["tools"][0]["output_schema"] = result_schema
    agent = agent_services.agent_create(owner=alice, name="Typed", capability_manifest=manifest)[0]
    relation = relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=["filesystem:read"])

    body = tools_of(bob_api, relation, "?format=mcp").json()

    assert body["tools"] == [{"name": "read_file", "description": "Read a file you choose from this device",
                              "inputSchema": READ_FILE_SCHEMA, "outputSchema": result_schema}]
    parsed = mcp.types.ListToolsResult.model_validate(body)  # the official SDK reads it as its outputSchema
    assert parsed.tools[0].output_schema == result_schema
    assert parsed.model_dump(by_alias=True, exclude_none=True, mode="json")["tools"] == body["tools"]
    assert "output_schema" not in str(tools_of(bob_api, relation, "?format=openai").json())
    assert "output_schema" not in str(tools_of(bob_api, relation, "?format=anthropic").json())
    assert "output_schema" not in str(tools_of(bob_api, relation, "?format=openai_responses").json())
