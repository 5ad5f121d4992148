"""Signed agent cards (SPEC §9.5): what we sign is what the official A2A SDK recomputes."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from a2a.types import AgentCard
from a2a.utils.signing import InvalidSignaturesError, _canonicalize_agent_card, create_signature_verifier
from google.protobuf.json_format import ParseDict
from jwt import PyJWK

from hashee_sdk.core import signing
from hashee_sdk.core.agentcard import build_agent_card, card_signing_payload, sign_agent_card
from tests.core.test_agentcard import MANIFEST

KEY = signing.derive_private_jwk(b"test platform", info=b"hashee tests")
KID = signing.jwk_thumbprint(KEY)
JKU = "https://hashee.example/.well-known/jwks.json"


def v1_card(manifest: dict[str, Any] = MANIFEST, **overrides: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {"manifest": manifest, "name": "Reader", "description": "Reads things for you.",
                                 "url": "https://hashee.example/agents/42", "version": 3,
                                 "documentation_url": "https://hashee.example/api/docs/", "shape": "v1"}
    return build_agent_card(**{**arguments, **overrides})


def without_tools() -> dict[str, Any]:
    return {**MANIFEST, "tools": [], "capability_flags": {}}


CARDS = {
    "two tools": v1_card(),
    "no tools, no flags": v1_card(without_tools()),
    "empty description": v1_card(description=""),
    "non-ASCII and astral names": v1_card(name="读文件 📄 Ünïcode", description="é\u2028\U0001f600"),
    "no documentation URL": v1_card(documentation_url=None),
}


def parsed(card: dict[str, Any]) -> AgentCard:
    return ParseDict(card, AgentCard())


@pytest.mark.parametrize("card", CARDS.values(), ids=list(CARDS))
def test_the_signed_bytes_are_the_sdks_canonical_form_of_the_parsed_card(card: dict[str, Any]) -> None:
    assert card_signing_payload(card) == _canonicalize_agent_card(parsed(card)).encode("utf-8")


def verifier() -> Any:
    def key_provider(kid: str | None, jku: str | None) -> PyJWK:
        assert (kid, jku) == (KID, JKU)
        return PyJWK.from_dict(signing.jwks_entry(signing.public_of(KEY)))
    return create_signature_verifier(key_provider, ["EdDSA"])


@pytest.mark.parametrize("card", CARDS.values(), ids=list(CARDS))
def test_the_official_sdk_accepts_a_signed_card(card: dict[str, Any]) -> None:
    signed = sign_agent_card(card, KEY, kid=KID, jku=JKU)
    verifier()(parsed(signed))


def test_the_protected_header_names_the_key_and_where_to_fetch_it() -> None:
    signed = sign_agent_card(v1_card(), KEY, kid=KID, jku=JKU)
    (signature,) = signed["signatures"]
    assert set(signature) == {"protected", "signature"}
    header = signing.detached_parts(f"{signature['protected']}..{signature['signature']}")[1]
    assert header == {"alg": "EdDSA", "kid": KID, "jku": JKU}


TAMPERINGS = {
    "name": lambda c: c.update(name="Evil Reader"),
    "a skill's description": lambda c: c["skills"][0].update(description="Harmless"),
    "a capability flag": lambda c: c["capabilities"]["extensions"][0]["params"].update(supports_voice=False),
    "the endpoint": lambda c: c["supportedInterfaces"][0].update(url="https://evil.example/agents/42"),
}


@pytest.mark.parametrize("tamper", TAMPERINGS.values(), ids=list(TAMPERINGS))
def test_the_official_sdk_refuses_a_tampered_card(tamper: Any) -> None:
    signed = copy.deepcopy(sign_agent_card(v1_card(), KEY, kid=KID, jku=JKU))
    tamper(signed)
    with pytest.raises(InvalidSignaturesError):
        verifier()(parsed(signed))
