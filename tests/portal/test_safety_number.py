"""The connection page shows the relation's safety number (SPEC §9.2), the same number
bob's Hashee app computes, so that he can compare the two."""

from __future__ import annotations

import re
from typing import Any

from agents import identity as identity_services
from agents.models import Agent
from hashee_sdk import KeyPair, statements
from hashee_sdk.core import signing
from relations.models import Relation
from tests.agents.test_identity import ALICE_KEY, MALLORY_KEY
from tests.portal.test_views import browser_for
from toolcalls.keydir_services import device_key_register

NUMBER = re.compile(r"data-safety-digits>((?:\d{5} ){11}\d{5})<")


def publish(user: Any, keys: KeyPair) -> None:
    public = keys.public.as_api()
    device_key_register(user=user, device_id="laptop", x25519_public=public["x25519_public"],
                        ed25519_public=public["ed25519_public"])


def publish_identity(alice: Any, agent: Agent, key: dict[str, str], *, reset: bool = False) -> None:
    identity_services.identity_key_publish(agent_id=agent.pk, actor=alice, jwk=signing.public_of(key), reset=reset,
                                           proof=signing.sign_identity_proof(key, agent_id=str(agent.pk)))


def _page(bob: Any, relation: Relation) -> str:
    return browser_for(bob).get(f"/portal/connections/{relation.pk}/").content.decode()


def test_bob_reads_the_number_his_device_computes(alice: Any, bob: Any, agent: Agent, relation: Relation) -> None:
    publish_identity(alice, agent, ALICE_KEY)
    laptop = KeyPair.generate()
    publish(bob, laptop)

    shown = NUMBER.search(_page(bob, relation))

    assert shown is not None
    assert shown.group(1) == statements.safety_number(
        agent_id=str(agent.pk), agent_identity=signing.b64url_decode(signing.public_of(ALICE_KEY)["x"]),
        user_root_device=laptop.public.ed25519)


def test_a_reset_identity_gives_another_number(alice: Any, bob: Any, agent: Agent, relation: Relation) -> None:
    publish_identity(alice, agent, ALICE_KEY)
    publish(bob, KeyPair.generate())
    before = NUMBER.search(_page(bob, relation))

    publish_identity(alice, agent, MALLORY_KEY, reset=True)

    after = NUMBER.search(_page(bob, relation))
    assert before and after and before.group(1) != after.group(1)


def test_an_agent_without_identity_says_its_publisher_is_unverified(bob: Any, relation: Relation) -> None:
    page = _page(bob, relation)

    assert NUMBER.search(page) is None and "data-unverified-publisher" in page
