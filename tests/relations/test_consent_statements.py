"""Consent signed on the user's device (SPEC §9.6): bob's grants, re-consents and
revocations carry a statement his laptop signed; the server checks it before it changes
anything, keeps the last one on the relation and returns it wherever a relation goes."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents import services as agent_services
from agents.models import Agent
from eventlog.models import Event
from hashee_sdk import KeyPair, statements
from hashee_sdk.consent_statements import sign_consent
from relations.models import Relation
from tests.changes import breaking, manifest_of
from tests.conftest import client_for

pytestmark = pytest.mark.django_db

TS = 1_795_481_450_000


def publish(api: APIClient, device_id: str, keys: KeyPair, approver: KeyPair | None = None) -> KeyPair:
    body: dict[str, Any] = {"device_id": device_id, **keys.public.as_api()}
    if approver is not None:
        body["approval"] = {"approver_key_id": approver.key_id, "signature": statements.approve_device(
            approver, device_id=device_id, key_id=keys.key_id)}
    assert api.post("/keys/devices", body, format="json").status_code == 201
    return keys


@pytest.fixture
def laptop(bob_api: APIClient) -> KeyPair:
    """bob's first device: trusted on first use."""
    return publish(bob_api, "laptop", KeyPair.generate())


def signed(device: KeyPair, agent: Agent, *, scopes: tuple[str, ...] = ("filesystem:read",), seq: int = 1,
           **fields: Any) -> dict[str, Any]:
    """A statement of ``device`` for bob and ``agent``'s current manifest, as the request states it."""
    stated: dict[str, Any] = {"agent_id": str(agent.pk), "user_id": "bob", "granted_scopes": scopes,
                              "acknowledged_manifest_version": agent.capability_manifest_version,
                              "acknowledged_manifest_hash": agent.capability_manifest_hash, "seq": seq, "ts": TS}
    return sign_consent(device, **{**stated, **fields})


def revocation(device: KeyPair, agent: Agent, *, seq: int) -> dict[str, Any]:
    return signed(device, agent, scopes=(), seq=seq, revoked=True)


def grant(api: APIClient, agent: Agent, consent: dict[str, Any] | None, scopes: tuple[str, ...] = ("filesystem:read",)
          ) -> Any:
    body: dict[str, Any] = {"agent_id": str(agent.pk), "granted_scopes": list(scopes)}
    if consent is not None:
        body["consent_statement"] = consent
    return api.post("/h2a/relations", body, format="json")


def reconsent(api: APIClient, relation_id: str, consent: dict[str, Any] | None,
              scopes: tuple[str, ...] = ("filesystem:read",)) -> Any:
    body: dict[str, Any] = {"granted_scopes": list(scopes)}
    if consent is not None:
        body["consent_statement"] = consent
    return api.patch(f"/h2a/relations/{relation_id}", body, format="json")


def revoke(api: APIClient, relation_id: str, consent: dict[str, Any] | None) -> Any:
    if consent is None:
        return api.delete(f"/h2a/relations/{relation_id}")
    return api.delete(f"/h2a/relations/{relation_id}", {"consent_statement": consent}, format="json")


def refused(response: Any, status: int, code: str) -> list[str]:
    """The error's detail paths, once the response is that error."""
    assert (response.status_code, response.json()["error"]["code"]) == (status, code), response.content
    return [detail["path"] for detail in response.json()["error"]["details"]]


def told(api: APIClient, type: str) -> list[Any]:
    """The consent statements of the ``type`` events this client was told of."""
    frames = api.get("/events?since=0").json()["events"]
    return [frame["data"]["relation"]["consent_statement"] for frame in frames if frame["type"] == type]


# --- accepted ------------------------------------------------------------------------------------


def test_bob_grants_with_a_statement_his_laptop_signed_and_it_is_returned_and_told(
        bob_api: APIClient, agent_api: APIClient, agent: Agent, laptop: KeyPair) -> None:
    consent = signed(laptop, agent)

    response = grant(bob_api, agent, consent)

    assert response.status_code == 201, response.content
    assert response.json()["consent_statement"] == consent
    assert bob_api.get(f"/h2a/relations/{response.json()['relation_id']}").json()["consent_statement"] == consent
    assert bob_api.get("/h2a/relations").json()["results"][0]["consent_statement"] == consent
    assert told(bob_api, "h2a.relation_created") == told(agent_api, "h2a.relation_created") == [consent]


