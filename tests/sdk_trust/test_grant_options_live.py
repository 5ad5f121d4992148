"""Grant options end to end on the real server (SPEC §5.2, issue 26; the whole Django stack
and its database, as tests/sdk_trust/test_consent_live.py drives it): bob's device signs
the options it grants, answers a once-grant once and withdraws it with a signed PATCH,
refuses past ``until`` by its own clock and outside a narrowed grant, keeps doing so when
the server lies, and tells bob of a high grant unused for 90 days."""

from __future__ import annotations

import asyncio
import copy
import time
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async

from agents import services as agent_services
from agents.apikey_services import api_key_create
from hashee_sdk import AgentRuntime, AuditLog, ConsentUnverified, KeyPair, LocalStore, ToolResult, UserClient
from hashee_sdk.grants import Notice
from hashee_sdk.rest import call_api
from tests.sdk_trust.lying import LyingTransport
from tests.sdk_trust.test_consent_live import CarelessRuntime
from tests.sdk_trust.test_consent_trust import relation_says
from tests.toolcalls.test_roundtrip import ApiClientTransport, Approver, run

pytestmark = pytest.mark.django_db(transaction=True)
SCOPES = ["filesystem:read", "location:read", "notification:send"]
DOCS_ONLY = {"type": "object", "properties": {"path": {"type": "string", "pattern": "^/home/bob/docs/"}},
             "required": ["path"]}
DAY = 86400.0


def with_location(manifest: dict[str, Any]) -> dict[str, Any]:
    """The demo manifest and get_location (location:read, high: SPEC §12.1)."""
    changed = copy.deepcopy(manifest)
    changed["tools"].append({"name": "get_location", "description_i18n_key": "agent.cap.get_location.description",
                             "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
                             "permission_scope": "location:read"})
    changed["permission_scopes"].append({"id": "location:read", "label_i18n_key": "agent.scope.location_read.label",
                                         "sensitivity": "high"})
    return changed


