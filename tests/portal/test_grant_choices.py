"""bob's choices of how long and how narrowly he grants a permission (SPEC §5.2 grant_options,
issue 26): the consent form's one mapping to the request, the describe answer a browser device
signs (nothing stored), and the problems shown beside the permission they are about."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.http import QueryDict
from django.urls import reverse

from agents import services as agent_services
from agents.models import Agent
from hashee.errors import HasheeError
from hashee_sdk.grants import outside, read_grants
from portal.grant_choices import NO_PARENT_SEGMENT, grant_request, prefix_of, prefix_pattern
from relations.models import Relation
from tests.portal.test_views import browser_for

NOW = datetime(2026, 11, 27, 17, 0, tzinfo=UTC)
NOW_MS = int(NOW.timestamp() * 1000)
HOUR_MS = 3_600_000


def located(manifest: dict[str, Any]) -> dict[str, Any]:
    """The demo manifest with a location tool whose accuracy is an enum."""
    new = copy.deepcopy(manifest)
    new["tools"].append({
        "name": "get_location", "description_i18n_key": "agent.cap.get_location.description",
        "description_fallback": "Where this device is",
        "input_schema": {"type": "object", "properties": {
            "accuracy": {"title": "accuracy", "enum": ["approximate", "city", "precise"]}},
            "additionalProperties": False},
        "permission_scope": "location:read"})
    new["permission_scopes"].append({"id": "location:read", "label_i18n_key": "agent.scope.location_read.label",
                                     "sensitivity": "high"})
    return new


def post(fields: dict[str, Any]) -> QueryDict:
    data = QueryDict(mutable=True)
    for name, value in fields.items():
        data.setlist(name, value if isinstance(value, list) else [value])
    return data


def test_always_is_no_option_and_nothing_ticked_is_nothing_granted(manifest: dict[str, Any]) -> None:
    asked = grant_request(post({"granted_scopes": ["filesystem:read"], "duration:filesystem:read": "always",
                                "prefix:read_file:path": ""}), manifest=manifest, now=NOW)
    assert asked.as_body() == {"granted_scopes": ["filesystem:read"], "grant_options": {}}
    assert grant_request(post({"duration:filesystem:read": "once"}), manifest=manifest, now=NOW).as_body() == {
        "granted_scopes": [], "grant_options": {}}


@pytest.mark.parametrize(("choice", "options"), [
    ("once", {"once": True}),
    ("1h", {"until": NOW_MS + HOUR_MS}),
    ("1d", {"until": NOW_MS + 24 * HOUR_MS}),
    ("1w", {"until": NOW_MS + 7 * 24 * HOUR_MS}),
])
def test_each_duration_becomes_its_option_computed_from_now(manifest: dict[str, Any], choice: str,
                                                            options: dict[str, Any]) -> None:
    asked = grant_request(post({"granted_scopes": ["filesystem:read", "notification:send"],
                                "duration:filesystem:read": choice}), manifest=manifest, now=NOW)
    assert asked.grant_options == {"filesystem:read": options}


def test_a_path_prefix_and_allowed_values_become_one_closed_schema_per_tool(manifest: dict[str, Any]) -> None:
    asked = grant_request(post({
        "granted_scopes": ["filesystem:read", "location:read"], "duration:filesystem:read": "once",
        "prefix:read_file:path": " /home/bob/docs (old).v2/ ",
        "enum:get_location:accuracy:offered": "1", "enum:get_location:accuracy": ["0", "1"]}),
        manifest=located(manifest), now=NOW)
    assert asked.grant_options == {
        "filesystem:read": {"once": True, "arguments": {"read_file": {
            "type": "object", "properties": {"path": {"type": "string", "pattern": r"^/home/bob/docs \(old\)\.v2/",
                                                       "not": NO_PARENT_SEGMENT}},
            "required": ["path"]}}},
        "location:read": {"arguments": {"get_location": {
            "type": "object", "properties": {"accuracy": {"enum": ["approximate", "city"]}}}}}}


def test_every_value_ticked_narrows_nothing(manifest: dict[str, Any]) -> None:
    asked = grant_request(post({"granted_scopes": ["location:read"], "enum:get_location:accuracy:offered": "1",
                                "enum:get_location:accuracy": ["0", "1", "2"]}), manifest=located(manifest), now=NOW)
    assert asked.grant_options == {}


@pytest.mark.parametrize(("path", "inside"), [
    ("/home/bob/docs/report.txt", True), ("/home/bob/docs/.notes/a..b", True),
    ("/home/bob/docs/../../etc/passwd", False), ("/home/bob/docs/..", False), ("/home/bob/docs/a/../../x", False),
    ("/home/bob/docs\\..\\secret", False), ("/home/bob/documents", False), ("/etc/passwd", False)])
def test_a_folder_chosen_on_the_page_holds_on_bobs_device_even_against_dot_dot(
        manifest: dict[str, Any], path: str, inside: bool) -> None:
    """An agent that wants /etc/passwd asks for it through the folder bob chose: the device,
    judging the schema the page made, refuses every way out of the folder."""
    asked = grant_request(post({"granted_scopes": ["filesystem:read"], "prefix:read_file:path": "/home/bob/docs"}),
                          manifest=manifest, now=NOW)
    grant = read_grants(["filesystem:read"], asked.grant_options)["filesystem:read"]

    assert (outside(grant, "read_file", {"path": path}) is None) is inside


@pytest.mark.parametrize("prefix", ["/home/bob/docs/", "C:\\Users\\bob\\", "a.b*c+d?e(f)[g]{h}|i^j$k", "路径/文件"])
def test_a_prefix_reads_back_from_its_pattern(prefix: str) -> None:
    assert prefix_of(prefix_pattern(prefix)) == prefix


def test_problems_carry_their_pointers(manifest: dict[str, Any]) -> None:
    with pytest.raises(HasheeError) as caught:
        grant_request(post({"granted_scopes": ["filesystem:read", "location:read", "clipboard:read"],
                            "duration:filesystem:read": "forever", "prefix:read_file:path": "x" * 300,
                            "enum:get_location:accuracy:offered": "1"}), manifest=located(manifest), now=NOW)
    assert caught.value.code == "VALIDATION_ERROR"
    assert [(d["path"], d["code"]) for d in caught.value.details] == [
        ("/granted_scopes", "INVALID_VALUE"),
        ("/grant_options/filesystem:read", "INVALID_VALUE"),
        ("/grant_options/filesystem:read/arguments/read_file/properties/path/pattern", "TOO_LONG"),
        ("/grant_options/location:read/arguments/get_location/properties/accuracy/enum", "INVALID_VALUE")]


@pytest.mark.django_db
def test_describe_answers_the_request_and_stores_nothing(bob: User, agent: Agent) -> None:
    client = browser_for(bob)
    response = client.post(reverse("portal:connect", args=[agent.pk]), {
        "granted_scopes": ["filesystem:read"], "duration:filesystem:read": "once",
        "prefix:read_file:path": "/home/bob/docs/"}, headers={"X-Hashee-Describe": "1"})
    assert response.status_code == 200
    assert response.json() == {"granted_scopes": ["filesystem:read"], "grant_options": {"filesystem:read": {
        "once": True, "arguments": {"read_file": {
            "type": "object", "properties": {"path": {"type": "string", "pattern": "^/home/bob/docs/", "not": NO_PARENT_SEGMENT}},
            "required": ["path"]}}}}}
    assert not Relation.objects.filter(user=bob).exists()


@pytest.mark.django_db
def test_describe_refuses_with_the_error_shape(bob: User, agent: Agent) -> None:
    response = browser_for(bob).post(reverse("portal:connect", args=[agent.pk]), {
        "granted_scopes": ["filesystem:read"], "duration:filesystem:read": "forever"},
        headers={"X-Hashee-Describe": "1"})
    assert response.status_code == 400
    body = response.json()
    assert body["error"]["code"] == "VALIDATION_ERROR"
    assert body["error"]["details"][0]["path"] == "/grant_options/filesystem:read"
    assert not Relation.objects.filter(user=bob).exists()


@pytest.mark.django_db
def test_a_refused_choice_is_shown_beside_its_permission(bob: User, agent: Agent, manifest: dict[str, Any]) -> None:
    agent_services.agent_update(agent_id=agent.pk, actor=agent.owner,
                                capability_manifest={**located(manifest), "agent_version": "1.1.0"})
    response = browser_for(bob).post(reverse("portal:connect", args=[agent.pk]), {
        "granted_scopes": ["location:read"], "enum:get_location:accuracy:offered": "1"})
    page = response.content.decode()
    assert response.status_code == 200 and not Relation.objects.filter(user=bob).exists()
    assert 'data-choice-errors' in page and "Allow at least one value of “accuracy”, or untick the permission." in page
