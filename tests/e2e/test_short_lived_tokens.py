"""SPEC §10.3 in the SDK: DemoBot's tool runtime holds only short-lived hat_ tokens, handed
to it by a parent process that keeps the agent key, against a live demo server whose
tokens live 2 s. It calls bob's tool again and again while its tokens are renewed and its
socket is closed at each token's end, hears every event, never logs the key, and stops
with a clear error once alice revokes the key."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hashee_sdk import (
    AccessToken,
    Agent,
    AgentKeyExchange,
    Device,
    KeyStore,
    TokenExchangeRefused,
    TokenSource,
    manifest_from_tools,
    publish_runtime_key,
    tool,
)
from tests.e2e.live import LiveServer, sqlite_demo_server

pytestmark = pytest.mark.sqlite_only
TOKEN_SECONDS = 2
CALLS_AT_MOST = 400  # a bound on the loop below, far above what three token lifetimes take


@tool(scope="notes:read", sensitivity="low")
def read_note(title: str) -> str:
    """Read one of your notes."""
    return f"{title}: milk, eggs, coffee"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # The runtime calls as fast as it can across several token lifetimes: not a rate-limit test.
    with sqlite_demo_server(tmp_path_factory.mktemp("tokens"), HASHEE_ACCESS_TOKEN_SECONDS=str(TOKEN_SECONDS),
                            HASHEE_TOOL_CALLS_PER_MINUTE="1000") as live:
        yield live


@pytest.fixture(scope="module")
def bobs_device(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bob's one device, the same in every test (a second one would need the first's approval)."""
    return tmp_path_factory.mktemp("bobs-device")


class Parent:
    """The process that holds the agent key and hands tokens to the runtime (counted)."""

    def __init__(self, server: LiveServer) -> None:
        manifest = manifest_from_tools([read_note], agent_version="1.0.0", scope_labels={"notes:read": "Read notes"})
        with server.api(server.alice_key) as alice:
            agent = alice.post("/agents", json={"name": "Notes (tokens)", "capability_manifest": manifest})
            assert agent.status_code == 201, agent.text
            self.agent_id = agent.json()["agent_id"]
            key = alice.post(f"/agents/{self.agent_id}/credentials", json={"name": "tool runtime"}).json()
        self.key_id, self.agent_key = key["key_id"], key["secret"]
        with server.api(server.bob_key) as bob:
            relation = bob.post("/h2a/relations", json={"agent_id": self.agent_id, "granted_scopes": ["notes:read"]})
            assert relation.status_code == 201, relation.text
        self.relation_id = relation.json()["relation_id"]
        self.exchange = AgentKeyExchange(server.url, self.agent_key)
        self.handed = 0

    async def hand_token(self) -> AccessToken:
        self.handed += 1
        return await self.exchange()

    def revoke(self, server: LiveServer) -> None:
        with server.api(server.alice_key) as alice:
            assert alice.delete(f"/agents/{self.agent_id}/credentials/{self.key_id}").status_code == 200


async def call_until_renewed(agent: Agent, parent: Parent, tokens: TokenSource) -> list[Any]:
    """Call read_note until the runtime has had four tokens (so three have ended), keeping
    each result."""
    results = []
    for _ in range(CALLS_AT_MOST):
        result = await agent.call_tool(parent.relation_id, "read_note", {"title": "groceries"}, timeout=30)
        results.append(result.unwrap()["result"])  # read_note -> str: {"result": …}
        if tokens.renewals >= 4:
            break
        await asyncio.sleep(0.05)
    return results


def test_a_runtime_with_only_tokens_calls_tools_across_renewals_and_socket_expiries(
        server: LiveServer, bobs_device: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    parent = Parent(server)
    heard: list[int] = []

    async def scenario() -> None:
        await publish_runtime_key(server.url, parent.agent_key, agent_id=parent.agent_id,
                                  keystore=KeyStore(tmp_path / "agent"))
        async with Device(server.url, server.bob_key, tools=[read_note], keystore=KeyStore(bobs_device),
                          prompt=lambda request: True) as device:
            serving = asyncio.create_task(device.serve_forever())
            tokens = TokenSource(parent.hand_token)
            async with Agent(server.url, tokens, agent_id=parent.agent_id, keystore=KeyStore(tmp_path / "agent")) as agent:
                handle = agent.runtime.handle_frame

                async def hearing(frame: Any) -> None:
                    heard.append(int(frame["id"]))
                    await handle(frame)

                agent.runtime.handle_frame = hearing  # type: ignore[method-assign]
                results = await call_until_renewed(agent, parent, tokens)
                assert results and set(results) == {"groceries: milk, eggs, coffee"}
                assert parent.handed == tokens.renewals >= 4
            serving.cancel()

    with caplog.at_level(logging.DEBUG):
        asyncio.run(asyncio.wait_for(scenario(), timeout=120))

    with server.api(parent.agent_key) as key:
        logged = key.get("/events?since=0&limit=1000").json()
    # Every event from its first call's to its last answer, once and in order, across the expiries.
    assert heard == [event["id"] for event in logged["events"] if heard[0] <= event["id"] <= heard[-1]]
    sdk_records = [r for r in caplog.records if r.name.startswith("hashee_sdk")]
    assert any("its token ended; reconnecting at once" in r.getMessage() for r in sdk_records)
    assert [r.getMessage() for r in sdk_records if r.levelno >= logging.WARNING] == []  # no drop, no refusal
    assert parent.agent_key not in caplog.text and "hat_" not in caplog.text  # not even at DEBUG


def test_a_revoked_agent_key_ends_renewal_with_a_clear_error(server: LiveServer, bobs_device: Path,
                                                             tmp_path: Path) -> None:
    parent = Parent(server)
    outcome: dict[str, Any] = {}

    async def scenario() -> None:
        await publish_runtime_key(server.url, parent.agent_key, agent_id=parent.agent_id,
                                  keystore=KeyStore(tmp_path / "agent"))
        async with Device(server.url, server.bob_key, tools=[read_note], keystore=KeyStore(bobs_device),
                          prompt=lambda request: True):
            async with Agent(server.url, TokenSource(parent.hand_token), agent_id=parent.agent_id,
                             keystore=KeyStore(tmp_path / "agent")) as agent:
                assert (await agent.call_tool(parent.relation_id, "read_note", {"title": "a"}, timeout=30)).ok
                parent.revoke(server)
                with pytest.raises(TokenExchangeRefused) as refused:
                    await agent.call_tool(parent.relation_id, "read_note", {"title": "b"}, timeout=30)
                outcome["call"] = refused.value
                assert agent.listener.task is not None
                outcome["listener"] = await asyncio.gather(agent.listener.task, return_exceptions=True)

    asyncio.run(asyncio.wait_for(scenario(), timeout=120))

    assert outcome["call"].error == "invalid_grant" and "revoked" in str(outcome["call"])
    assert isinstance(outcome["listener"][0], TokenExchangeRefused)
    assert parent.agent_key not in str(outcome["call"])
