"""SPEC §9.1-§9.2 end to end through the real server, with a lying transport in front of
each SDK: an identified agent's manifest must carry its pinned identity's signature, its
runtime keys must be vouched for by that identity, the user's devices by approvals, and
a changed identity is refused until the user accepts the new safety number."""

from __future__ import annotations

import asyncio
import copy
import time
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from nacl.public import PrivateKey

from agents import identity as identity_services
from agents import services as agent_services
from agents.apikey_services import api_key_create
from hashee_sdk import (
    AgentRuntime,
    AuditLog,
    KeyPair,
    LocalStore,
    PromptRequest,
    Recipient,
    SafetyNumberMismatch,
    ToolResult,
    UserClient,
    contract,
    seal,
    statements,
)
from hashee_sdk.core import signing
from hashee_sdk.errors import ToolCallTimeout
from hashee_sdk.rest import send_message
from hashee_sdk.wire import AGENT_TO_USER, b64encode
from relations import services as relation_services
from relations.models import Relation
from tests.agents.test_identity import ALICE_KEY, MALLORY_KEY, NEW_KEY, rotation
from tests.core.test_signing import SMALL_ORDER_POINTS
from tests.sdk_trust.lying import LyingTransport, add_agent_key, add_device, serve_manifest
from tests.toolcalls.test_roundtrip import ApiClientTransport, Approver, run

pytestmark = pytest.mark.django_db(transaction=True)


def signed_version(alice: Any, agent_id: Any, manifest: dict[str, Any], key: dict[str, str]) -> None:
    agent_services.agent_update(agent_id=agent_id, actor=alice, capability_manifest=manifest,
                                capability_manifest_signature=signing.sign_manifest(manifest, key))


class Identified:
    """alice's agent with an identity key and a signed manifest; bob's laptop and the agent's
    runtime each behind a lying transport."""

    def __init__(self, alice: Any, bob: Any, manifest: dict[str, Any], state: Path) -> None:
        self.alice, self.state = alice, state
        self.agent = agent_services.agent_create(owner=alice, name="DemoBot", capability_manifest=manifest)[0]
        identity_services.identity_key_publish(
            agent_id=self.agent.pk, actor=alice, jwk=signing.public_of(ALICE_KEY),
            proof=signing.sign_identity_proof(ALICE_KEY, agent_id=str(self.agent.pk)))
        self.manifest = {**copy.deepcopy(manifest), "agent_version": "1.0.1"}
        signed_version(alice, self.agent.pk, self.manifest, ALICE_KEY)
        self.relation_id = str(relation_services.relation_create(
            user=bob, agent_id=self.agent.pk, granted_scopes=["filesystem:read", "notification:send"]).pk)
        self.bob_key, self.agent_key = api_key_create(user=bob)[1], api_key_create(user=alice, agent=self.agent)[1]
        self.user_side = LyingTransport(ApiClientTransport(self.bob_key))
        self.agent_side = LyingTransport(ApiClientTransport(self.agent_key))
        self.device, self.runtime_keys = KeyPair.generate(), KeyPair.generate()
        self.approver = Approver()
        self.ran: list[dict[str, Any]] = []
        self.client = UserClient(transport=self.user_side, keys=self.device, device_id="laptop",
                                 prompt=self.approver, handlers={"read_file": self.tool, "send_notification": self.tool},
                                 audit=AuditLog(state / "audit.sqlite3"))
        self.runtime = AgentRuntime(transport=self.agent_side, agent_id=str(self.agent.pk), keys=self.runtime_keys,
                                    manifest=self.manifest, identity_key=ALICE_KEY,
                                    store=LocalStore.in_memory())
        self.since = self.agent_since = 0

    def tool(self, arguments: dict[str, Any]) -> dict[str, Any]:
        self.ran.append(arguments)
        return {"ok": True}

    async def setup(self) -> None:
        await self.client.register_device()
        await self.runtime.register_key()

    async def call(self, name: str, arguments: dict[str, Any], *, timeout: float = 20) -> ToolResult:
        task = asyncio.create_task(self.runtime.call_tool(self.relation_id, name, arguments, timeout=timeout))
        while not task.done():
            self.since = await self.client.poll(self.since)
            self.agent_since = await self.runtime.poll(self.agent_since)
            await asyncio.sleep(0.02)
        return await task

    def refusals(self) -> list[str | None]:
        return [e.reason for e in self.client.audit.entries() if e.status in ("refused", "denied")]


