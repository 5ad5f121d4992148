"""Bob's devices in the portal: which ones agents encrypt to, which wait for approval."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client

from hashee_sdk import KeyPair, statements
from tests.portal.test_views import browser_for
from toolcalls.keydir_models import DeviceKey
from toolcalls.keydir_services import Approval, device_key_register


def _publish(user: User, device_id: str, approver: KeyPair | None = None) -> KeyPair:
    keys = KeyPair.generate()
    approval = None
    if approver is not None:
        approval = Approval(approver.key_id, statements.approve_device(approver, device_id=device_id,
                                                                       key_id=keys.key_id))
    public = keys.public.as_api()
    device_key_register(user=user, device_id=device_id, approval=approval, x25519_public=public["x25519_public"],
                        ed25519_public=public["ed25519_public"])
    return keys


def test_bob_sees_which_devices_are_approved_and_which_wait(bob: User) -> None:
    laptop = _publish(bob, "laptop")
    _publish(bob, "phone", approver=laptop)
    _publish(bob, "tablet")

    page = browser_for(bob).get("/portal/devices/").content.decode()

    rows = page.split('<tr data-device="')[1:]
    assert [row.split('"')[0] for row in rows] == ["tablet", "phone", "laptop"]  # waiting first
    assert "Waiting for approval" in rows[0] and "Approve it from one of your devices" in rows[0]
    assert "Approved" in rows[1] and ">laptop<" in rows[1]
    assert "first device" in rows[2] and laptop.key_id in rows[2]


def test_bob_revokes_a_device_and_mallory_cannot(bob: User, mallory: User) -> None:
    _publish(bob, "laptop")

    assert browser_for(mallory).post("/portal/devices/laptop/revoke").status_code == 404
    assert DeviceKey.objects.filter(revoked_at__isnull=True).count() == 1

    response = browser_for(bob).post("/portal/devices/laptop/revoke", follow=True)

    assert "Device laptop revoked" in response.content.decode()
    assert DeviceKey.objects.filter(revoked_at__isnull=True).count() == 0


def test_the_devices_page_needs_a_login() -> None:
    assert Client().get("/portal/devices/").status_code == 302


def test_bob_sees_that_his_devices_were_reset(bob: User) -> None:
    _publish(bob, "laptop")
    tablet = KeyPair.generate()
    public = tablet.public.as_api()
    device_key_register(user=bob, device_id="tablet", reset=True, x25519_public=public["x25519_public"],
                        ed25519_public=public["ed25519_public"])

    page = browser_for(bob).get("/portal/devices/").content.decode()

    rows = page.split('<tr data-device="')[1:]
    assert [row.split('"')[0] for row in rows] == ["tablet"]
    assert "reset" in rows[0] and "every earlier device was revoked and your agents were told" in rows[0]
