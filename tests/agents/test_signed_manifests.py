"""Signed manifests (SPEC §9.1): once an agent has an identity key, every new manifest
carries its owner's signature, whoever saves it (API, portal, admin, shell)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from rest_framework.test import APIClient

from agents import services
from agents.models import Agent, ManifestVersion
from hashee.errors import HasheeError
from hashee_sdk.core import signing
from tests.agents.test_identity import ALICE_KEY, MALLORY_KEY, NEW_KEY, error_code, kid, register, rotation
from tests.changes import manifest_of

pytestmark = pytest.mark.django_db


def bumped(manifest: dict[str, Any], version: str = "1.0.1") -> dict[str, Any]:
    changed = copy.deepcopy(manifest)
    changed["agent_version"] = version
    return changed


def patch(api: APIClient, agent: Agent, body: dict[str, Any], query: str = "") -> Any:
    return api.patch(f"/agents/{agent.pk}{query}", body, format="json")


@pytest.fixture
def identified(alice_api: APIClient, agent: Agent) -> Agent:
    """DemoBot with alice's identity key."""
    register(alice_api, agent)
    return agent


def test_a_new_manifest_signed_by_the_identity_key_is_stored_as_verified(alice_api: APIClient, anon: APIClient,
                                                                         identified: Agent) -> None:
    manifest = bumped(manifest_of(identified))
    signature = signing.sign_manifest(manifest, ALICE_KEY)

    response = patch(alice_api, identified, {"capability_manifest": manifest,
                                             "capability_manifest_signature": signature})

    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["capability_manifest_version"], body["capability_manifest_signature"], body["publisher_verified"]) \
        == (2, signature, True)
    shown = anon.get(f"/agents/{identified.pk}").json()
    assert (shown["capability_manifest_signature"], shown["publisher_verified"]) == (signature, True)
    listed = anon.get(f"/agents/{identified.pk}/manifest/versions").json()["results"]
    assert [(v["version"], v["capability_manifest_signature"], v["publisher_verified"]) for v in listed] == [
        (2, signature, True), (1, None, False)]
    one = anon.get(f"/agents/{identified.pk}/manifest/versions/2").json()
    assert (one["capability_manifest_signature"], one["publisher_verified"]) == (signature, True)
    assert ManifestVersion.objects.get(agent=identified, version=2).signature_kid == kid(ALICE_KEY)


def lying(manifest: dict[str, Any]) -> str:
    """mallory's signature, claiming alice's kid."""
    return signing.sign_detached(signing.manifest_signing_bytes(manifest), MALLORY_KEY, kid=kid(ALICE_KEY))


REFUSED: list[tuple[str, Any, str]] = [
    ("no signature", lambda m: {}, "MANIFEST_SIGNATURE_REQUIRED"),
    ("a null signature", lambda m: {"capability_manifest_signature": None}, "MANIFEST_SIGNATURE_REQUIRED"),
    ("signed by another key (a lying owner)", lambda m: {"capability_manifest_signature": lying(m)},
     "MANIFEST_SIGNATURE_INVALID"),
    ("signed by another key with its own kid", lambda m: {
        "capability_manifest_signature": signing.sign_manifest(m, MALLORY_KEY)}, "MANIFEST_SIGNATURE_INVALID"),
    ("the signature of another manifest", lambda m: {
        "capability_manifest_signature": signing.sign_manifest(bumped(m, "9.9.9"), ALICE_KEY)},
     "MANIFEST_SIGNATURE_INVALID"),
    ("not a JWS", lambda m: {"capability_manifest_signature": "signed, alice"}, "MANIFEST_SIGNATURE_INVALID"),
    ("an attached JWS", lambda m: {"capability_manifest_signature": signing.sign_compact(
        signing.manifest_signing_bytes(m), ALICE_KEY, kid=kid(ALICE_KEY))}, "MANIFEST_SIGNATURE_INVALID"),
]