@pytest.fixture
def world(alice: Any, bob: Any, manifest: dict[str, Any], tmp_path: Path) -> Identified:
    return Identified(alice, bob, manifest, tmp_path)


def test_a_signed_call_runs_and_both_sides_show_the_same_safety_number(world: Identified) -> None:
    async def scenario() -> tuple[ToolResult, str | None]:
        await world.setup()
        return await world.call("read_file", {"path": "notes.txt"}), await world.runtime.safety_number(
            world.relation_id)

    result, agents_number = run(scenario)

    assert result.ok and world.ran == [{"path": "notes.txt"}]
    shown = world.approver.asked[0].safety_number
    assert shown is not None and shown == agents_number
    assert shown == statements.safety_number(agent_id=str(world.agent.pk),
                                             agent_identity=signing.b64url_decode(signing.public_of(ALICE_KEY)["x"]),
                                             user_root_device=world.device.public.ed25519)


@pytest.mark.parametrize("rewrite", ["filesystem:read made silent", "path widened to arrays"])
def test_a_manifest_the_server_rewrote_is_refused_though_its_hash_matches(world: Identified, rewrite: str) -> None:
    def change(manifest: dict[str, Any]) -> None:
        if rewrite == "filesystem:read made silent":
            manifest["permission_scopes"][0]["sensitivity"] = "low"
        else:
            manifest["tools"][0]["input_schema"]["properties"]["path"] = {"type": ["string", "array"]}
    world.user_side.lie(f"/agents/{world.agent.pk}", serve_manifest(change))

    async def scenario() -> ToolResult:
        await world.setup()
        return await world.call("read_file", {"path": "notes.txt"})

    result = run(scenario)

    assert (result.status, result.reason) == ("denied", "manifest_unverified")
    assert world.ran == [] and world.approver.asked == [] and world.refusals() == ["manifest_unverified"]


def test_a_runtime_key_the_identity_did_not_vouch_for_gets_nothing_run(world: Identified) -> None:
    mallory = KeyPair.generate()
    forged_vouch = statements.sign_runtime_key(MALLORY_KEY, agent_id=str(world.agent.pk), key_id=mallory.key_id)
    world.user_side.lie("/keys", add_agent_key({**mallory.public.as_api(), "key_id": mallory.key_id,
                                                "identity_kid": signing.jwk_thumbprint(MALLORY_KEY),
                                                "identity_signature": forged_vouch}))

    async def scenario() -> None:
        await world.setup()
        now_ms = int(time.time() * 1000)
        call = {"subtype": "tool_call", "call_id": "call_forged", "tool_name": "read_file",
                "arguments": {"path": "/etc/passwd"}, "permission_scope": "filesystem:read", "timeout_ms": 5000,
                "manifest_version": 2, "manifest_hash": world.runtime.manifest.hash,
                "reply_key": b64encode(bytes(PrivateKey.generate().public_key)), "expires_at": now_ms + 30_000}
        sealed = seal(call, sender=mallory, recipients=[Recipient.of(world.device.public)],
                      relation_id=world.relation_id, direction=AGENT_TO_USER, now_ms=now_ms)
        await send_message(ApiClientTransport(world.agent_key), relation_id=world.relation_id,
                           msg_subtype="artifact_tool_call", payload=sealed)
        world.since = await world.client.poll(world.since)

    run(scenario)

    assert world.ran == [] and world.refusals() == ["untrusted_sender"]


