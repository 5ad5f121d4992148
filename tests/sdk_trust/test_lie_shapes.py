"""Every answer the SDKs trust, rewritten by shape (tests/sdk_trust/shapes.py): each place
of each answer is dropped, nulled, zeroed, emptied, swapped for another party's or replayed
from before. Whatever the lie, the device never runs what the honest server's state would
not run, never crashes, and says why with a stable reason; the agent never seals a call to
a key the user's devices did not vouch for."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from hashee_sdk import SdkError, ToolResult
from hashee_sdk.core.codes import DENIAL_REASONS, REFUSAL_REASONS, TOOL_ERROR_CODES
from hashee_sdk.rest import HttpResponse, Transport
from tests.sdk.fakes import RELATION_ID
from tests.sdk_trust.scene import Scene, run
from tests.sdk_trust.shapes import MISSING, Lie, lies
from tests.sdk_trust.test_lying_server import PASSWD, widened_path

STABLE = frozenset(DENIAL_REASONS) | frozenset(REFUSAL_REASONS) | frozenset(TOOL_ERROR_CODES)


class Recorder:
    """Forwards to ``inner`` and keeps the latest answer to each GET path."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.answers: dict[str, Any] = {}

    async def request(self, method: str, path: str, *, json: Any = None,
                      headers: Any = None) -> HttpResponse:
        response = await self.inner.request(method, path, json=json, headers=headers)
        if method == "GET" and 200 <= response.status < 300:
            self.answers[path] = copy.deepcopy(response.body)
        return response


@dataclass(frozen=True)
class Case:
    """A state the honest server reaches after bob's device first looked (a notify call),
    the call the agent then makes, and whether the honest server's state lets it run."""

    change: Callable[[Scene], dict[str, Any] | None]  # returns the manifest the agent calls under, if new
    tool: str
    arguments: dict[str, Any]
    runs: bool


DOCS_ONLY = {"type": "object", "properties": {"path": {"type": "string", "pattern": "^/home/bob/docs/"}},
             "required": ["path"]}
NARROWED = {"filesystem:read": {"arguments": {"read_file": DOCS_ONLY}}}


def _breaking(scene: Scene) -> dict[str, Any]:
    scene.server.publish(widened_path(), pending=["filesystem:read"])
    return widened_path()


def _revoke(scene: Scene) -> None:
    """Bob revokes on his device: signed (SPEC §9.6). A revocation given on the web carries
    no signature, and a server that hides it cannot be caught: the device never saw it."""
    run(scene.client.revoke(RELATION_ID))


def _withdraw_location(scene: Scene) -> None:
    """Bob withdraws location:read on his device, signed (the web's unsigned withdrawal is,
    as a revocation, only as good as the server's word); read_file stays narrowed to his
    documents (SPEC §5.2), so the answers carry grant options to lie about."""
    run(scene.client.reconsent(RELATION_ID, [s for s in scene.server.granted if s != "location:read"],
                               grant_options=NARROWED))


def _narrow(scene: Scene) -> None:
    """Bob grants read_file only under /home/bob/docs/, signed (SPEC §5.2 ``arguments``)."""
    run(scene.client.reconsent(RELATION_ID, list(scene.server.granted), grant_options=NARROWED))


def _use_once_offline(scene: Scene) -> None:
    """Bob grants location:read only this time (read_file narrowed too), signed; the agent's
    call uses it while the server does not take the device's withdrawal: the server still
    reports the once-grant, and only the device's memory says it is used."""
    run(scene.client.reconsent(RELATION_ID, list(scene.server.granted),
                               grant_options={"location:read": {"once": True}, **NARROWED}))
    scene.server.offline = True
    assert run(scene.call("locate", {})) is not None  # answered


CASES = {
    "pending_reconsent": Case(_breaking, "read_file", {"path": PASSWD}, runs=False),
    "outside_narrowed_grant": Case(_narrow, "read_file", {"path": "/etc/passwd"}, runs=False),
    "once_used": Case(_use_once_offline, "locate", {}, runs=False),
    "revoked": Case(_revoke, "notify", {"title": "after revoke"}, runs=False),
    "withdrawn_scope": Case(_withdraw_location, "locate", {}, runs=False),
    "allowed": Case(lambda scene: None, "notify", {"title": "fine"}, runs=True),
}


def _stage(case: Case) -> tuple[Scene, Recorder, Recorder, Any]:
    """Bob's device looks once (honest), then the server's state changes."""
    scene = Scene()
    user, agent = Recorder(scene.user_side.inner), Recorder(scene.agent_side.inner)
    scene.user_side.inner, scene.agent_side.inner = user, agent
    assert run(scene.call("notify", {"title": "first look"})) is not None
    older = {"user": dict(user.answers), "agent": dict(agent.answers)}
    manifest = case.change(scene)
    if manifest is not None:
        scene.agent = scene.runtime(manifest)
    return scene, user, agent, older