@pytest.mark.parametrize(("extra", "code"), [(e, c) for _, e, c in REFUSED], ids=[n for n, _, _ in REFUSED])
def test_an_unsigned_or_badly_signed_manifest_is_refused_and_nothing_is_stored(
        alice_api: APIClient, identified: Agent, extra: Any, code: str) -> None:
    manifest = bumped(manifest_of(identified))

    response = patch(alice_api, identified, {"capability_manifest": manifest, **extra(manifest)})

    assert error_code(response) == (400, code)
    assert response.json()["error"]["details"][0]["path"] == "/capability_manifest_signature"
    identified.refresh_from_db()
    assert identified.capability_manifest_version == 1
    assert ManifestVersion.objects.filter(agent=identified).count() == 1


def test_resubmitting_the_current_manifest_needs_no_signature(alice_api: APIClient, identified: Agent) -> None:
    response = patch(alice_api, identified, {"capability_manifest": identified.capability_manifest})

    assert response.status_code == 200 and response.json()["capability_manifest_version"] == 1


def test_changing_other_fields_needs_no_signature(alice_api: APIClient, identified: Agent) -> None:
    response = patch(alice_api, identified, {"name": "DemoBot 2"})

    assert response.status_code == 200
    assert (response.json()["capability_manifest_signature"], response.json()["publisher_verified"]) == (None, False)


def test_after_a_rotation_only_the_new_key_signs(alice_api: APIClient, identified: Agent) -> None:
    alice_api.put(f"/agents/{identified.pk}/identity",
                  {"jwk": signing.public_of(NEW_KEY), "rotation": rotation(ALICE_KEY, NEW_KEY),
                   "proof": signing.sign_identity_proof(NEW_KEY, agent_id=str(identified.pk))}, format="json")
    manifest = bumped(manifest_of(identified))

    old = patch(alice_api, identified, {"capability_manifest": manifest,
                                        "capability_manifest_signature": signing.sign_manifest(manifest, ALICE_KEY)})
    new = patch(alice_api, identified, {"capability_manifest": manifest,
                                        "capability_manifest_signature": signing.sign_manifest(manifest, NEW_KEY)})

    assert error_code(old) == (400, "MANIFEST_SIGNATURE_INVALID")
    assert new.status_code == 200 and new.json()["publisher_verified"] is True


def test_a_dry_run_needs_no_signature_yet_and_says_saving_will(alice_api: APIClient, identified: Agent) -> None:
    response = patch(alice_api, identified, {"capability_manifest": bumped(manifest_of(identified))},
                     "?dry_run=true")

    assert response.status_code == 200
    body = response.json()
    assert (body["dry_run"], body["signature_required"], body["publisher_verified"]) == (True, True, False)


def test_a_dry_run_checks_a_signature_it_is_given(alice_api: APIClient, identified: Agent) -> None:
    manifest = bumped(manifest_of(identified))

    good = patch(alice_api, identified, {"capability_manifest": manifest,
                                         "capability_manifest_signature": signing.sign_manifest(manifest, ALICE_KEY)},
                 "?dry_run=true")
    bad = patch(alice_api, identified, {"capability_manifest": manifest, "capability_manifest_signature": lying(
        manifest)}, "?dry_run=true")

    assert good.status_code == 200 and good.json()["publisher_verified"] is True
    assert error_code(bad) == (400, "MANIFEST_SIGNATURE_INVALID")


def test_agents_without_identity_need_no_signature(alice_api: APIClient, agent: Agent) -> None:
    manifest = bumped(manifest_of(agent))

    preview = patch(alice_api, agent, {"capability_manifest": manifest}, "?dry_run=true")
    saved = patch(alice_api, agent, {"capability_manifest": manifest})

    assert preview.json()["signature_required"] is False
    assert saved.status_code == 200
    assert (saved.json()["capability_manifest_signature"], saved.json()["publisher_verified"]) == (None, False)