def test_a_swapped_identity_is_refused_without_a_prompt(world: Identified) -> None:
    async def scenario() -> ToolResult:
        await world.setup()
        assert (await world.call("send_notification", {"title": "hi"})).ok  # the identity is pinned
        world.user_side.lie(f"/agents/{world.agent.pk}/identity",
                            lambda body: {**body, "jwk": signing.public_of(MALLORY_KEY)})
        world.client.keydir.forget()
        world.client._invalidate(world.relation_id)
        return await world.call("read_file", {"path": "/etc/passwd"}, timeout=2)

    with pytest.raises(ToolCallTimeout):  # nothing is answered to an agent that is not believed
        run(scenario)

    assert world.ran == [{"title": "hi"}] and world.approver.asked == []
    assert world.refusals() == ["identity_changed"]


@pytest.mark.parametrize("encoding", [SMALL_ORDER_POINTS[0], SMALL_ORDER_POINTS[4]])
def test_an_identity_of_small_order_is_never_pinned(world: Identified, encoding: str) -> None:
    # A server that serves, from the first sight, a key for which forged signatures verify.
    small = {"kty": "OKP", "crv": "Ed25519", "x": signing.b64url(bytes.fromhex(encoding))}
    world.user_side.lie(f"/agents/{world.agent.pk}/identity", lambda body: {**body, "jwk": small})

    async def scenario() -> ToolResult:
        await world.setup()
        return await world.call("send_notification", {"title": "hi"}, timeout=2)

    with pytest.raises(ToolCallTimeout):
        run(scenario)

    assert world.ran == [] and world.approver.asked == []
    assert world.client.store.pinned_identity(world.relation_id) == (False, None)


def test_after_a_real_rotation_bob_accepts_the_new_safety_number_and_calls_run_again(world: Identified) -> None:
    async def scenario() -> tuple[str | None, str | None, ToolResult]:
        await world.setup()
        assert (await world.call("send_notification", {"title": "hi"})).ok
        before = (await world.client.relation(world.relation_id)).safety_number
        await rotate(world)
        pending = await world.client.pending_safety_number(world.relation_id)
        assert pending is not None
        accepted = await world.client.accept_identity(world.relation_id, safety_number=pending)
        assert accepted == pending
        return before, pending, await world.call("send_notification", {"title": "again"})

    before, pending, result = run(scenario)

    assert result.ok and pending is not None and pending != before
    assert world.ran == [{"title": "hi"}, {"title": "again"}]


def test_accepting_pins_only_the_identity_bob_compared_not_the_one_served_since(world: Identified) -> None:
    # A real rotation; bob compares the new safety number with alice. Between that read and
    # his "accept", the server swaps in mallory's identity, a widened manifest she signed and
    # a runtime key she vouched for.
    mallory = KeyPair.generate()
    widened: dict[str, Any] = {}

    def widen(manifest: dict[str, Any]) -> None:
        manifest["tools"][0]["input_schema"]["properties"]["path"] = {"type": ["string", "array"]}
        widened.update(manifest)

    def mallorys_signature(body: dict[str, Any]) -> dict[str, Any]:
        body["capability_manifest_signature"] = signing.sign_manifest(body["capability_manifest"], MALLORY_KEY)
        return body

    async def scenario() -> None:
        await world.setup()
        assert (await world.call("send_notification", {"title": "hi"})).ok
        await rotate(world)
        compared = await world.client.pending_safety_number(world.relation_id)
        assert compared is not None
        world.user_side.lie(f"/agents/{world.agent.pk}/identity",
                            lambda body: {**body, "jwk": signing.public_of(MALLORY_KEY)})
        world.user_side.lie(f"/agents/{world.agent.pk}", serve_manifest(widen))
        world.user_side.lie(f"/agents/{world.agent.pk}", mallorys_signature)
        world.user_side.lie("/keys", add_agent_key({
            **mallory.public.as_api(), "key_id": mallory.key_id, "identity_kid": signing.jwk_thumbprint(MALLORY_KEY),
            "identity_signature": statements.sign_runtime_key(MALLORY_KEY, agent_id=str(world.agent.pk),
                                                              key_id=mallory.key_id)}))
        with pytest.raises(SafetyNumberMismatch):
            await world.client.accept_identity(world.relation_id, safety_number=compared)
        await forge_call(world, mallory, {"path": "/etc/shadow"},
                         manifest_hash=contract.compile_manifest(widened).hash)

    run(scenario)

    assert world.ran == [{"title": "hi"}] and world.approver.asked == []
    assert world.refusals()[-1] == "identity_changed"


