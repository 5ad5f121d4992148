"""Safety numbers people can use (issue 26): alice's page of her agent's users and of each
relation, with the number bob's device computes, its QR code and "Mark as verified" on both
sides; and alice registering her agent's identity key in the portal from `hashee prove`."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import segno
from django.test import Client

from agents.models import Agent
from agents.selectors import identity_key_current
from hashee_sdk import KeyPair
from hashee_sdk.core import cli, signing
from relations.models import Relation, SafetyVerification
from relations.services import relation_revoke
from tests.agents.test_identity import ALICE_KEY, MALLORY_KEY, NEW_KEY
from tests.portal.test_safety_number import NUMBER, publish, publish_identity
from tests.portal.test_views import browser_for
from toolcalls.keydir_selectors import relation_safety_number

QR = re.compile(r'<svg[^>]*class="qr".*?</svg>', re.S)


def owner_page(alice: Any, agent: Agent, relation: Relation) -> str:
    response = browser_for(alice).get(f"/portal/agents/{agent.pk}/users/{relation.pk}/")
    assert response.status_code == 200
    return response.content.decode()


def connection_page(bob: Any, relation: Relation) -> str:
    return browser_for(bob).get(f"/portal/connections/{relation.pk}/").content.decode()


@pytest.fixture
def numbered(alice: Any, bob: Any, agent: Agent, relation: Relation) -> str:
    """DemoBot has alice's identity key and bob a device: the relation has a safety number."""
    publish_identity(alice, agent, ALICE_KEY)
    publish(bob, KeyPair.generate())
    number = relation_safety_number(relation=relation).number
    assert number is not None
    return number


def mark(client: Client, url: str, number: str) -> str:
    return client.post(url, {"safety_number": number}, follow=True).content.decode()


# --- the Users tab -----------------------------------------------------------------------------

def test_alice_sees_her_agents_users_with_their_grants(alice: Any, bob: Any, agent: Agent, relation: Relation) -> None:
    page = browser_for(alice).get(f"/portal/agents/{agent.pk}/users/").content.decode()

    row = re.search(rf'<tr data-relation="{relation.pk}".*?</tr>', page, re.S)
    assert row is not None
    assert "bob" in row.group(0) and "filesystem:read" in row.group(0) and "not signed" in row.group(0)
    assert f"/portal/agents/{agent.pk}/users/{relation.pk}/" in row.group(0)


def test_the_users_tab_says_when_no_one_is_connected(alice: Any, agent: Agent) -> None:
    page = browser_for(alice).get(f"/portal/agents/{agent.pk}/users/").content.decode()

    assert "data-no-users" in page


def test_mallory_sees_neither_alices_users_nor_a_relation(mallory: Any, agent: Agent, relation: Relation) -> None:
    client = browser_for(mallory)

    assert client.get(f"/portal/agents/{agent.pk}/users/").status_code == 404
    assert client.get(f"/portal/agents/{agent.pk}/users/{relation.pk}/").status_code == 404


def test_a_relation_of_another_agent_is_not_found_under_alices(alice: Any, bob: Any, agent: Agent,
                                                               relation: Relation, mallory: Any) -> None:
    from agents.services import agent_create

    other = agent_create(owner=mallory, name="Other")[0]

    assert browser_for(alice).get(f"/portal/agents/{other.pk}/users/{relation.pk}/").status_code == 404
    assert browser_for(mallory).get(f"/portal/agents/{other.pk}/users/{relation.pk}/").status_code == 404


def test_a_user_who_disconnected_is_listed_and_has_no_number(alice: Any, agent: Agent, relation: Relation,
                                                              numbered: str) -> None:
    relation_revoke(relation=relation)

    listed = browser_for(alice).get(f"/portal/agents/{agent.pk}/users/").content.decode()
    page = owner_page(alice, agent, relation)

    assert f'<tr data-relation="{relation.pk}" class="row-muted">' in listed and "Disconnected" in listed
    assert "This user disconnected" in page and NUMBER.search(page) is None


# --- the number, on both sides -------------------------------------------------------------------

def test_alice_and_bob_see_the_same_number_and_the_same_qr_code(alice: Any, bob: Any, agent: Agent,
                                                               relation: Relation, numbered: str) -> None:
    alices, bobs = owner_page(alice, agent, relation), connection_page(bob, relation)

    for page in (alices, bobs):
        shown, qr = NUMBER.search(page), QR.search(page)
        assert shown is not None and shown.group(1) == numbered
        assert qr is not None and "style" not in qr.group(0)
    # the code is the number, grouped as shown: what a phone's camera reads is what both screens say
    assert QR.search(alices).group(0) == QR.search(bobs).group(0)  # type: ignore[union-attr]
    expected = segno.make(numbered, error="m", boost_error=False).svg_inline(omitsize=True, svgclass="qr", lineclass=None)
    assert re.search(r' d="([^"]+)"', expected).group(1) in alices  # type: ignore[union-attr]