def test_bob_reconsents_to_a_new_version_with_a_newer_statement(bob_api: APIClient, agent_api: APIClient,
                                                                 agent: Agent, laptop: KeyPair) -> None:
    relation_id = grant(bob_api, agent, signed(laptop, agent)).json()["relation_id"]
    agent, _, _ = agent_services.agent_update(agent_id=agent.pk, actor=agent.owner,
                                              capability_manifest=breaking(manifest_of(agent)))
    consent = signed(laptop, agent, scopes=("filesystem:read", "notification:send"), seq=2)

    response = reconsent(bob_api, relation_id, consent, scopes=("notification:send", "filesystem:read"))

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["status"], body["acknowledged_manifest_version"], body["consent_statement"]) == ("active", 2, consent)
    assert told(bob_api, "h2a.relation_updated") == told(agent_api, "h2a.relation_updated") == [consent]


def test_bob_revokes_with_a_signed_revocation(bob_api: APIClient, agent_api: APIClient, agent: Agent,
                                              laptop: KeyPair) -> None:
    relation_id = grant(bob_api, agent, signed(laptop, agent)).json()["relation_id"]
    consent = revocation(laptop, agent, seq=2)

    response = revoke(bob_api, relation_id, consent)

    assert response.status_code == 200, response.content
    assert (response.json()["status"], response.json()["consent_statement"]) == ("revoked", consent)
    assert told(bob_api, "h2a.relation_revoked") == told(agent_api, "h2a.relation_revoked") == [consent]


def test_a_device_bobs_laptop_approved_signs_for_him_too(bob_api: APIClient, agent: Agent, laptop: KeyPair) -> None:
    phone = publish(bob_api, "phone", KeyPair.generate(), approver=laptop)
    consent = signed(phone, agent)

    response = grant(bob_api, agent, consent)

    assert (response.status_code, response.json()["consent_statement"]) == (201, consent)


def test_retrying_a_signed_revocation_answers_the_revoked_relation_again(bob_api: APIClient, agent: Agent,
                                                                          laptop: KeyPair) -> None:
    relation_id = grant(bob_api, agent, signed(laptop, agent)).json()["relation_id"]
    consent = revocation(laptop, agent, seq=2)
    first = revoke(bob_api, relation_id, consent)

    again = revoke(bob_api, relation_id, consent)

    assert again.status_code == 200 and again.json() == first.json()
    assert again.json()["consent_statement"] == consent
    assert Event.objects.filter(type="h2a.relation_revoked").count() == 1


# --- refused, nothing stored ---------------------------------------------------------------------


def nothing_stored(before: int) -> None:
    assert Relation.objects.count() == 0 and Event.objects.count() == before


def _mallorys_device(bob_api: APIClient, mallory: User, laptop: KeyPair) -> KeyPair:
    return publish(client_for(mallory), "mallory-laptop", KeyPair.generate())


def _bobs_pending_phone(bob_api: APIClient, mallory: User, laptop: KeyPair) -> KeyPair:
    return publish(bob_api, "phone", KeyPair.generate())  # never approved


def _bobs_revoked_tablet(bob_api: APIClient, mallory: User, laptop: KeyPair) -> KeyPair:
    tablet = publish(bob_api, "tablet", KeyPair.generate(), approver=laptop)
    assert bob_api.delete("/keys/devices/tablet").status_code == 204
    return tablet


def _an_unpublished_key(bob_api: APIClient, mallory: User, laptop: KeyPair) -> KeyPair:
    return KeyPair.generate()


@pytest.mark.parametrize("device", [_mallorys_device, _bobs_pending_phone, _bobs_revoked_tablet, _an_unpublished_key],
                         ids=["mallory's device", "bob's pending phone", "bob's revoked tablet", "an unpublished key"])
def test_a_statement_no_trusted_device_of_bobs_signed_is_refused(bob_api: APIClient, mallory: User, agent: Agent,
                                                                 laptop: KeyPair, device: Any) -> None:
    signer = device(bob_api, mallory, laptop)
    before = Event.objects.count()

    response = grant(bob_api, agent, signed(signer, agent))

    assert refused(response, 400, "CONSENT_SIGNATURE_INVALID") == ["/consent_statement/statement/device_key_id"]
    nothing_stored(before)


