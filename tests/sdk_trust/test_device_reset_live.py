"""After bob resets his devices (a new root: every earlier device revoked, SPEC §9.2 made
loud by issue 23), the agent seals to nothing until its owner compares the new safety
number — or, for an agent without an identity, the new root's key id — and accepts it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agents import services as agent_services
from agents.apikey_services import api_key_create
from hashee_sdk import AgentRuntime, KeyPair, LocalStore, NoRecipientKey, SafetyNumberMismatch
from hashee_sdk.keys import KeyDirectory
from relations import services as relation_services
from tests.toolcalls.test_roundtrip import ApiClientTransport, run

pytestmark = pytest.mark.django_db(transaction=True)


def sealed_to(runtime: AgentRuntime, relation_id: str) -> Any:
    async def recipients() -> list[str]:
        return [k.key_id for k in await runtime._recipients(relation_id, None)]
    return recipients


def test_the_agent_trusts_bobs_new_root_only_once_its_owner_accepts_what_was_compared(
        alice: Any, bob: Any, manifest: dict[str, Any]) -> None:
    agent = agent_services.agent_create(owner=alice, name="DemoBot", capability_manifest=manifest)[0]
    relation_id = str(relation_services.relation_create(user=bob, agent_id=agent.pk,
                                                        granted_scopes=["notification:send"]).pk)
    bob_api = ApiClientTransport(api_key_create(user=bob)[1])
    runtime = AgentRuntime(transport=ApiClientTransport(api_key_create(user=alice, agent=agent)[1]),
                           agent_id=str(agent.pk), keys=KeyPair.generate(), manifest=manifest,
                           store=LocalStore.in_memory())
    laptop, tablet, mallory = KeyPair.generate(), KeyPair.generate(), KeyPair.generate()
    devices = KeyDirectory(bob_api)

    async def scenario() -> None:
        await devices.register_device("laptop", laptop.public)
        assert await sealed_to(runtime, relation_id)() == [laptop.key_id]
        await devices.register_device("tablet", tablet.public, reset=True)
        await runtime.poll(0)  # keys.device_revoked, keys.device_reset
        with pytest.raises(NoRecipientKey):
            await sealed_to(runtime, relation_id)()
        with pytest.raises(SafetyNumberMismatch):  # what was compared is not what is listed
            await runtime.accept_user_reset(relation_id, root_key_id=mallory.key_id)
        with pytest.raises(NoRecipientKey):
            await sealed_to(runtime, relation_id)()
        await runtime.accept_user_reset(relation_id, root_key_id=tablet.key_id)
        assert await sealed_to(runtime, relation_id)() == [tablet.key_id]

    run(lambda: asyncio.wait_for(scenario(), 20))
