"""SPEC §9 against a server that lies: every attack ends without the tool running, with a
stable reason the user sees (an audit entry, or a denial the agent gets)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from pathlib import Path
from typing import Any

import pytest

from hashee_sdk import AgentRuntime, AuditLog, KeyPair, LocalStore, ToolResult, UserClient
from hashee_sdk.core.canonical import canonical_hash
from tests.sdk.fakes import AGENT_ID, RELATION_ID, manifest
from tests.sdk.test_client import tool_call
from tests.sdk_trust.lying import add_agent_key, add_device, serve_manifest, settle_relation
from tests.sdk_trust.scene import Scene, run

PASSWD = ["/etc/passwd", "/etc/shadow"]


def widened_path(base: dict[str, Any] | None = None) -> dict[str, Any]:
    """The issue's breaking change: read_file's ``path`` from a string to a string or a list."""
    changed = copy.deepcopy(base or manifest())
    changed["tools"][0]["input_schema"]["properties"]["path"] = {
        "anyOf": [{"type": "string", "maxLength": 1024}, {"type": "array", "items": {"type": "string"}}]}
    return changed


def statuses(*results: ToolResult | None) -> list[tuple[str, str | None] | None]:
    return [(r.status, r.reason) if r is not None else None for r in results]


# --- the issue's three reproductions -----------------------------------------------------


def test_issue_a_an_agent_key_the_server_injects_is_never_trusted() -> None:
    scene = Scene()
    run(scene.call("notify", {"title": "hello"}))  # bob's device pins the agent's key
    mallory = KeyPair.generate()
    scene.user_side.lie("/keys", add_agent_key({**mallory.public.as_api(), "key_id": mallory.key_id}))

    assert run(scene.client.handle_frame(scene.forge_call(tool_call("notify", "forged"), mallory))) is None
    assert run(scene.client.handle_frame(scene.forge_call(tool_call("locate", "forged-2"), mallory))) is None
    assert scene.handlers.calls == [("notify", {"title": "hello"})] and scene.prompt.asked == []
    # For an agent without an identity key, an injected key looks like a second runtime's:
    # refused, and answered with that denial only (tests/sdk_trust/test_live_server.py opens it).
    assert scene.refusals() == ["runtime_key_unpinned", "runtime_key_unpinned"]


def test_issue_b_after_a_breaking_change_read_file_never_runs_with_a_list_of_paths() -> None:
    scene = Scene()
    scene.server.publish(widened_path(), pending=["filesystem:read"])
    scene.user_side.lie(f"/h2a/relations/{RELATION_ID}", settle_relation)  # hides the pending re-consent
    v2 = scene.runtime(widened_path())

    result = run(scene.call("read_file", {"path": PASSWD}, agent=v2))
    other_tool = run(scene.call("notify", {"title": "still works"}, agent=v2))

    assert statuses(result, other_tool) == [("denied", "reauth_required"), ("ok", None)]
    assert scene.handlers.calls == [("notify", {"title": "still works"})]


def test_issue_c_a_call_replayed_after_a_restart_runs_once(tmp_path: Path) -> None:
    scene = Scene(state=tmp_path)
    assert statuses(run(scene.call("notify", {"title": "once"}))) == [("ok", None)]
    stored = scene.server.messages[0]

    restarted = scene.start_client()
    replays = [scene.server.frame(0), scene.server.post("agent", "artifact_tool_call", stored["payload"])]

    assert [run(restarted.handle_frame(frame)) for frame in replays] == [None, None]
    assert scene.handlers.calls == [("notify", {"title": "once"})]
    assert scene.refusals(restarted) == ["call_replayed", "call_replayed"]


# --- keys ----------------------------------------------------------------------------------


def test_a_device_the_server_injects_is_never_sealed_to() -> None:
    scene = Scene()
    run(scene.call("notify", {"title": "a"}))  # the runtime pins bob's laptop
    mallory = KeyPair.generate()
    scene.agent_side.lie("/keys", add_device({"device_id": "mallory", **mallory.public.as_api(),
                                               "key_id": mallory.key_id, "created_at": "2026-01-02T00:00:00Z"}))
    scene.agent.keydir.forget()

    assert statuses(run(scene.call("notify", {"title": "b"}))) == [("ok", None)]
    copies = scene.server.messages[2]["payload"]["copies"]
    assert [c["recipient_key_id"] for c in copies] == [scene.device.key_id]


# --- manifests -----------------------------------------------------------------------------


def test_a_manifest_rewritten_with_a_recomputed_hash_is_manifest_unverified() -> None:
    scene = Scene()

    def lower_location(served: dict[str, Any]) -> None:
        served["permission_scopes"][2]["sensitivity"] = "low"

    scene.user_side.lie("/agents/" + scene.agent.agent_id, serve_manifest(lower_location))

    result = run(scene.call("locate", {}))

    assert statuses(result) == [("denied", "manifest_unverified")]
    assert scene.handlers.calls == [] and scene.prompt.asked == []
    assert scene.refusals() == ["manifest_unverified"]


def test_a_version_served_again_with_another_content_is_manifest_unverified() -> None:
    scene = Scene()
    run(scene.call("notify", {"title": "v1 seen"}))
    scene.server.publish(widened_path(), pending=["filesystem:read"])

    def consented_to_what_is_current(body: Any) -> Any:  # then nothing would look breaking
        body["manifest"] = widened_path()
        body["hash"] = canonical_hash(body["manifest"])
        return body

    scene.user_side.lie("/manifest/versions/1", consented_to_what_is_current)
    scene.client._invalidate(RELATION_ID)

    result = run(scene.call("notify", {"title": "v2"}, agent=scene.runtime(widened_path())))

    assert statuses(result) == [("denied", "manifest_unverified")]


def test_a_preset_scope_never_falls_below_its_platform_level() -> None:
    scene = Scene()
    low_location = manifest()
    low_location["permission_scopes"][2]["sensitivity"] = "low"  # the server let it through
    scene.server.versions[0] = low_location
    scene.agent = scene.runtime(low_location)

    result = run(scene.call("locate", {}))

    assert statuses(result) == [("ok", None)]
    assert [(p.tool_name, p.sensitivity) for p in scene.prompt.asked] == [("locate", "high")]


def test_a_scope_never_falls_below_the_level_the_user_consented_to() -> None:
    scene = Scene()
    v1 = manifest()
    v1["permission_scopes"].append({"id": "calendar:read", "label_i18n_key": "agent.scope.calendar.label",
                                    "label_fallback": "Calendar", "sensitivity": "high"})
    v1["tools"].append({"name": "agenda", "description_i18n_key": "agent.cap.agenda.description",
                        "input_schema": {"type": "object", "properties": {}}, "permission_scope": "calendar:read"})
    v2 = copy.deepcopy(v1)
    v2["permission_scopes"][3]["sensitivity"] = "low"  # lowering is not breaking: nobody is asked again
    scene.server.versions[0] = v1
    scene.server.granted.append("calendar:read")
    scene.server.publish(v2)
    scene.client.register_handler("agenda", lambda arguments: {"events": []})

    result = run(scene.call("agenda", {}, agent=scene.runtime(v2)))

    assert statuses(result) == [("ok", None)]
    assert [(p.tool_name, p.sensitivity) for p in scene.prompt.asked] == [("agenda", "high")]


def test_arguments_must_also_satisfy_the_schema_the_user_consented_to() -> None:
    scene = Scene()
    longer = manifest()
    longer["tools"][0]["input_schema"]["properties"]["path"]["maxLength"] = 4096  # a widening: not breaking
    scene.server.publish(longer)

    result = run(scene.call("read_file", {"path": "x" * 2000}, agent=scene.runtime(longer)))

    assert statuses(result) == [("error", "TOOL_INVALID_ARGUMENTS")]
    assert scene.handlers.calls == []


def test_a_raised_sensitivity_is_reauth_required_even_when_the_server_hides_it() -> None:
    scene = Scene()
    raised = manifest()
    raised["permission_scopes"][1]["sensitivity"] = "medium"  # notification:send low → medium
    scene.server.publish(raised, pending=["notification:send"])
    scene.user_side.lie(f"/h2a/relations/{RELATION_ID}", settle_relation)

    result = run(scene.call("notify", {"title": "hi"}, agent=scene.runtime(raised)))

    assert statuses(result) == [("denied", "reauth_required")]


# --- freshness -----------------------------------------------------------------------------


def test_a_call_the_server_delays_past_its_expiry_is_never_prompted() -> None:
    scene = Scene()

    result = run(scene.call("locate", {}, deliver_after_s=0.1 + 61))  # timeout_ms 10 s + 60 s < 61.1 s

    assert result is None and scene.prompt.asked == [] and scene.handlers.calls == []
    assert scene.refusals() == ["call_expired"]


def test_a_call_under_another_manifest_than_the_published_one_is_manifest_unverified() -> None:
    scene = Scene()
    pipe_call = tool_call("notify", manifest_hash="0" * 64)  # a version 1 the user never saw

    assert run(scene.client.handle_frame(scene.forge_call(pipe_call, scene.agent_keys))) is not None
    assert scene.handlers.calls == [] and scene.refusals() == ["manifest_unverified"]


# --- defaults that remember (issue 23, hole 8) ----------------------------------------------


def test_a_default_client_restarted_refuses_the_replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HASHEE_STATE_DIR", str(tmp_path / "state"))
    scene = Scene()

    def default_client() -> UserClient:  # no audit, no store: what an integrator writes first
        return UserClient(transport=scene.user_side, keys=scene.device, device_id="laptop", prompt=scene.prompt,
                          handlers=scene.handlers.all(), clock=scene.clock)

    scene.client = default_client()
    assert statuses(run(scene.call("notify", {"title": "once"}))) == [("ok", None)]
    scene.client.audit.close()

    restarted = default_client()

    assert run(restarted.handle_frame(scene.server.frame(0))) is None
    assert scene.handlers.calls == [("notify", {"title": "once"})]
    assert scene.refusals(restarted) == ["call_replayed"]
    assert oct((tmp_path / "state" / "device-laptop.sqlite3").stat().st_mode & 0o777) == "0o600"


def test_a_default_runtime_restarted_does_not_trust_a_device_on_first_sight(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HASHEE_STATE_DIR", str(tmp_path / "state"))
    scene = Scene()

    def default_runtime() -> AgentRuntime:
        return AgentRuntime(transport=scene.agent_side, agent_id=AGENT_ID, keys=scene.agent_keys,
                            manifest=scene.server.manifest, clock=scene.clock)

    scene.agent = default_runtime()
    run(scene.call("notify", {"title": "pins the laptop"}))
    scene.agent.store.close()
    mallory = KeyPair.generate()
    scene.server.devices.insert(0, {"device_id": "mallory", **mallory.public.as_api(), "key_id": mallory.key_id,
                                    "created_at": "2026-01-02T00:00:00Z"})  # a second root, after the restart

    scene.agent = default_runtime()

    assert statuses(run(scene.call("notify", {"title": "after the restart"}))) == [("ok", None)]
    copies = [m["payload"]["copies"] for m in scene.server.messages if m["msg_subtype"] == "artifact_tool_call"]
    assert [c["recipient_key_id"] for c in copies[-1]] == [scene.device.key_id]


def test_memory_is_only_used_when_asked_for_by_name() -> None:
    with pytest.raises(TypeError):
        LocalStore()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        AuditLog()  # type: ignore[call-arg]
    assert LocalStore.in_memory().path == AuditLog.in_memory().path == ":memory:"


@pytest.mark.parametrize("lie", ["payload", "relation"])
def test_a_forged_copy_of_a_call_does_not_hide_the_true_one(lie: str) -> None:
    """The server delivers a copy that does not open (another payload, or presented as
    another relation's) under the true call's message id, then the true call: bob's device
    answers the true one (the lie could only make it look delivered twice)."""
    scene = Scene()

    async def lie_then_truth() -> ToolResult | None:
        sent = len(scene.server.messages)
        task = asyncio.create_task(scene.agent.call_tool(RELATION_ID, "notify", {"title": "hi"},
                                                         timeout=2))
        while len(scene.server.messages) == sent:
            await asyncio.sleep(0.002)
        honest = scene.server.frame(sent)
        forged = copy.deepcopy(honest)
        message = forged["data"]["message"]
        if lie == "payload":
            message["payload"] = {"v": 2, "ciphertext": "AAAA"}
        else:
            forged["data"]["relation_id"] = "00000000-0000-4000-8000-000000000000"
        with contextlib.suppress(Exception):
            await scene.client.handle_frame(forged)
        await scene.client.handle_frame(honest)
        await scene.agent.handle_frame(scene.server.frame(sent + 1))
        return await task

    result = run(lie_then_truth())

    assert result is not None and result.ok, result
