"""SPEC §5.2 (v1.2): a note to users with a new version — kept with the version (never part
of the manifest or its hash), carried by its event (null when none), shown on the
re-consent page; plain text, without invisible characters, and only with a manifest."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from rest_framework.test import APIClient

from agents.models import Agent, ManifestVersion
from hashee_sdk.core.canonical import canonical_hash
from relations import services as relation_services
from tests.changes import breaking
from tests.portal.test_views import browser_for

pytestmark = pytest.mark.django_db

NOTE = "We now need your files' full paths.\nRead why: <b>not HTML</b>"


def patch(api: APIClient, agent: Agent, body: dict[str, Any]) -> Any:
    return api.patch(f"/agents/{agent.pk}", body, format="json")


def test_the_note_goes_with_the_version_its_event_and_the_reconsent_page(
        alice_api: APIClient, bob_api: APIClient, bob: User, agent: Agent, manifest: dict[str, Any]) -> None:
    relation = relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=["filesystem:read"])
    new = breaking(manifest)

    saved = patch(alice_api, agent, {"capability_manifest": new, "change_note": f"  {NOTE}  "})

    assert saved.status_code == 200, saved.content
    stored = ManifestVersion.objects.get(agent=agent, version=2)
    assert stored.change_note == NOTE and stored.hash == canonical_hash(new)  # the note is not hashed
    assert alice_api.get(f"/agents/{agent.pk}/manifest/versions/2").json()["change_note"] == NOTE
    events = {e["type"]: e["data"] for e in bob_api.get("/events?since=0").json()["events"]}
    assert events["h2a.reauth_required"]["change_note"] == NOTE
    page = browser_for(bob).get(reverse("portal:connection", args=[relation.pk])).content.decode()
    assert "DemoBot&#x27;s note on version 2:" in page or "DemoBot's note on version 2:" in page
    assert "We now need your files&#x27; full paths.<br>Read why: &lt;b&gt;not HTML&lt;/b&gt;" in page


def test_without_a_note_the_events_say_null(alice_api: APIClient, bob_api: APIClient, bob: User, agent: Agent,
                                            manifest: dict[str, Any]) -> None:
    relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=[])
    harmless = {**manifest, "agent_version": "1.0.1"}

    assert patch(alice_api, agent, {"capability_manifest": harmless}).status_code == 200

    updated = [e["data"] for e in bob_api.get("/events?since=0").json()["events"]
               if e["type"] == "agent.manifest_updated"]
    assert updated[-1]["change_note"] is None


@pytest.mark.parametrize(("body", "path", "code"), [
    ({"change_note": "no manifest with me"}, "/change_note", "INVALID_VALUE"),
    ({"change_note": "hidden\u202etext", "with_manifest": True}, "/change_note", "INVISIBLE_CHARACTER"),
    ({"change_note": "x" * 2001, "with_manifest": True}, "/change_note", None),
])
def test_a_bad_note_is_refused_and_nothing_is_stored(alice_api: APIClient, agent: Agent, manifest: dict[str, Any],
                                                     body: dict[str, Any], path: str, code: str | None) -> None:
    if body.pop("with_manifest", False):
        body["capability_manifest"] = breaking(manifest)

    response = patch(alice_api, agent, body)

    assert response.status_code == 400 and response.json()["error"]["code"] == "VALIDATION_ERROR"
    details = response.json()["error"]["details"]
    assert any(d["path"] == path and (code is None or d["code"] == code) for d in details), details
    assert ManifestVersion.objects.filter(agent=agent).count() == 1


def test_the_owner_writes_the_note_in_the_editor(alice: User, agent: Agent, manifest: dict[str, Any]) -> None:
    import json

    client = browser_for(alice)
    new = breaking(manifest)
    text = json.dumps(new)
    preview = client.post(reverse("portal:agent-preview", args=[agent.pk]) + "?base_version=1", text,
                          content_type="text/plain").json()

    client.post(reverse("portal:agent-manifest", args=[agent.pk]), {
        "capability_manifest": text, "expected_version": 1, "previewed_hash": preview["hash"], "action": "save",
        "change_note": "Why it changed"})

    assert ManifestVersion.objects.get(agent=agent, version=2).change_note == "Why it changed"
