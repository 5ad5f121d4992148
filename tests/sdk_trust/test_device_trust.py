"""Issue 23, holes 2 and 7, against a lying server: the user's devices each side trusts.

A user has one root device; every other is trusted only through a chain of approvals
from it, and a device once revoked is never trusted again, nor what it approves later.
The agent runtime pins the root at its first look; the user's own device knows its root
itself. Both sides' safety numbers come from those roots, never from the listing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hashee_sdk import AmbiguousRoot, KeyPair, LocalStore
from hashee_sdk.core.event_types import EventType
from tests.sdk.fakes import RELATION_ID, approval
from tests.sdk_trust.lying import add_device
from tests.sdk_trust.scene import Scene, run


def listed(device_id: str, keys: KeyPair, approver: KeyPair | None = None) -> dict[str, Any]:
    return {"device_id": device_id, **keys.public.as_api(), "key_id": keys.key_id,
            "created_at": "2026-01-02T00:00:00Z", **approval(device_id, keys, approver)}


def sealed_to(scene: Scene, index: int = -1) -> list[str]:
    return [c["recipient_key_id"] for c in scene.server.messages[index]["payload"]["copies"]]


# --- the shared method: what the user's device trusts ----------------------------------------


def test_the_users_device_trusts_its_root_and_what_it_approved_never_a_second_root() -> None:
    scene = Scene()
    phone, mallory, mallorys_friend = KeyPair.generate(), KeyPair.generate(), KeyPair.generate()
    scene.server.publish_device("phone", phone, approver=scene.device)
    scene.user_side.lie("/keys", add_device(listed("operator-row", mallory)))  # a second "first device"
    scene.user_side.lie("/keys", add_device(listed("friend", mallorys_friend, approver=mallory)))

    trusted = run(scene.client.keydir.trusted_user_devices(RELATION_ID))

    assert set(trusted) == {scene.device.key_id, phone.key_id}
    assert run(scene.client.keydir.root(RELATION_ID)) == scene.device.public


def test_a_device_knows_the_root_it_was_approved_through_and_keeps_it() -> None:
    scene = Scene()
    phone = KeyPair.generate()
    scene.server.publish_device("phone", phone, approver=scene.device)
    on_phone = scene.start_client(keys=phone, device_id="phone")

    assert run(on_phone.keydir.root(RELATION_ID)) == scene.device.public
    mallory = KeyPair.generate()  # later the server says the laptop is approved by mallory's root
    scene.server.devices[0].update(approval("laptop", scene.device, mallory))
    scene.server.devices.append(listed("mallory", mallory))
    on_phone.keydir.forget()

    assert run(on_phone.keydir.root(RELATION_ID)) == scene.device.public
    assert set(run(on_phone.keydir.trusted_user_devices(RELATION_ID))) == {scene.device.key_id, phone.key_id}


def test_the_users_device_always_trusts_itself() -> None:
    scene = Scene()
    scene.server.devices.clear()  # the server hides every device

    assert set(run(scene.client.keydir.trusted_user_devices(RELATION_ID))) == {scene.device.key_id}


# --- hole 2: a second "first device" -----------------------------------------------------------


def test_a_second_first_device_at_the_agents_first_look_gets_no_copy_and_nothing_runs(
        caplog: pytest.LogCaptureFixture) -> None:
    scene = Scene()
    operator_row = KeyPair.generate()  # one DeviceKey row by an operator, approved by no device
    scene.server.publish_device("operator-row", operator_row)

    with pytest.raises(AmbiguousRoot):
        run(scene.call("read_file", {"path": "/etc/passwd"}))

    assert scene.server.messages == [] and scene.handlers.calls == []
    assert "first devices" in caplog.text
    with pytest.raises(AmbiguousRoot):  # and it stays refused: nothing was pinned
        run(scene.call("notify", {"title": "again"}))


def test_the_root_each_side_makes_its_safety_number_from_is_the_users_one() -> None:
    scene = Scene()
    run(scene.call("notify", {"title": "pins the laptop"}))
    operator_row = KeyPair.generate()
    scene.server.devices.insert(0, listed("operator-row", operator_row))  # listed first from now on
    scene.agent.keydir.forget()
    scene.client.keydir.forget()

    assert run(scene.agent.keydir.root(RELATION_ID)) == scene.device.public
    assert run(scene.client.keydir.root(RELATION_ID)) == scene.device.public
    assert run(scene.call("notify", {"title": "b"})) is not None
    assert sealed_to(scene, -2) == [scene.device.key_id]


# --- hole 7: revoked devices -----------------------------------------------------------------


def calls_sealed_to(scene: Scene) -> list[set[str]]:
    return [{c["recipient_key_id"] for c in m["payload"]["copies"]}
            for m in scene.server.messages if m["msg_subtype"] == "artifact_tool_call"]


@pytest.mark.parametrize("learns_by", ["the device_revoked event", "the listing alone"])
def test_a_revoked_device_listed_again_gets_no_copy_and_what_it_approves_is_refused(learns_by: str) -> None:
    scene = Scene()
    phone, thief_approved = KeyPair.generate(), KeyPair.generate()
    scene.server.publish_device("phone", phone, approver=scene.device)
    assert run(scene.call("notify", {"title": "to both"})) is not None
    bobs_view = [run(scene.client.keydir.trusted_user_devices(RELATION_ID))]
    phone_row = scene.server.devices.pop()  # bob revokes his stolen phone
    scene.client.keydir.forget()
    bobs_view.append(run(scene.client.keydir.trusted_user_devices(RELATION_ID)))
    if learns_by == "the device_revoked event":
        run(scene.agent.handle_frame({"type": EventType.DEVICE_REVOKED,
                                      "data": {"relation_id": RELATION_ID, "device": phone_row}}))
    else:
        scene.agent.keydir.forget()
    assert run(scene.call("notify", {"title": "laptop only"})) is not None
    # The server lists the phone again, and a device the thief approved with its key.
    scene.server.devices += [phone_row, listed("thief", thief_approved, approver=phone)]
    scene.agent.keydir.forget()
    scene.client.keydir.forget()

    assert run(scene.call("notify", {"title": "still laptop only"})) is not None
    laptop = scene.device.key_id
    assert calls_sealed_to(scene) == [{laptop, phone.key_id}, {laptop}, {laptop}]
    bobs_view.append(run(scene.client.keydir.trusted_user_devices(RELATION_ID)))
    assert [set(view) for view in bobs_view] == [{laptop, phone.key_id}, {laptop}, {laptop}]


def test_a_revoked_device_is_never_trusted_again_after_a_restart(tmp_path: Path) -> None:
    scene = Scene()
    phone = KeyPair.generate()
    scene.server.publish_device("phone", phone, approver=scene.device)
    scene.agent = scene.runtime(scene.server.manifest, store=LocalStore(tmp_path / "agent.sqlite3"))
    assert run(scene.call("notify", {"title": "to both"})) is not None
    phone_row = scene.server.devices.pop()
    scene.agent.keydir.forget()
    assert run(scene.call("notify", {"title": "laptop only"})) is not None
    scene.server.devices.append(phone_row)

    scene.agent = scene.runtime(scene.server.manifest, store=LocalStore(tmp_path / "agent.sqlite3"))

    assert run(scene.call("notify", {"title": "after the restart"})) is not None
    assert calls_sealed_to(scene)[-1] == {scene.device.key_id}
