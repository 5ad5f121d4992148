"""SPEC §9.6 end to end on the real server (the whole Django stack, its database — SQLite,
then PostgreSQL in scripts/test's second phase): bob's device signs the consent it gives,
the server checks and returns it, the agent and the device remember the newest one, and a
row changed in the database cannot give back what bob took away."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async

from agents import services as agent_services
from agents.apikey_services import api_key_create
from hashee_sdk import AgentRuntime, ApiError, AuditLog, ConsentUnverified, KeyPair, LocalStore, ToolResult, UserClient
from hashee_sdk.rest import call_api
from relations.models import Relation
from tests.toolcalls.test_roundtrip import ApiClientTransport, Approver, run

pytestmark = pytest.mark.django_db(transaction=True)
SCOPES = ["filesystem:read", "notification:send"]


class CarelessRuntime(AgentRuntime):
    """An agent that does not check the user's statements (a compromised or careless one):
    what it sends, bob's device must refuse on its own."""

    async def check_consent(self, relation_id: str, scope: str, version: int) -> None:
        return None


class World:
    """alice's DemoBot; bob's laptop, the first device, gives consent signed by its key."""

    def __init__(self, alice: Any, bob: Any, manifest: dict[str, Any], state: Path) -> None:
        self.agent = agent_services.agent_create(owner=alice, name="DemoBot", capability_manifest=manifest)[0]
        self.manifest = manifest
        self.bob_api = ApiClientTransport(api_key_create(user=bob)[1])
        self.agent_api = ApiClientTransport(api_key_create(user=alice, agent=self.agent)[1])
        self.ran: list[dict[str, Any]] = []
        self.client = UserClient(transport=self.bob_api, keys=KeyPair.generate(), device_id="laptop",
                                 prompt=Approver(), handlers={"read_file": self.tool, "send_notification": self.tool},
                                 audit=AuditLog(state / "audit.sqlite3"))
        self.runtime_keys = KeyPair.generate()
        self.since = {"user": 0, "agent": 0}
        self.relation_id = ""

    def tool(self, arguments: dict[str, Any]) -> dict[str, Any]:
        self.ran.append(arguments)
        return {"shown": True}

    def runtime(self, kind: type[AgentRuntime] = AgentRuntime) -> AgentRuntime:
        return kind(transport=self.agent_api, agent_id=str(self.agent.pk), keys=self.runtime_keys,
                            manifest=self.manifest, store=LocalStore.in_memory())

    async def connect(self) -> dict[str, Any]:
        await self.client.register_device()
        relation = await self.client.grant(str(self.agent.pk), SCOPES, user_id="bob")
        self.relation_id = str(relation["relation_id"])
        return relation

    async def call(self, runtime: AgentRuntime, name: str, arguments: dict[str, Any]) -> ToolResult:
        await runtime.register_key()
        self.since["agent"] = await runtime.poll(self.since["agent"])  # the relation events, with the statements
        task = asyncio.create_task(runtime.call_tool(self.relation_id, name, arguments, timeout=20))
        while not task.done():
            self.since["user"] = await self.client.poll(self.since["user"])
            self.since["agent"] = await runtime.poll(self.since["agent"])
            await asyncio.sleep(0.02)
        return await task

    def refusals(self) -> list[str | None]:
        return [e.reason for e in self.client.audit.entries() if e.status in ("refused", "denied")]


@pytest.fixture
def world(alice: Any, bob: Any, manifest: dict[str, Any], tmp_path: Path) -> World:
    return World(alice, bob, manifest, tmp_path)


@database_sync_to_async
def _operator_restores(relation_id: str, **row: Any) -> None:
    """What someone with the database does: one UPDATE, no statement, no event."""
    Relation.objects.filter(pk=relation_id).update(consent_statement=None, **row)


def test_bobs_signed_grant_is_stored_returned_and_believed_by_both_sides(world: World) -> None:
    async def scenario() -> tuple[dict[str, Any], dict[str, Any], ToolResult]:
        created = await world.connect()
        served = await call_api(world.bob_api, "GET", f"/h2a/relations/{world.relation_id}")
        return created, served, await world.call(world.runtime(), "send_notification", {"title": "hi"})

    created, served, result = run(scenario)

    assert created["consent_statement"]["statement"]["granted_scopes"] == SCOPES
    assert served["consent_statement"] == created["consent_statement"]
    assert created["consent_statement"]["statement"]["device_key_id"] == world.client.keys.key_id
    assert result.ok and world.ran == [{"title": "hi"}]


def test_a_scope_bob_withdrew_on_his_device_is_not_given_back_by_the_database(world: World) -> None:
    async def scenario() -> tuple[ToolResult, type[BaseException] | None]:
        await world.connect()
        await world.client.reconsent(world.relation_id, ["notification:send"])  # signed: read_file withdrawn
        await _operator_restores(world.relation_id, granted_scopes=SCOPES)
        informed = world.runtime()
        refused_locally = None
        try:  # an agent that saw the signed withdrawal refuses before sending anything
            await world.call(informed, "read_file", {"path": "notes.txt"})
        except ConsentUnverified as exc:
            refused_locally = type(exc)
        return await world.call(world.runtime(CarelessRuntime), "read_file", {"path": "notes.txt"}), refused_locally

    result, refused_locally = run(scenario)

    assert refused_locally is ConsentUnverified
    assert (result.status, result.reason) == ("denied", "consent_unverified")
    assert world.ran == [] and "consent_unverified" in world.refusals()


def test_a_relation_bob_revoked_on_his_device_stays_revoked_when_the_row_is_restored(world: World) -> None:
    async def scenario() -> ToolResult:
        await world.connect()
        await world.client.revoke(world.relation_id)
        await _operator_restores(world.relation_id, revoked_at=None)
        return await world.call(world.runtime(CarelessRuntime), "send_notification", {"title": "back from the dead"})

    result = run(scenario)

    assert (result.status, result.reason) == ("denied", "consent_unverified")
    assert world.ran == []


def test_the_server_refuses_an_older_statement_replayed_and_stores_nothing(world: World) -> None:
    async def scenario() -> tuple[ApiError, dict[str, Any]]:
        first = (await world.connect())["consent_statement"]
        await world.client.reconsent(world.relation_id, ["notification:send"])
        with pytest.raises(ApiError) as refused:
            await call_api(world.bob_api, "PATCH", f"/h2a/relations/{world.relation_id}",
                           json={"granted_scopes": SCOPES, "consent_statement": first})
        return refused.value, await call_api(world.bob_api, "GET", f"/h2a/relations/{world.relation_id}")

    refused, after = run(scenario)

    assert (refused.status, refused.code) == (409, "CONSENT_OUT_OF_ORDER")
    assert after["granted_scopes"] == ["notification:send"]
    assert after["consent_statement"]["statement"]["granted_scopes"] == ["notification:send"]