def test_no_page_of_the_feature_carries_an_inline_style(alice: Any, bob: Any, agent: Agent, relation: Relation,
                                                         numbered: str) -> None:
    """The CSP's style-src is 'self': a style attribute would be refused by the browser."""
    responses = [browser_for(alice).get(f"/portal/agents/{agent.pk}/users/{relation.pk}/"),
                 browser_for(alice).get(f"/portal/agents/{agent.pk}/users/"),
                 browser_for(alice).get(f"/portal/agents/{agent.pk}/settings/"),
                 browser_for(bob).get(f"/portal/connections/{relation.pk}/")]

    for response in responses:
        assert "style-src 'self'" in response["Content-Security-Policy"]
        assert not re.search(r"<[^>]+\sstyle=", response.content.decode())


def test_without_an_identity_key_alice_is_told_how_to_register_one(alice: Any, bob: Any, agent: Agent,
                                                                   relation: Relation) -> None:
    publish(bob, KeyPair.generate())

    page = owner_page(alice, agent, relation)

    assert NUMBER.search(page) is None and QR.search(page) is None
    assert "data-no-identity" in page and f"/portal/agents/{agent.pk}/settings/#identity" in page


def test_without_a_device_of_bobs_alice_is_told_bob_has_none(alice: Any, agent: Agent, relation: Relation) -> None:
    publish_identity(alice, agent, ALICE_KEY)

    page = owner_page(alice, agent, relation)

    assert NUMBER.search(page) is None and "data-no-device" in page and "bob has no device yet" in page


# --- "Mark as verified" ---------------------------------------------------------------------------

def test_alice_marks_the_number_verified_and_bobs_side_stays_his_own(alice: Any, bob: Any, agent: Agent,
                                                                     relation: Relation, numbered: str) -> None:
    page = mark(browser_for(alice), f"/portal/agents/{agent.pk}/users/{relation.pk}/verify", numbered)

    assert "data-safety-verified" in page and "Verified on" in page and "data-mark-verified" not in page
    assert "data-safety-verified" not in connection_page(bob, relation)


def test_bob_marks_it_verified_on_his_connection_page(bob: Any, relation: Relation, numbered: str) -> None:
    page = mark(browser_for(bob), f"/portal/connections/{relation.pk}/verify", numbered)

    assert "data-safety-verified" in page
    assert SafetyVerification.objects.get(relation=relation).side == SafetyVerification.Side.USER


def test_a_changed_number_no_longer_reads_verified(alice: Any, bob: Any, agent: Agent, relation: Relation,
                                                    numbered: str) -> None:
    mark(browser_for(bob), f"/portal/connections/{relation.pk}/verify", numbered)

    publish_identity(alice, agent, MALLORY_KEY, reset=True)

    page = connection_page(bob, relation)
    assert "data-safety-verified" not in page
    assert "data-safety-changed" in page and "The number changed since it was verified on" in page
    assert "data-mark-verified" in page and NUMBER.search(page).group(1) != numbered  # type: ignore[union-attr]


def test_a_number_the_page_showed_before_it_changed_is_not_marked(alice: Any, bob: Any, agent: Agent,
                                                                  relation: Relation, numbered: str) -> None:
    publish_identity(alice, agent, MALLORY_KEY, reset=True)  # after bob's page showed ``numbered``

    page = mark(browser_for(bob), f"/portal/connections/{relation.pk}/verify", numbered)

    assert "The safety number changed since this page was loaded" in page
    assert not SafetyVerification.objects.exists()


def test_there_is_nothing_to_mark_without_a_number(bob: Any, relation: Relation) -> None:
    page = mark(browser_for(bob), f"/portal/connections/{relation.pk}/verify", "0" * 60)

    assert "This relation has no safety number yet" in page
    assert not SafetyVerification.objects.exists()


def test_a_disconnected_relation_is_not_marked(bob: Any, relation: Relation, numbered: str) -> None:
    relation_revoke(relation=relation)

    page = mark(browser_for(bob), f"/portal/connections/{relation.pk}/verify", numbered)

    assert "This connection has ended" in page and not SafetyVerification.objects.exists()


def test_mallory_marks_nothing_of_bobs_or_alices(mallory: Any, agent: Agent, relation: Relation,
                                                 numbered: str) -> None:
    client = browser_for(mallory)

    assert client.post(f"/portal/connections/{relation.pk}/verify", {"safety_number": numbered}).status_code == 404
    assert client.post(f"/portal/agents/{agent.pk}/users/{relation.pk}/verify",
                       {"safety_number": numbered}).status_code == 404
    assert not SafetyVerification.objects.exists()