def test_a_statement_changed_after_bobs_laptop_signed_it_is_refused(bob_api: APIClient, agent: Agent,
                                                                    laptop: KeyPair) -> None:
    consent = signed(laptop, agent, scopes=())
    consent["statement"]["granted_scopes"] = ["filesystem:read"]  # what a server in the middle would add
    before = Event.objects.count()

    response = grant(bob_api, agent, consent)

    assert refused(response, 400, "CONSENT_SIGNATURE_INVALID") == ["/consent_statement/signature"]
    nothing_stored(before)


DIFFERING: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
    ("agent_id", {"agent_id": "00000000-0000-4000-8000-000000000000"}, ("filesystem:read",)),
    ("user_id", {"user_id": "mallory"}, ("filesystem:read",)),
    ("granted_scopes", {"scopes": ("filesystem:read", "notification:send")}, ("filesystem:read",)),
    ("acknowledged_manifest_version", {"acknowledged_manifest_version": 2}, ("filesystem:read",)),
    ("acknowledged_manifest_hash", {"acknowledged_manifest_hash": "f" * 64}, ("filesystem:read",)),
    ("revoked", {"scopes": (), "revoked": True}, ()),
    ("grant_options", {"grant_options": {"filesystem:read": {"once": True}}}, ("filesystem:read",)),
]


@pytest.mark.parametrize(("field", "stated", "asked"), [row for row in DIFFERING], ids=[row[0] for row in DIFFERING])
def test_a_statement_that_does_not_state_the_request_is_refused(bob_api: APIClient, agent: Agent, laptop: KeyPair,
                                                                field: str, stated: dict[str, Any],
                                                                asked: tuple[str, ...]) -> None:
    before = Event.objects.count()

    response = grant(bob_api, agent, signed(laptop, agent, **stated), scopes=asked)

    assert refused(response, 400, "CONSENT_SIGNATURE_INVALID") == [f"/consent_statement/statement/{field}"]
    nothing_stored(before)


def test_a_statement_granting_scopes_does_not_revoke(bob_api: APIClient, agent: Agent, laptop: KeyPair) -> None:
    relation_id = grant(bob_api, agent, signed(laptop, agent)).json()["relation_id"]
    before = Event.objects.count()

    response = revoke(bob_api, relation_id, signed(laptop, agent, seq=2))

    assert refused(response, 400, "CONSENT_SIGNATURE_INVALID") == [
        "/consent_statement/statement/granted_scopes", "/consent_statement/statement/revoked"]
    assert Relation.objects.get().revoked_at is None and Event.objects.count() == before


def test_a_reconsent_signed_for_the_previous_version_is_refused(bob_api: APIClient, agent: Agent,
                                                                laptop: KeyPair) -> None:
    relation_id = grant(bob_api, agent, signed(laptop, agent)).json()["relation_id"]
    old = signed(laptop, agent, seq=2)  # bob saw version 1
    agent_services.agent_update(agent_id=agent.pk, actor=agent.owner, capability_manifest=breaking(manifest_of(agent)))

    response = reconsent(bob_api, relation_id, old)

    assert refused(response, 400, "CONSENT_SIGNATURE_INVALID") == [
        "/consent_statement/statement/acknowledged_manifest_version",
        "/consent_statement/statement/acknowledged_manifest_hash"]
    assert Relation.objects.get().acknowledged_manifest_version == 1


def test_a_replayed_statement_is_out_of_order(bob_api: APIClient, agent: Agent, laptop: KeyPair) -> None:
    relation_id = grant(bob_api, agent, signed(laptop, agent, seq=1)).json()["relation_id"]
    withdrawn = signed(laptop, agent, scopes=(), seq=2)
    assert reconsent(bob_api, relation_id, withdrawn, scopes=()).status_code == 200
    before = Event.objects.count()

    response = reconsent(bob_api, relation_id, withdrawn, scopes=())

    assert refused(response, 409, "CONSENT_OUT_OF_ORDER") == ["/consent_statement/statement/seq"]
    assert Event.objects.count() == before


