"""Grant options (SPEC §5.2, v1.2): bob grants a scope once, until a time, or only under
narrower arguments. The server checks and keeps them, compares them with bob's signed
statement, tells the agent, and past ``until`` reads the scope as withdrawn."""

from __future__ import annotations

import time
from typing import Any

import pytest
from rest_framework.test import APIClient

from agents.models import Agent
from hashee_sdk import KeyPair
from relations.models import Relation
from tests.relations.test_consent_statements import laptop, refused, signed  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db

DOCS_ONLY = {"type": "object", "properties": {"path": {"type": "string", "pattern": "^/home/bob/docs/"}},
             "required": ["path"]}


def in_an_hour() -> int:
    return int(time.time() * 1000) + 3_600_000


def grant(api: APIClient, agent: Agent, options: Any, scopes: tuple[str, ...] = ("filesystem:read",),
          consent: dict[str, Any] | None = None) -> Any:
    body: dict[str, Any] = {"agent_id": str(agent.pk), "granted_scopes": list(scopes), "grant_options": options}
    if consent is not None:
        body["consent_statement"] = consent
    return bob_post(api, body)


def bob_post(api: APIClient, body: dict[str, Any]) -> Any:
    return api.post("/h2a/relations", body, format="json")


def expire(relation_id: str, scope: str) -> None:
    """Let ``scope``'s ``until`` come, as time would."""
    relation = Relation.objects.get(pk=relation_id)
    relation.grant_options[scope]["until"] = int(time.time() * 1000) - 1
    relation.save(update_fields=["grant_options"])


def test_bob_grants_read_file_once_and_only_under_his_docs_and_the_agent_is_told(
        bob_api: APIClient, agent_api: APIClient, agent: Agent) -> None:
    options = {"filesystem:read": {"once": True, "arguments": {"read_file": DOCS_ONLY}}}

    response = grant(bob_api, agent, options, scopes=("filesystem:read", "notification:send"))

    assert response.status_code == 201, response.content
    assert response.json()["grant_options"] == options
    relation_id = response.json()["relation_id"]
    assert agent_api.get(f"/h2a/relations/{relation_id}/tools?format=mcp").status_code == 200
    frames = agent_api.get("/events?since=0").json()["events"]
    told = [f["data"]["relation"] for f in frames if f["type"] == "h2a.relation_created"]
    assert [r["grant_options"] for r in told] == [options]


def test_a_patch_replaces_the_options_and_without_any_every_grant_is_always(bob_api: APIClient, agent: Agent) -> None:
    relation_id = grant(bob_api, agent, {"filesystem:read": {"once": True}}).json()["relation_id"]
    until = in_an_hour()

    narrowed = bob_api.patch(f"/h2a/relations/{relation_id}", {
        "granted_scopes": ["filesystem:read"], "grant_options": {"filesystem:read": {"until": until}}}, format="json")
    plain = bob_api.patch(f"/h2a/relations/{relation_id}", {"granted_scopes": ["filesystem:read"]}, format="json")

    assert narrowed.json()["grant_options"] == {"filesystem:read": {"until": until}}
    assert plain.json()["grant_options"] == {}
    assert bob_api.get(f"/h2a/relations/{relation_id}").json()["grant_options"] == {}


def test_an_empty_option_means_always_and_is_not_kept(bob_api: APIClient, agent: Agent) -> None:
    response = grant(bob_api, agent, {"filesystem:read": {}})

    assert (response.status_code, response.json()["grant_options"]) == (201, {})


@pytest.mark.parametrize(("options", "paths"), [
    ({"notification:send": {"once": True}}, ["/grant_options/notification:send"]),
    ({"filesystem:read": {"once": False}}, ["/grant_options/filesystem:read/once"]),
    ({"filesystem:read": {"forever": True}}, ["/grant_options/filesystem:read/forever"]),
    ({"filesystem:read": {"until": 1_000}}, ["/grant_options/filesystem:read/until"]),
    ({"filesystem:read": {"until": "tomorrow"}}, ["/grant_options/filesystem:read/until"]),
    ({"filesystem:read": {"until": True}}, ["/grant_options/filesystem:read/until"]),
    ({"filesystem:read": {"arguments": {"send_notification": DOCS_ONLY}}},
     ["/grant_options/filesystem:read/arguments/send_notification"]),
    ({"filesystem:read": {"arguments": {"read_file": {"type": "string"}}}},
     ["/grant_options/filesystem:read/arguments/read_file/type"]),
    ({"filesystem:read": {"arguments": {"read_file": {"type": "object", "$ref": "https://evil.example/s"}}}},
     ["/grant_options/filesystem:read/arguments/read_file/$ref"]),
    ({"filesystem:read": {"arguments": []}}, ["/grant_options/filesystem:read/arguments"]),
    ({"filesystem:read": "once"}, ["/grant_options/filesystem:read"]),
    (["filesystem:read"], ["/grant_options"]),
])
def test_bad_options_are_a_validation_error_pointing_at_each_and_nothing_is_stored(
        bob_api: APIClient, agent: Agent, options: Any, paths: list[str]) -> None:
    response = grant(bob_api, agent, options)

    assert refused(response, 400, "VALIDATION_ERROR") == paths
    assert not Relation.objects.exists()