def test_marking_again_keeps_one_mark_per_side(alice: Any, agent: Agent, relation: Relation, numbered: str) -> None:
    url = f"/portal/agents/{agent.pk}/users/{relation.pk}/verify"
    mark(browser_for(alice), url, numbered)
    mark(browser_for(alice), url, numbered)

    assert SafetyVerification.objects.filter(relation=relation, side=SafetyVerification.Side.OWNER).count() == 1


# --- registering the identity key in the portal -------------------------------------------------

def prove(capsys: pytest.CaptureFixture[str], tmp_path: Path, key: dict[str, str], agent_id: str,
          *, rotate_from: dict[str, str] | None = None) -> str:
    """What `hashee prove --key identity.jwk --agent AGENT_ID` prints, as the owner copies it."""
    path = tmp_path / f"{signing.jwk_thumbprint(key)}.jwk"
    path.write_text(json.dumps(key))
    args = ["prove", "--key", str(path), "--agent", agent_id]
    if rotate_from is not None:
        old = tmp_path / "old.jwk"
        old.write_text(json.dumps(rotate_from))
        args += ["--rotate-from", str(old)]
    capsys.readouterr()
    assert cli.main(args) == 0
    return capsys.readouterr().out


def register(alice: Any, agent: Agent, pasted: str) -> str:
    return browser_for(alice).post(f"/portal/agents/{agent.pk}/identity", {"registration": pasted},
                                   follow=True).content.decode()