def _honest_answers(name: str) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The GET answers each side reads for the case's call, as the honest server gives them,
    and the ones it gave before the state changed (what a replay serves)."""
    case = CASES[name]
    scene, user, agent, older = _stage(case)
    user.answers.clear()
    agent.answers.clear()
    scene.client._invalidate(RELATION_ID)
    scene.client.keydir.forget()
    scene.agent.keydir.forget()
    run(scene.call(case.tool, case.arguments))
    return {"user": dict(user.answers), "agent": dict(agent.answers)}, older


def _params() -> list[Any]:
    found = []
    for name in CASES:
        honest, older = _honest_answers(name)
        for side, answers in honest.items():
            for path, body in answers.items():
                for lie in lies(body, older[side].get(path, MISSING)):
                    found.append(pytest.param(name, side, path, lie.pointer, lie.kind, id=f"{name}:{side}:{path}{lie}"))
    return found


def _lie_now(side: str, path: str, pointer: tuple[Any, ...], kind: str, older: dict[str, Any]) -> Callable[[Any], Any]:
    """The rewrite of the live answer (keys are made anew in every scene: the lie is computed
    on what the server answers now, and what it answered before the change)."""
    def rewrite(body: Any) -> Any:
        for lie in lies(body, older[side].get(path, MISSING)):
            if lie.pointer == pointer and lie.kind == kind:
                return Lie.apply(lie, body)
        return body  # this answer has no such place (e.g. another read of the same path)
    return rewrite


@pytest.mark.parametrize(("name", "side", "path", "pointer", "kind"), _params())
def test_a_lie_never_runs_what_the_honest_state_would_not(name: str, side: str, path: str,
                                                          pointer: tuple[Any, ...], kind: str) -> None:
    case = CASES[name]
    scene, _, _, older = _stage(case)
    ran_before, sealed_before = list(scene.handlers.calls), len(scene.server.messages)
    liar = scene.user_side if side == "user" else scene.agent_side
    liar.lie(path, _lie_now(side, path, pointer, kind, older))
    scene.client._invalidate(RELATION_ID)
    scene.client.keydir.forget()
    scene.agent.keydir.forget()

    try:
        result: ToolResult | None = run(scene.call(case.tool, case.arguments))
    except SdkError:  # the agent SDK refused to send (its own typed, named error)
        result = None

    ran = scene.handlers.calls[len(ran_before):]
    if not case.runs:
        assert ran == [], f"the lie made the device run {ran}"
    else:
        assert len(ran) <= 1
    if result is not None and result.status != "ok":
        assert result.reason in STABLE, result.reason
    assert all(reason in STABLE for reason in scene.refusals()), scene.refusals()
    if result is None or result.status != "ok":  # what was stopped is told, on one side or the other
        assert scene.refusals() or result is not None or len(scene.server.messages) == sealed_before
    for message in scene.server.messages[sealed_before:]:
        if message["msg_subtype"] == "artifact_tool_call":
            recipients = {copy_["recipient_key_id"] for copy_ in message["payload"]["copies"]}
            assert recipients <= {scene.device.key_id}, "the agent sealed a call to a key bob never vouched for"


# --- events: what the server pushes, rewritten the same ways --------------------------------


def _event_params() -> list[Any]:
    scene, older = _signed_withdrawal()
    frame = scene.server.relation_frame("h2a.relation_updated")
    return [pytest.param(lie.pointer, lie.kind, id=f"relation_updated{lie}") for lie in lies(frame, older)]


def _signed_withdrawal() -> tuple[Scene, Any]:
    """Bob's device withdrew location:read, signed; the agent and the device were told (the
    honest event, with the statement). Returns the scene and the event before the withdrawal
    (with bob's earlier signed grant of every scope: what a replay serves)."""
    scene, _, _, _ = _stage(CASES["allowed"])
    run(scene.client.reconsent(RELATION_ID, list(scene.server.granted)))  # signed: every scope, location too
    older = scene.server.relation_frame("h2a.relation_updated")
    run(scene.agent.handle_frame(older))
    _withdraw_location(scene)
    honest = scene.server.relation_frame("h2a.relation_updated")
    run(scene.agent.handle_frame(honest))
    run(scene.client.handle_frame(honest))
    return scene, older


@pytest.mark.parametrize(("pointer", "kind"), _event_params())
def test_a_lying_relation_event_never_gives_back_what_bob_withdrew(pointer: tuple[Any, ...], kind: str) -> None:
    scene, older = _signed_withdrawal()
    believed = scene.agent.consents.newest(RELATION_ID)
    honest = scene.server.relation_frame("h2a.relation_updated")
    lie = next(lie for lie in lies(honest, older) if lie.pointer == pointer and lie.kind == kind)
    lied = lie.apply(honest)

    run(scene.agent.handle_frame(lied))  # neither side raises, whatever the frame
    run(scene.client.handle_frame(lied))
    try:
        result: ToolResult | None = run(scene.call("locate", {}))
    except SdkError:  # the agent refuses before sending: what bob's statement says still holds
        result = None

    assert scene.agent.consents.newest(RELATION_ID) == believed
    assert ("locate", {}) not in scene.handlers.calls
    assert result is None or result.reason in STABLE
