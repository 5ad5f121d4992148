"""An agent runtime and bob's device talking through the fake server, each behind a
:class:`LyingTransport` the test turns into a liar."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from hashee_sdk import (
    AgentRuntime,
    AuditLog,
    KeyPair,
    LocalStore,
    Recipient,
    ToolCallTimeout,
    ToolResult,
    UserClient,
    seal,
)
from hashee_sdk.wire import AGENT_TO_USER
from tests.sdk.fakes import AGENT_ID, RELATION_ID, FakeServer
from tests.sdk.test_client import Clock, Handlers, Prompt
from tests.sdk_trust.lying import LyingTransport


class Scene:
    def __init__(self, *, state: Path | None = None) -> None:
        self.server = FakeServer()
        self.clock = Clock()
        self.agent_keys, self.device = KeyPair.generate(), KeyPair.generate()
        self.server.publish_agent(self.agent_keys)
        self.server.publish_device("laptop", self.device)
        self.user_side = LyingTransport(self.server.transport("user"))
        self.agent_side = LyingTransport(self.server.transport("agent"))
        self.prompt, self.handlers = Prompt(), Handlers()
        self.state = state
        self.client = self.start_client()
        self.agent = self.runtime(self.server.manifest)

    def start_client(self, *, keys: KeyPair | None = None, device_id: str = "laptop") -> UserClient:
        """Bob's client (again, after a restart: the same device and local files)."""
        audit = AuditLog(self.state / f"{device_id}.sqlite3") if self.state is not None else AuditLog.in_memory()
        return UserClient(transport=self.user_side, keys=keys or self.device, device_id=device_id,
                          prompt=self.prompt, handlers=self.handlers.all(), clock=self.clock, audit=audit)

    def runtime(self, manifest: dict[str, Any], *, store: LocalStore | None = None) -> AgentRuntime:
        return AgentRuntime(transport=self.agent_side, agent_id=AGENT_ID, keys=self.agent_keys, manifest=manifest,
                            clock=self.clock, store=store or LocalStore.in_memory())

    async def call(self, name: str, arguments: dict[str, Any], *, agent: AgentRuntime | None = None,
                   deliver_after_s: float = 0, timeout: float = 30) -> ToolResult | None:
        """One call through the pipe (delivered ``deliver_after_s`` later on bob's clock);
        None when no answer came back, or none the agent took. Decided by what the device sent
        and the agent did with it, never by how long a loaded machine took: ``timeout`` only
        bounds the wait (and sets the call's ``expires_at`` on the scene's clock)."""
        agent = agent or self.agent
        sent = len(self.server.messages)
        task = asyncio.create_task(agent.call_tool(RELATION_ID, name, arguments, timeout=timeout))
        while len(self.server.messages) == sent and not task.done():
            await asyncio.sleep(0.002)
        if task.done():
            return await task  # refused before sending: raises
        self.clock.now += deliver_after_s
        # The answer reaches the agent as soon as it is sent, not after what the device does
        # once it has answered (withdrawing a used once-grant: SPEC §5.2).
        device = asyncio.create_task(self.client.handle_frame(self.server.frame(sent)))
        while len(self.server.messages) == sent + 1 and not device.done():
            await asyncio.sleep(0.002)
        if len(self.server.messages) > sent + 1:
            await agent.handle_frame(self.server.frame(sent + 1))
        await device
        # The agent settles a call's future as it takes an answer (a result, a denial, or
        # ResultInvalid): unsettled now, no answer it takes will come.
        if not task.done() and not any(pending.future.done() for pending in vars(agent)["_pending"].values()):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            return None
        try:
            return await task
        except ToolCallTimeout:
            return None

    def forge_call(self, artifact: dict[str, Any], sender: KeyPair) -> dict[str, Any]:
        """A call signed by ``sender`` and sealed to bob's laptop, stored by the server."""
        envelope = seal(artifact, sender=sender, recipients=[Recipient.of(self.device.public)],
                        relation_id=RELATION_ID, direction=AGENT_TO_USER, now_ms=int(self.clock.now * 1000))
        return self.server.post("agent", "artifact_tool_call", envelope)

    def refusals(self, client: UserClient | None = None) -> list[str | None]:
        """The reasons the audit log gives for what was stopped or denied."""
        entries = (client or self.client).audit.entries()
        return [e.reason for e in entries if e.status in ("refused", "denied")]


def run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, timeout=20))