def test_alice_registers_the_key_from_the_output_of_hashee_prove(alice: Any, agent: Agent, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    settings = browser_for(alice).get(f"/portal/agents/{agent.pk}/settings/").content.decode()
    assert f"hashee prove --key identity.jwk --agent {agent.pk}" in settings and "hashee keygen identity.jwk" in settings

    page = register(alice, agent, prove(capsys, tmp_path, ALICE_KEY, str(agent.pk)))

    key = identity_key_current(agent_id=agent.pk)
    assert key is not None and key.kid == signing.jwk_thumbprint(ALICE_KEY)
    assert f"Identity key {key.kid} registered" in page and "data-identity-kid" in page


def test_the_body_alone_is_taken_too(alice: Any, agent: Agent) -> None:
    body = signing.identity_registration(ALICE_KEY, agent_id=str(agent.pk))

    register(alice, agent, json.dumps(body))

    assert identity_key_current(agent_id=agent.pk) is not None


def test_a_proof_made_for_another_agent_is_refused(alice: Any, agent: Agent, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    page = register(alice, agent, prove(capsys, tmp_path, ALICE_KEY, "another-agent"))

    assert "The proof does not verify with this key for this agent" in page and "IDENTITY_PROOF_INVALID" in page
    assert identity_key_current(agent_id=agent.pk) is None


def test_a_pasted_private_key_is_refused_and_not_shown_again(alice: Any, agent: Agent) -> None:
    for pasted in (ALICE_KEY, {"jwk": ALICE_KEY, "proof": signing.sign_identity_proof(ALICE_KEY,
                                                                                        agent_id=str(agent.pk))}):
        page = register(alice, agent, json.dumps(pasted))

        assert "That is a private key: never paste it anywhere" in page
        assert ALICE_KEY["d"] not in page
    assert identity_key_current(agent_id=agent.pk) is None


@pytest.mark.parametrize(("pasted", "code"), [
    ("hashee prove --key identity.jwk", "MALFORMED_JSON"),
    ('{"jwk": {"kty": "RSA"}, "proof": "a.b.c"}', "VALIDATION_ERROR"),
    ('{"jwk": {"kty": "OKP", "crv": "Ed25519", "x": "AAAA"}, "proof": "a.b.c", "extra": 1}', "VALIDATION_ERROR"),
    ("[]", "VALIDATION_ERROR"),
])
def test_what_is_not_a_registration_is_refused_with_its_code(alice: Any, agent: Agent, pasted: str,
                                                              code: str) -> None:
    page = register(alice, agent, pasted)

    assert f"({code})" in page and identity_key_current(agent_id=agent.pk) is None


def test_a_second_key_needs_the_current_ones_signature(alice: Any, agent: Agent, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    publish_identity(alice, agent, ALICE_KEY)

    refused = register(alice, agent, prove(capsys, tmp_path, NEW_KEY, str(agent.pk)))
    assert "IDENTITY_KEY_EXISTS" in refused and "--rotate-from" in refused
    wrong = register(alice, agent, prove(capsys, tmp_path, NEW_KEY, str(agent.pk), rotate_from=MALLORY_KEY))
    assert "KEY_SIGNATURE_INVALID" in wrong
    assert identity_key_current(agent_id=agent.pk).kid == signing.jwk_thumbprint(ALICE_KEY)  # type: ignore[union-attr]

    register(alice, agent, prove(capsys, tmp_path, NEW_KEY, str(agent.pk), rotate_from=ALICE_KEY))

    assert identity_key_current(agent_id=agent.pk).kid == signing.jwk_thumbprint(NEW_KEY)  # type: ignore[union-attr]


def test_a_reset_stays_with_the_api(alice: Any, agent: Agent) -> None:
    publish_identity(alice, agent, ALICE_KEY)
    body = {**signing.identity_registration(NEW_KEY, agent_id=str(agent.pk)), "reset": True}

    page = register(alice, agent, json.dumps(body))

    assert "reset through the API only" in page
    assert identity_key_current(agent_id=agent.pk).kid == signing.jwk_thumbprint(ALICE_KEY)  # type: ignore[union-attr]


def test_mallory_cannot_register_a_key_for_alices_agent(mallory: Any, agent: Agent) -> None:
    body = signing.identity_registration(MALLORY_KEY, agent_id=str(agent.pk))

    response = browser_for(mallory).post(f"/portal/agents/{agent.pk}/identity", {"registration": json.dumps(body)})

    assert response.status_code == 404 and identity_key_current(agent_id=agent.pk) is None


# --- in Simplified Chinese ----------------------------------------------------------------------

class _Texts(HTMLParser):
    """The words a reader reads: text nodes and the attributes people read, leaving out what
    is data (.mono: numbers, scopes, key ids; pre and code: commands; select: language names)."""

    SKIPPED = {"script", "style", "pre", "code", "select"}
    VOID = {"input", "br", "img", "meta", "link", "hr", "path"}

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []
        self.skipping: list[bool] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        skip = tag in self.SKIPPED or "mono" in (found.get("class") or "").split() or "username" in (
            found.get("class") or "").split()
        if not (self.skipping and self.skipping[-1]) and not skip:
            self.texts += [str(found[a]) for a in ("title", "aria-label", "placeholder", "data-confirm") if found.get(a)]
        if tag not in self.VOID:
            self.skipping.append(skip or bool(self.skipping and self.skipping[-1]))

    def handle_endtag(self, tag: str) -> None:
        if tag not in self.VOID and self.skipping:
            self.skipping.pop()

    def handle_data(self, data: str) -> None:
        if data.strip() and not (self.skipping and self.skipping[-1]):
            self.texts.append(data.strip())


NAMES = {"Hashee", "API", "SDK", "JSON", "Ed25519", "PUT", "DemoBot", "alice", "bob", "hashee", "prove", "python",
         "manage", "py", "manifest", "id", "reset"}  # names, commands and the API's own words
CODE = re.compile(r"\b[a-z]+(?:[_:][a-z]+)+\b|\b[A-Z]+(?:_[A-Z]+)+\b|(?:/[\w.{}-]+)+|--[a-z-]+")


def english_in(page: str) -> list[str]:
    parser = _Texts()
    parser.feed(page)
    return [text for text in parser.texts if set(re.findall(r"[A-Za-z]{2,}", CODE.sub("", text))) - NAMES]


def test_the_pages_in_simplified_chinese_carry_no_english_of_ours(alice: Any, bob: Any, agent: Agent,
                                                                  relation: Relation, numbered: str) -> None:
    zh = {"Accept-Language": "zh-CN"}
    owner = browser_for(alice)
    owner.post(f"/portal/agents/{agent.pk}/users/{relation.pk}/verify", {"safety_number": numbered}, headers=zh)
    pages = {url: owner.get(url, headers=zh).content.decode() for url in (
        f"/portal/agents/{agent.pk}/users/", f"/portal/agents/{agent.pk}/users/{relation.pk}/",
        f"/portal/agents/{agent.pk}/settings/")}
    pages["refused"] = owner.post(f"/portal/agents/{agent.pk}/identity", {"registration": "{"}, follow=True,
                                  headers=zh).content.decode()
    pages["bob"] = browser_for(bob).get(f"/portal/connections/{relation.pk}/", headers=zh).content.decode()

    assert "已于" in pages[f"/portal/agents/{agent.pk}/users/{relation.pk}/"]  # Verified on …
    assert "安全码的二维码" in pages["bob"] and "标记为已验证" in pages["bob"]
    assert {url: english_in(page) for url, page in pages.items() if english_in(page)} == {}