def test_a_signature_without_an_identity_key_is_kept_but_not_verified(alice_api: APIClient, anon: APIClient,
                                                                      manifest: dict[str, Any]) -> None:
    signature = signing.sign_manifest(manifest, MALLORY_KEY)

    created = alice_api.post("/agents", {"name": "Unverified", "capability_manifest": manifest,
                                         "capability_manifest_signature": signature}, format="json")

    assert created.status_code == 201
    shown = anon.get(f"/agents/{created.json()['agent_id']}").json()
    assert (shown["capability_manifest_signature"], shown["publisher_verified"]) == (signature, False)


def test_a_malformed_signature_without_an_identity_key_is_refused(alice_api: APIClient,
                                                                  manifest: dict[str, Any]) -> None:
    created = alice_api.post("/agents", {"name": "Junk", "capability_manifest": manifest,
                                         "capability_manifest_signature": "not a JWS"}, format="json")

    assert error_code(created) == (400, "MANIFEST_SIGNATURE_INVALID")
    assert not Agent.objects.filter(name="Junk").exists()


def test_a_shell_save_of_an_unsigned_manifest_is_refused_by_the_signal_path(identified: Agent) -> None:
    agent = Agent.objects.get(pk=identified.pk)
    agent.capability_manifest = bumped(manifest_of(agent))

    with pytest.raises(HasheeError) as refused:
        agent.save()

    assert refused.value.code == "MANIFEST_SIGNATURE_REQUIRED"
    assert ManifestVersion.objects.filter(agent=identified).count() == 1
    assert Agent.objects.get(pk=identified.pk).capability_manifest_version == 1


def test_a_signature_counts_only_for_the_manifest_it_came_with(alice: Any, identified: Agent) -> None:
    """A service call's signature rides on the instance; another manifest assigned later is unsigned."""
    manifest = bumped(manifest_of(identified))
    agent, _update, _secret = services.agent_update(
        agent_id=identified.pk, actor=alice, capability_manifest=manifest,
        capability_manifest_signature=signing.sign_manifest(manifest, ALICE_KEY))
    agent.capability_manifest = bumped(manifest, "1.0.2")

    with pytest.raises(HasheeError) as refused:
        agent.save()

    assert refused.value.code == "MANIFEST_SIGNATURE_REQUIRED"


def test_the_admin_cannot_replace_an_identified_agents_manifest(operator: Any, identified: Agent) -> None:
    import json

    response = operator.post(f"/admin/agents/agent/{identified.pk}/change/", {
        "owner": identified.owner_id, "name": identified.name, "description": "", "status": "enabled",
        "capability_manifest": json.dumps(bumped(manifest_of(identified))), "webhook_url": "",
        "versions-TOTAL_FORMS": "0", "versions-INITIAL_FORMS": "0"})

    # The manifest is read-only in the admin (SPEC §7): the publisher signs new versions.
    assert response.status_code == 302
    assert ManifestVersion.objects.filter(agent=identified).count() == 1


def test_the_admin_shows_the_identity_key_history_and_verified_versions(operator: Any, alice_api: APIClient,
                                                                        identified: Agent) -> None:
    alice_api.put(f"/agents/{identified.pk}/identity",
                  {"jwk": signing.public_of(NEW_KEY), "rotation": rotation(ALICE_KEY, NEW_KEY),
                   "proof": signing.sign_identity_proof(NEW_KEY, agent_id=str(identified.pk))}, format="json")
    manifest = bumped(manifest_of(identified))
    patch(alice_api, identified, {"capability_manifest": manifest,
                                  "capability_manifest_signature": signing.sign_manifest(manifest, NEW_KEY)})

    page = operator.get(f"/admin/agents/agent/{identified.pk}/change/").content.decode()
    version = ManifestVersion.objects.get(agent=identified, version=2)
    version_page = operator.get(f"/admin/agents/manifestversion/{version.pk}/change/").content.decode()

    assert kid(ALICE_KEY) in page and kid(NEW_KEY) in page and "Rotated" in page
    assert kid(NEW_KEY) in version_page and version.signature in version_page