def test_an_older_statement_cannot_restore_a_withdrawn_grant(bob_api: APIClient, agent: Agent,
                                                             laptop: KeyPair) -> None:
    relation_id = grant(bob_api, agent, signed(laptop, agent, seq=1)).json()["relation_id"]
    older = signed(laptop, agent, seq=2)  # signed, then overtaken by the withdrawal
    withdrawn = signed(laptop, agent, scopes=(), seq=3)
    assert reconsent(bob_api, relation_id, withdrawn, scopes=()).status_code == 200
    before = Event.objects.count()

    response = reconsent(bob_api, relation_id, older)

    assert refused(response, 409, "CONSENT_OUT_OF_ORDER") == ["/consent_statement/statement/seq"]
    relation = Relation.objects.get()
    assert (relation.granted_scopes, relation.consent_statement, Event.objects.count()) == ([], withdrawn, before)


def test_a_seq_used_before_a_revoke_is_out_of_order_on_a_new_relation(bob_api: APIClient, agent: Agent,
                                                                      laptop: KeyPair) -> None:
    relation_id = grant(bob_api, agent, signed(laptop, agent, seq=1)).json()["relation_id"]
    assert revoke(bob_api, relation_id, revocation(laptop, agent, seq=2)).status_code == 200

    replayed = grant(bob_api, agent, signed(laptop, agent, seq=2))
    newer = grant(bob_api, agent, signed(laptop, agent, seq=3))

    assert refused(replayed, 409, "CONSENT_OUT_OF_ORDER") == ["/consent_statement/statement/seq"]
    assert newer.status_code == 201 and Relation.objects.count() == 2


# --- unsigned changes ----------------------------------------------------------------------------


def test_an_unsigned_change_clears_the_statement_but_not_the_last_seq(bob_api: APIClient, agent: Agent,
                                                                      laptop: KeyPair) -> None:
    relation_id = grant(bob_api, agent, signed(laptop, agent, seq=5)).json()["relation_id"]

    unsigned = reconsent(bob_api, relation_id, None, scopes=())
    replayed = reconsent(bob_api, relation_id, signed(laptop, agent, seq=5))

    assert unsigned.status_code == 200 and unsigned.json()["consent_statement"] is None
    assert refused(replayed, 409, "CONSENT_OUT_OF_ORDER") == ["/consent_statement/statement/seq"]


def test_an_unsigned_revoke_without_a_body_still_works_and_clears_the_statement(bob_api: APIClient, agent: Agent,
                                                                               laptop: KeyPair) -> None:
    relation_id = grant(bob_api, agent, signed(laptop, agent)).json()["relation_id"]

    response = revoke(bob_api, relation_id, None)

    assert response.status_code == 200
    assert (response.json()["status"], response.json()["consent_statement"]) == ("revoked", None)


@pytest.mark.parametrize(("body", "code"), [({"consent_statement": "signed"}, "VALIDATION_ERROR"),
                                            ({"reason": "bye"}, "VALIDATION_ERROR"),
                                            ({"consent_statement": {}}, "CONSENT_SIGNATURE_INVALID")],
                         ids=["not an object", "an unknown member", "an empty object"])
def test_a_revoke_body_holds_a_signed_consent_only(bob_api: APIClient, relation: Relation, body: Any,
                                                   code: str) -> None:
    response = bob_api.delete(f"/h2a/relations/{relation.pk}", body, format="json")

    refused(response, 400, code)
    assert Relation.objects.get().revoked_at is None


# --- the document --------------------------------------------------------------------------------


def test_the_openapi_document_describes_the_statement_and_its_errors_on_the_three_operations(anon: APIClient) -> None:
    schema = anon.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    schemas, relation = schema["components"]["schemas"], schema["paths"]["/h2a/relations/{relation_id}"]
    operations = [schema["paths"]["/h2a/relations"]["post"], relation["patch"], relation["delete"]]

    for operation in operations:
        body = operation["requestBody"]["content"]["application/json"]["schema"]
        body = schemas[body["$ref"].rsplit("/", 1)[1]] if "$ref" in body else body
        signed = body["properties"]["consent_statement"]
        assert signed["required"] == ["statement", "signature"] and "seq" in signed["properties"]["statement"]["required"]
        assert "CONSENT_SIGNATURE_INVALID" in operation["responses"]["400"]["description"]
        assert "CONSENT_OUT_OF_ORDER" in operation["responses"]["409"]["description"]
    assert relation["delete"]["requestBody"]["required"] is False
    assert schemas["RelationOutput"]["properties"]["consent_statement"]["nullable"] is True