async def forge_call(world: Identified, sender: KeyPair, arguments: dict[str, Any], *, manifest_hash: str) -> None:
    """A read_file call signed by ``sender``, stored by the server, and bob's device polling it."""
    now_ms = int(time.time() * 1000)
    call = {"subtype": "tool_call", "call_id": f"call_{now_ms}", "tool_name": "read_file", "arguments": arguments,
            "permission_scope": "filesystem:read", "timeout_ms": 5000, "manifest_version": 3,
            "manifest_hash": manifest_hash, "reply_key": b64encode(bytes(PrivateKey.generate().public_key)),
            "expires_at": now_ms + 30_000}
    sealed = seal(call, sender=sender, recipients=[Recipient.of(world.device.public)],
                  relation_id=world.relation_id, direction=AGENT_TO_USER, now_ms=now_ms)
    await send_message(ApiClientTransport(world.agent_key), relation_id=world.relation_id,
                       msg_subtype="artifact_tool_call", payload=sealed)
    world.since = await world.client.poll(world.since)


async def rotate(world: Identified) -> None:
    """alice rotates the identity (signed by the old key), re-signs the manifest and the runtime key."""
    def owner_side() -> None:
        identity_services.identity_key_publish(agent_id=world.agent.pk, actor=world.alice,
                                               jwk=signing.public_of(NEW_KEY), rotation=rotation(ALICE_KEY, NEW_KEY),
                                               proof=signing.sign_identity_proof(NEW_KEY, agent_id=str(world.agent.pk)))
        world.manifest = {**world.manifest, "agent_version": "1.0.2"}
        signed_version(world.alice, world.agent.pk, world.manifest, NEW_KEY)

    await database_sync_to_async(owner_side)()
    world.runtime.identity_key = dict(NEW_KEY)
    world.runtime.manifest = contract.compile_manifest(world.manifest)
    await world.runtime.published_version(refresh=True)
    await world.runtime.register_key()


def test_the_agent_seals_to_no_device_the_server_slipped_in(world: Identified) -> None:
    mallory, phone = KeyPair.generate(), KeyPair.generate()
    forged = {"device_id": "tablet", **mallory.public.as_api(), "key_id": mallory.key_id,
              "approved_by_key_id": world.device.key_id,
              "approval": statements.approve_device(mallory, device_id="tablet", key_id=mallory.key_id)}
    root_again = {"device_id": "evil", **KeyPair.generate().public.as_api(), "approved_by_key_id": None,
                  "approval": None}
    sealed_to: list[set[str]] = []

    async def scenario() -> None:
        await world.setup()
        await world.client.keydir.register_device("phone", phone.public, approver=world.device)
        assert (await world.call("send_notification", {"title": "first"})).ok  # pins the laptop (and the approved phone)
        world.agent_side.lie("/keys", add_device(forged))
        world.agent_side.lie("/keys", add_device(root_again))
        world.runtime.keydir.forget()
        original = world.runtime.transport.request

        async def spy(method: str, path: str, **kwargs: Any) -> Any:
            if method == "POST" and path.endswith("/messages"):
                sealed_to.append({c["recipient_key_id"] for c in kwargs["json"]["payload"]["copies"]})
            return await original(method, path, **kwargs)

        world.runtime.transport.request = spy  # type: ignore[method-assign]
        assert (await world.call("send_notification", {"title": "second"})).ok

    run(scenario)

    assert sealed_to == [{world.device.key_id, phone.key_id}]