class DeviceClock:
    """Bob's device's clock: the real time, moved ``offset`` seconds by the test."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


class World:
    """alice's DemoBot; bob's laptop (his first device) behind a transport that may lie."""

    def __init__(self, alice: Any, bob: Any, manifest: dict[str, Any], state: Path) -> None:
        self.manifest = with_location(manifest)
        self.agent = agent_services.agent_create(owner=alice, name="DemoBot", capability_manifest=self.manifest)[0]
        self.bob_api = LyingTransport(ApiClientTransport(api_key_create(user=bob)[1]))
        self.agent_api = ApiClientTransport(api_key_create(user=alice, agent=self.agent)[1])
        self.ran: list[tuple[str, dict[str, Any]]] = []
        self.notices: list[Notice] = []
        self.clock = DeviceClock()
        self.approver = Approver()
        self.client = UserClient(transport=self.bob_api, keys=KeyPair.generate(), device_id="laptop",
                                 prompt=self.approver, handlers={name: self.handler(name) for name in (
                                     "read_file", "send_notification", "get_location")},
                                 audit=AuditLog(state / "audit.sqlite3"), clock=self.clock,
                                 on_notice=self.notices.append)
        self.runtime_keys = KeyPair.generate()
        self.since = {"user": 0, "agent": 0}
        self.relation_id = ""

    def handler(self, name: str) -> Any:
        def run_tool(arguments: dict[str, Any]) -> dict[str, Any]:
            self.ran.append((name, arguments))
            return {"latitude": 1.0, "longitude": 2.0, "accuracy_m": 1000} if name == "get_location" else {"ok": 1}
        return run_tool

    def runtime(self, kind: type[AgentRuntime] = AgentRuntime) -> AgentRuntime:
        return kind(transport=self.agent_api, agent_id=str(self.agent.pk), keys=self.runtime_keys,
                    manifest=self.manifest, store=LocalStore.in_memory())

    async def connect(self, grant_options: dict[str, Any] | None = None) -> dict[str, Any]:
        await self.client.register_device()
        relation = await self.client.grant(str(self.agent.pk), SCOPES, user_id="bob", grant_options=grant_options)
        self.relation_id = str(relation["relation_id"])
        return relation

    async def call(self, runtime: AgentRuntime, name: str, arguments: dict[str, Any]) -> ToolResult:
        await runtime.register_key()
        self.since["agent"] = await runtime.poll(self.since["agent"])
        task = asyncio.create_task(runtime.call_tool(self.relation_id, name, arguments, timeout=20))
        while not task.done():
            self.since["user"] = await self.client.poll(self.since["user"])
            self.since["agent"] = await runtime.poll(self.since["agent"])
            await asyncio.sleep(0.02)
        return await task

    async def relation(self) -> dict[str, Any]:
        return dict(await call_api(self.bob_api.inner, "GET", f"/h2a/relations/{self.relation_id}"))


@pytest.fixture
def world(alice: Any, bob: Any, manifest: dict[str, Any], tmp_path: Path) -> World:
    return World(alice, bob, manifest, tmp_path)


def answered(result: ToolResult) -> tuple[str, str | None]:
    return result.status, result.reason


@pytest.mark.parametrize("server", ["honest", "lies: granted again, options dropped, the once statement replayed"])
def test_a_once_grant_is_answered_once_then_withdrawn_by_bobs_device(world: World, server: str) -> None:
    async def scenario() -> tuple[dict[str, Any], ToolResult, dict[str, Any], ToolResult, type[BaseException] | None]:
        granted = await world.connect({"filesystem:read": {"once": True}})
        agent = world.runtime()
        first = await world.call(agent, "read_file", {"path": "/home/bob/notes.txt"})
        after = await world.relation()
        if server != "honest":
            world.bob_api.lie(f"/h2a/relations/{world.relation_id}", relation_says(
                granted_scopes=SCOPES, grant_options=..., consent_statement=granted["consent_statement"]))
            world.client._invalidate(world.relation_id)
        refused_locally = None
        try:  # the agent saw bob's signed withdrawal (an event): it does not even send the call
            await world.call(agent, "read_file", {"path": "/home/bob/notes.txt"})
        except ConsentUnverified as exc:
            refused_locally = type(exc)
        second = await world.call(world.runtime(CarelessRuntime), "read_file", {"path": "/home/bob/notes.txt"})
        return granted, first, after, second, refused_locally

    granted, first, after, second, refused_locally = run(scenario)

    assert granted["grant_options"] == {"filesystem:read": {"once": True}}
    assert granted["consent_statement"]["statement"]["grant_options"] == {"filesystem:read": {"once": True}}
    assert answered(first) == ("ok", None)
    assert after["granted_scopes"] == ["location:read", "notification:send"] and after["grant_options"] == {}
    assert after["consent_statement"]["statement"]["device_key_id"] == world.client.keys.key_id  # signed by bob
    assert refused_locally is ConsentUnverified
    assert answered(second) == ("denied", "scope_not_granted")
    assert world.ran == [("read_file", {"path": "/home/bob/notes.txt"})]


def test_a_once_grant_whose_withdrawal_the_server_refuses_stays_refused_and_bob_is_told(world: World) -> None:
    async def scenario() -> tuple[ToolResult, ToolResult, dict[str, Any], dict[str, Any]]:
        await world.connect({"filesystem:read": {"once": True}})
        changed = copy.deepcopy(world.manifest)
        changed["agent_version"] = "1.0.1"  # a new version is out: a PATCH for the old one is VERSION_CONFLICT
        await database_sync_to_async(agent_services.agent_update)(agent_id=world.agent.pk, actor=None,
                                                                  capability_manifest=changed)
        world.manifest = changed  # not breaking: bob's relation stays active, acknowledging version 1
        first = await world.call(world.runtime(), "read_file", {"path": "/home/bob/notes.txt"})
        stored = await world.relation()
        second = await world.call(world.runtime(CarelessRuntime), "read_file", {"path": "/home/bob/notes.txt"})
        next_consent = await world.client.reconsent(world.relation_id, SCOPES,
                                                    grant_options={"filesystem:read": {"once": True}})
        return first, second, stored, next_consent

    first, second, stored, next_consent = run(scenario)

    assert answered(first) == ("ok", None) and answered(second) == ("denied", "scope_not_granted")
    assert stored["grant_options"] == {"filesystem:read": {"once": True}}  # the server never took the withdrawal
    assert [(n.kind, n.scope) for n in world.notices] == [("once_not_withdrawn", "filesystem:read"),
                                                          ("call_refused", "filesystem:read")]
    assert "VERSION_CONFLICT" in world.notices[0].text
    assert world.notices[1].text == ("Refused DemoBot's read_file: you have not granted filesystem:read "
                                     "(or not for this call).")
    assert next_consent["granted_scopes"] == ["location:read", "notification:send"]  # left out of the next one
    assert world.ran == [("read_file", {"path": "/home/bob/notes.txt"})]


def test_past_until_by_the_devices_clock_a_call_is_scope_not_granted(world: World) -> None:
    async def scenario() -> tuple[ToolResult, ToolResult]:
        until = int(time.time() * 1000) + 5_000
        await world.connect({"notification:send": {"until": until}})
        before = await world.call(world.runtime(), "send_notification", {"title": "in time"})
        world.clock.offset = (until / 1000 - time.time()) + 1  # bob's clock is past until; the server's is not
        after = await world.call(world.runtime(CarelessRuntime), "send_notification", {"title": "too late"})
        return before, after

    before, after = run(scenario)

    assert answered(before) == ("ok", None) and answered(after) == ("denied", "scope_not_granted")
    assert world.ran == [("send_notification", {"title": "in time"})]


@pytest.mark.parametrize("server", ["honest", "lies: the narrowing dropped"])
def test_a_narrowed_read_file_answers_inside_and_refuses_outside_with_details(world: World, server: str) -> None:
    async def scenario() -> tuple[dict[str, Any], ToolResult, ToolResult]:
        granted = await world.connect({"filesystem:read": {"arguments": {"read_file": DOCS_ONLY}}})
        if server != "honest":
            world.bob_api.lie(f"/h2a/relations/{world.relation_id}", relation_says(grant_options={}))
        inside = await world.call(world.runtime(), "read_file", {"path": "/home/bob/docs/plan.txt"})
        outside = await world.call(world.runtime(), "read_file", {"path": "/home/bob/.ssh/id_ed25519"})
        return granted, inside, outside

    granted, inside, outside = run(scenario)

    assert granted["grant_options"] == {"filesystem:read": {"arguments": {"read_file": DOCS_ONLY}}}
    assert answered(inside) == ("ok", None)
    assert answered(outside) == ("denied", "scope_not_granted")
    assert [(d["path"], d["code"]) for d in outside.details] == [("/arguments/path", "PATTERN_MISMATCH")]
    assert world.ran == [("read_file", {"path": "/home/bob/docs/plan.txt"})]
    assert world.approver.asked[0].grant == "read_file only when path starts with /home/bob/docs/"


def test_a_high_grant_unused_for_90_days_is_told_and_withdrawn(world: World) -> None:
    async def scenario() -> tuple[list[Any], list[Any], dict[str, Any]]:
        await world.connect()
        await world.call(world.runtime(), "send_notification", {"title": "low scopes do not count"})
        soon = await world.client.unused_grants(now=time.time() + 89 * DAY)
        found = await world.client.unused_grants(now=time.time() + 90 * DAY + 60)
        for unused in found:
            await world.client.withdraw(unused.relation_id, unused.scope)
        return soon, found, await world.relation()

    soon, found, after = run(scenario)

    assert soon == []
    assert [(u.relation_id, u.agent_id, u.scope) for u in found] == [
        (world.relation_id, str(world.agent.pk), "location:read")]
    assert [n.text for n in world.notices] == ["DemoBot has not used location:read for 90 days. You can withdraw it: "
                                               "it is asked again if the agent needs it later."]
    assert after["granted_scopes"] == ["filesystem:read", "notification:send"]
    assert after["consent_statement"]["statement"]["granted_scopes"] == ["filesystem:read", "notification:send"]