def test_a_patch_with_bad_options_changes_nothing(bob_api: APIClient, agent: Agent) -> None:
    relation_id = grant(bob_api, agent, {"filesystem:read": {"once": True}}).json()["relation_id"]

    response = bob_api.patch(f"/h2a/relations/{relation_id}", {
        "granted_scopes": ["filesystem:read", "notification:send"],
        "grant_options": {"notification:send": {"until": 5}}}, format="json")

    assert refused(response, 400, "VALIDATION_ERROR") == ["/grant_options/notification:send/until"]
    relation = bob_api.get(f"/h2a/relations/{relation_id}").json()
    assert (relation["granted_scopes"], relation["grant_options"]) == (["filesystem:read"],
                                                                       {"filesystem:read": {"once": True}})


def test_past_until_the_scope_reads_as_withdrawn_and_its_tools_leave_the_list(
        bob_api: APIClient, agent_api: APIClient, agent: Agent) -> None:
    relation_id = grant(bob_api, agent, {"filesystem:read": {"until": in_an_hour()}},
                        scopes=("filesystem:read", "notification:send")).json()["relation_id"]
    before = agent_api.get(f"/h2a/relations/{relation_id}/tools?format=mcp").json()["tools"]

    expire(relation_id, "filesystem:read")

    relation = bob_api.get(f"/h2a/relations/{relation_id}").json()
    assert (relation["granted_scopes"], relation["grant_options"], relation["status"]) == (
        ["notification:send"], {}, "active")
    assert [t["name"] for t in before] == ["read_file", "send_notification"]
    after = agent_api.get(f"/h2a/relations/{relation_id}/tools?format=mcp").json()["tools"]
    assert [t["name"] for t in after] == ["send_notification"]
    listed = bob_api.get("/h2a/relations").json()["results"][0]
    assert listed["granted_scopes"] == ["notification:send"]


def test_the_owners_audience_counts_an_expired_grant_no_more(bob_api: APIClient, agent: Agent) -> None:
    from relations.selectors import scope_counts

    relation_id = grant(bob_api, agent, {"filesystem:read": {"until": in_an_hour()}}).json()["relation_id"]
    assert scope_counts(agent=agent)["filesystem:read"]["granted"] == 1

    expire(relation_id, "filesystem:read")

    assert scope_counts(agent=agent)["filesystem:read"]["granted"] == 0


# --- signed on bob's device (SPEC §9.6) ----------------------------------------------------------


def test_a_statement_signs_the_options_and_is_kept(bob_api: APIClient, agent: Agent, laptop: KeyPair) -> None:  # noqa: F811
    options = {"filesystem:read": {"arguments": {"read_file": DOCS_ONLY}}}
    consent = signed(laptop, agent, grant_options=options)

    response = grant(bob_api, agent, options, consent=consent)

    assert response.status_code == 201, response.content
    assert response.json()["consent_statement"]["statement"]["grant_options"] == options


@pytest.mark.parametrize("stated", [{}, {"filesystem:read": {"once": True}},
                                    {"filesystem:read": {"arguments": {"read_file": {"type": "object"}}}}])
def test_options_that_differ_from_the_statements_are_refused(bob_api: APIClient, agent: Agent,
                                                             laptop: KeyPair, stated: dict[str, Any]) -> None:  # noqa: F811
    """A server-side helper (or a man in the middle of the portal) cannot widen what bob's
    device signed: the statement must state the options the request carries."""
    options = {"filesystem:read": {"arguments": {"read_file": DOCS_ONLY}}}

    response = grant(bob_api, agent, options, consent=signed(laptop, agent, grant_options=stated))

    assert refused(response, 400, "CONSENT_SIGNATURE_INVALID") == ["/consent_statement/statement/grant_options"]
    assert not Relation.objects.exists()


def test_a_request_without_options_needs_a_statement_of_none(bob_api: APIClient, agent: Agent,
                                                             laptop: KeyPair) -> None:  # noqa: F811
    response = bob_post(bob_api, {"agent_id": str(agent.pk), "granted_scopes": ["filesystem:read"],
                                  "consent_statement": signed(laptop, agent,
                                                              grant_options={"filesystem:read": {"once": True}})})

    assert refused(response, 400, "CONSENT_SIGNATURE_INVALID") == ["/consent_statement/statement/grant_options"]