def test_a_stolen_runtime_key_cannot_widen_the_manifest_the_user_consented_to(world: Identified) -> None:
    # The server and a thief of the runtime key together: the server serves a widened manifest
    # (hash recomputed) and the thief signs a call under it. Only the identity's signature,
    # which neither holds, is missing.
    def widen(manifest: dict[str, Any]) -> None:
        manifest["tools"][0]["input_schema"]["properties"]["path"] = {"type": ["string", "array"]}
    widened = copy.deepcopy(world.manifest)
    widen(widened)
    world.user_side.lie(f"/agents/{world.agent.pk}", serve_manifest(widen))
    # and says bob consented to it, so that neither the hash nor the acknowledged hash gives it away
    world.user_side.lie(f"/h2a/relations/{world.relation_id}",
                        lambda body: {**body, "acknowledged_manifest_hash": contract.compile_manifest(widened).hash})

    async def scenario() -> None:
        await world.setup()
        now_ms = int(time.time() * 1000)
        call = {"subtype": "tool_call", "call_id": "call_widened", "tool_name": "read_file",
                "arguments": {"path": ["/etc/passwd", "/etc/shadow"]}, "permission_scope": "filesystem:read",
                "timeout_ms": 5000, "manifest_version": 2, "manifest_hash": contract.compile_manifest(widened).hash,
                "reply_key": b64encode(bytes(PrivateKey.generate().public_key)), "expires_at": now_ms + 30_000}
        sealed = seal(call, sender=world.runtime_keys, recipients=[Recipient.of(world.device.public)],
                      relation_id=world.relation_id, direction=AGENT_TO_USER, now_ms=now_ms)
        await send_message(ApiClientTransport(world.agent_key), relation_id=world.relation_id,
                           msg_subtype="artifact_tool_call", payload=sealed)
        world.since = await world.client.poll(world.since)

    run(scenario)

    assert world.ran == [] and world.approver.asked == [] and world.refusals() == ["manifest_unverified"]


def test_an_acknowledged_hash_that_is_not_the_acknowledged_versions_is_refused(world: Identified) -> None:
    world.user_side.lie(f"/h2a/relations/{world.relation_id}",
                        lambda body: {**body, "acknowledged_manifest_hash": "0" * 64})

    async def scenario() -> ToolResult:
        await world.setup()
        return await world.call("send_notification", {"title": "hi"})

    result = run(scenario)

    assert (result.status, result.reason) == ("denied", "manifest_unverified") and world.ran == []


def test_an_identity_reset_on_the_server_is_refused_until_bob_accepts(world: Identified) -> None:
    # Whoever holds the owner's account (or the server's database) resets the identity.
    async def scenario() -> ToolResult:
        await world.setup()
        assert (await world.call("send_notification", {"title": "hi"})).ok
        await database_sync_to_async(identity_services.identity_key_publish)(
            agent_id=world.agent.pk, actor=world.alice, jwk=signing.public_of(MALLORY_KEY), reset=True,
            proof=signing.sign_identity_proof(MALLORY_KEY, agent_id=str(world.agent.pk)))
        world.client.keydir.forget()
        world.client._invalidate(world.relation_id)
        return await world.call("send_notification", {"title": "after the reset"}, timeout=2)

    with pytest.raises(ToolCallTimeout):
        run(scenario)

    assert world.ran == [{"title": "hi"}] and world.refusals() == ["identity_changed"]


def test_a_call_the_server_delivers_after_its_expiry_is_dropped_unprompted(world: Identified) -> None:
    async def scenario() -> None:
        await world.setup()
        task = asyncio.create_task(world.runtime.call_tool(world.relation_id, "read_file", {"path": "a"}, timeout=1))
        await asyncio.sleep(0)
        with pytest.raises(ToolCallTimeout):
            await task
        await asyncio.sleep(0.2)  # the server held the call until the agent had given up
        world.since = await world.client.poll(world.since)

    run(scenario)

    assert world.ran == [] and world.approver.asked == [] and world.refusals() == ["call_expired"]


