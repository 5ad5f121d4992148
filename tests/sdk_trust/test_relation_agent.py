"""Issue 23, hole 6: a relation's agent is pinned. The server presents relation B (mallory's
agent, no identity key, a byte copy of alice's manifest) as alice's agent A: B's call must
not run under A's name, inside the 24-hour window bob opened for A."""

from __future__ import annotations

from typing import Any

from hashee_sdk import KeyPair, Recipient, seal
from hashee_sdk.rest import HttpResponse
from hashee_sdk.wire import AGENT_TO_USER
from tests.sdk.fakes import AGENT_ID, RELATION_ID, FakeServer
from tests.sdk.test_client import tool_call
from tests.sdk_trust.scene import Scene, run

RELATION_B = "7d1f4f0e-1111-4a4a-9b9b-00000000000b"
AGENT_B = "7d1f4f0e-2222-4a4a-9b9b-00000000000b"


class WithMallorysRelation(FakeServer):
    """Bob also has a relation B with mallory's agent (its truth: agent B, key ``b``)."""

    def __init__(self, mallory: KeyPair) -> None:
        super().__init__()
        self.mallory = mallory

    def handle(self, party: str, method: str, path: str, body: Any) -> HttpResponse:
        if path == f"/agents/{AGENT_B}":  # a byte copy of alice's manifest
            response = super().handle(party, method, f"/agents/{AGENT_ID}", body)
            return HttpResponse(response.status, {**response.body, "agent_id": AGENT_B}, response.headers)
        if RELATION_B not in path:
            return super().handle(party, method, path, body)
        response = super().handle(party, method, path.replace(RELATION_B, RELATION_ID), body)
        answer = response.body
        answer["relation_id"] = RELATION_B
        if path.endswith("/keys"):
            answer["agent"] = {"agent_id": AGENT_B, "keys": [{**self.mallory.public.as_api(),
                                                              "key_id": self.mallory.key_id}]}
        else:
            answer["agent_id"] = AGENT_B
        return HttpResponse(response.status, answer, response.headers)


def presented_as_alices(body: Any) -> Any:
    """The lie: relation B's agent is alice's (in the relation and in its key listing)."""
    if "agent" in body:
        body["agent"]["agent_id"] = AGENT_ID
    else:
        body["agent_id"] = AGENT_ID
    return body


def mallory_scene() -> tuple[Scene, KeyPair]:
    mallory = KeyPair.generate()
    scene = Scene()
    server = WithMallorysRelation(mallory)
    server.devices, server.agent_keys = scene.server.devices, scene.server.agent_keys
    scene.server = server
    scene.user_side.inner = server.transport("user")
    scene.agent_side.inner = server.transport("agent")
    return scene, mallory


def call_in_b(scene: Scene, mallory: KeyPair, call_id: str) -> dict[str, Any]:
    """A read_file call signed by mallory's key in relation B, under alice's manifest."""
    now_ms = int(scene.clock.now * 1000)
    call = tool_call("read_file", call_id, arguments={"path": "/etc/shadow"}, expires_at=now_ms + 60_000)
    payload = seal(call, sender=mallory, recipients=[Recipient.of(scene.device.public)], relation_id=RELATION_B,
                   direction=AGENT_TO_USER, now_ms=now_ms)
    return {"message_id": f"b-{call_id}", "relation_id": RELATION_B, "sender": "agent",
            "msg_subtype": "artifact_tool_call", "content_type": "application/json", "payload": payload}


def test_another_agents_relation_presented_as_alices_runs_nothing_in_alices_window() -> None:
    scene, mallory = mallory_scene()
    assert run(scene.call("read_file", {"path": "notes.txt"})) is not None  # bob allows A for 24 h
    assert len(scene.prompt.asked) == 1
    scene.user_side.lie(f"/h2a/relations/{RELATION_B}", presented_as_alices)
    scene.user_side.lie(f"/h2a/relations/{RELATION_B}/keys", presented_as_alices)

    assert run(scene.client.handle_message(RELATION_B, call_in_b(scene, mallory, "call-b"))) is None

    assert scene.handlers.calls == [("read_file", {"path": "notes.txt"})] and len(scene.prompt.asked) == 1
    assert scene.refusals() == ["untrusted_sender"]


def test_a_relation_first_seen_with_one_agent_is_refused_when_presented_as_another() -> None:
    scene, mallory = mallory_scene()
    assert run(scene.client.handle_message(RELATION_B, call_in_b(scene, mallory, "call-b1"))) is not None  # as B
    scene.user_side.lie(f"/h2a/relations/{RELATION_B}", presented_as_alices)
    scene.user_side.lie(f"/h2a/relations/{RELATION_B}/keys", presented_as_alices)
    scene.client.keydir.forget()
    scene.client._invalidate(RELATION_B)

    assert run(scene.client.handle_message(RELATION_B, call_in_b(scene, mallory, "call-b2"))) is None

    assert scene.refusals() == ["agent_changed"]
    assert len(scene.handlers.calls) == 1  # B's own call, asked and run as B's; never again as A's
