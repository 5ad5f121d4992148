"""Operators and relations: revoked, never deleted (kept for audit); statuses read as words."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from agents import services as agent_services
from agents.models import Agent
from eventlog.models import Event
from hashee_sdk import KeyPair
from hashee_sdk.consent_statements import sign_consent
from relations import services as relation_services
from relations.models import Relation
from tests.changes import breaking, manifest_of
from toolcalls.keydir_services import device_key_register

pytestmark = pytest.mark.django_db

LIST = "/admin/relations/relation/"


def test_an_operator_revokes_a_relation_and_the_user_and_agent_are_told(operator: Client, relation: Relation,
                                                                         agent: Agent) -> None:
    response = operator.post(LIST, {"action": "revoke", "_selected_action": [str(relation.pk)]})

    assert response.status_code == 302
    relation.refresh_from_db()
    assert relation.revoked_at is not None and relation.events_until_id  # kept, with its audience window closed
    told = Event.objects.get(type="h2a.relation_revoked")
    assert told.user_id == relation.user_id and told.agent_id == agent.pk
    assert "1 relation(s) revoked." in operator.get(LIST).content.decode()


def test_revoking_an_already_revoked_relation_tells_no_one_again(operator: Client, relation: Relation) -> None:
    operator.post(LIST, {"action": "revoke", "_selected_action": [str(relation.pk)]})
    operator.post(LIST, {"action": "revoke", "_selected_action": [str(relation.pk)]})

    assert Event.objects.filter(type="h2a.relation_revoked").count() == 1


def test_an_operator_cannot_delete_a_relation(operator: Client, relation: Relation) -> None:
    listing = operator.get(LIST).content.decode()
    change = operator.get(f"{LIST}{relation.pk}/change/").content.decode()

    assert 'value="delete_selected"' not in listing and 'value="revoke"' in listing
    assert "deletelink" not in change and "/delete/" not in change
    assert operator.get(f"{LIST}{relation.pk}/delete/").status_code == 403
    assert operator.post(f"{LIST}{relation.pk}/delete/", {"post": "yes"}).status_code == 403
    operator.post(LIST, {"action": "delete_selected", "_selected_action": [str(relation.pk)], "post": "yes"})
    assert Relation.objects.filter(pk=relation.pk, revoked_at__isnull=True).exists()


def test_a_relation_awaiting_re_consent_reads_as_such(operator: Client, relation: Relation, agent: Agent) -> None:
    agent_services.agent_update(agent_id=agent.pk, actor=agent.owner,
                                capability_manifest=breaking(manifest_of(agent)))

    listing = operator.get(LIST).content.decode()
    change = operator.get(f"{LIST}{relation.pk}/change/").content.decode()
    filtered = operator.get(f"{LIST}?status={Relation.Status.REAUTH_REQUIRED}").content.decode()

    for page in (listing, change, filtered):
        assert "Re-consent required" in page and ">reauth_required<" not in page
    assert '<td class="field-status">Re-consent required</td>' in listing
    assert "1 relation" in filtered




def test_deleting_a_user_still_takes_their_relations_with_them(operator: Client, relation: Relation,
                                                               bob: User) -> None:
    """Only the relation's own delete is gone; an operator erasing a user is unchanged."""
    response = operator.post(f"/admin/auth/user/{bob.pk}/delete/", {"post": "yes"})

    assert response.status_code == 302
    assert not Relation.objects.filter(pk=relation.pk).exists()


def test_an_operator_sees_the_consent_statement_bobs_device_signed(operator: Client, bob: User, agent: Agent) -> None:
    laptop = KeyPair.generate()
    published = laptop.public.as_api()
    device_key_register(user=bob, device_id="laptop", x25519_public=published["x25519_public"],
                        ed25519_public=published["ed25519_public"])
    consent = sign_consent(laptop, agent_id=str(agent.pk), user_id="bob", granted_scopes=[],
                           acknowledged_manifest_version=1, acknowledged_manifest_hash=agent.capability_manifest_hash,
                           seq=7, ts=0)
    relation = relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=[],
                                                 consent_statement=consent)

    change = operator.get(f"{LIST}{relation.pk}/change/").content.decode()

    assert consent["signature"] in change and laptop.key_id in change
    assert 'name="consent_statement"' not in change  # shown, never edited