def _grant_only_filesystem(world: Identified) -> None:
    relation = Relation.objects.get(pk=world.relation_id)
    relation.granted_scopes = ["filesystem:read"]
    relation.save(update_fields=["granted_scopes"])


def test_a_grant_the_server_forges_is_asked_on_the_device_before_anything_runs(world: Identified) -> None:
    # bob never allowed notification:send (low: silent once granted); the server says he did.
    _grant_only_filesystem(world)
    refusing: dict[str, list[PromptRequest]] = {"asked": []}

    def no(request: PromptRequest) -> bool:
        refusing["asked"].append(request)
        return False

    world.client.prompt = no

    async def scenario() -> ToolResult:
        await world.setup()
        await world.client.relation(world.relation_id)  # the device has seen bob's grants
        world.user_side.lie(f"/h2a/relations/{world.relation_id}",
                            lambda body: {**body, "granted_scopes": ["filesystem:read", "notification:send"]})
        world.client._invalidate(world.relation_id)
        return await world.call("send_notification", {"title": "you won a prize"})

    result = run(scenario)

    assert (result.status, result.reason) == ("denied", "user_refused") and world.ran == []
    assert [r.newly_granted for r in refusing["asked"]] == [True]


def test_a_grant_given_on_the_web_is_confirmed_once_on_the_device(world: Identified) -> None:
    _grant_only_filesystem(world)

    async def scenario() -> list[ToolResult]:
        await world.setup()
        await world.client.relation(world.relation_id)
        await database_sync_to_async(relation_services.relation_reconsent)(
            relation=await database_sync_to_async(Relation.objects.get)(pk=world.relation_id),
            granted_scopes=["filesystem:read", "notification:send"])
        world.client._invalidate(world.relation_id)
        return [await world.call("send_notification", {"title": f"#{i}"}) for i in range(2)]

    results = run(scenario)

    assert [r.ok for r in results] == [True, True]
    assert [(r.scope, r.newly_granted) for r in world.approver.asked] == [("notification:send", True)]


def test_a_reconsent_the_server_claims_is_asked_on_the_device_before_the_wider_tool_runs(world: Identified) -> None:
    # alice widens read_file's path to arrays (breaking: bob must consent again). The server
    # hides it completely: bob "acknowledged" the new version, nothing is pending.
    refusing: list[PromptRequest] = []

    def no(request: PromptRequest) -> bool:
        refusing.append(request)
        return False

    world.client.prompt = no

    async def scenario() -> ToolResult:
        await world.setup()
        await world.client.relation(world.relation_id)  # the device saw bob's consent to v2
        widened = copy.deepcopy(world.manifest)
        widened["agent_version"] = "2.0.0"
        widened["tools"][0]["input_schema"]["properties"]["path"] = {
            "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
        await database_sync_to_async(signed_version)(world.alice, world.agent.pk, widened, ALICE_KEY)
        digest = contract.compile_manifest(widened).hash
        world.user_side.lie(f"/h2a/relations/{world.relation_id}", lambda body: {
            **body, "status": "active", "pending_scopes": [], "acknowledged_manifest_version": 3,
            "acknowledged_manifest_hash": digest})
        world.client._invalidate(world.relation_id)
        world.runtime.manifest = contract.compile_manifest(widened)
        await world.runtime.published_version(refresh=True)
        return await world.call("read_file", {"path": ["/etc/passwd", "/etc/shadow"]})

    result = run(scenario)

    assert (result.status, result.reason) == ("denied", "user_refused") and world.ran == []
    assert [(r.scope, r.newly_granted) for r in refusing] == [("filesystem:read", True)]
