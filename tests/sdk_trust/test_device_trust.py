"""Issue 23, holes 2 and 7, against a lying server: the user's devices each side trusts.

A user has one root device; every other is trusted only through a chain of approvals
from it, and a device once revoked is never trusted again, nor what it approves later.
The agent runtime pins the root at its first look; the user's own device knows its root
itself. Both sides' safety numbers come from those roots, never from the listing."""

from __future__ import annotations

from typing import Any

from hashee_sdk import KeyPair
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
