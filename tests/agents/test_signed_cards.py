"""Signed agent cards (SPEC §9.5): the official A2A SDK verifies the served card with the
platform key it fetches from the card's own ``jku``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from a2a.types import AgentCard
from a2a.utils.signing import InvalidSignaturesError, create_signature_verifier
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from google.protobuf.json_format import ParseDict
from jwt import PyJWK, PyJWKSet
from rest_framework.test import APIClient

from agents.models import Agent
from hashee_sdk.core import signing

pytestmark = pytest.mark.django_db

PUBLIC_URL = "https://hashee.example"


@pytest.fixture(autouse=True)
def public_url(settings: Any) -> None:
    settings.HASHEE_PUBLIC_URL = PUBLIC_URL


def fetch_through(client: APIClient) -> Any:
    """A key provider that fetches the ``jku`` JWK Set from our server (the test client)."""
    def key_provider(kid: str | None, jku: str | None) -> PyJWK:
        assert kid is not None and jku is not None and jku.startswith(PUBLIC_URL)
        response = client.get(jku.removeprefix(PUBLIC_URL))
        assert response.status_code == 200
        return PyJWKSet.from_dict(response.json())[kid]
    return key_provider


def served_card(client: APIClient, agent: Agent) -> dict[str, Any]:
    response = client.get(f"/agents/{agent.pk}/.well-known/agent-card.json")
    assert response.status_code == 200
    return dict(response.json())


def test_the_official_sdk_accepts_the_served_card(anon: APIClient, agent: Agent) -> None:
    card = served_card(anon, agent)

    create_signature_verifier(fetch_through(anon), ["EdDSA"])(ParseDict(card, AgentCard()))

    header = signing.detached_parts("{protected}..{signature}".format(**card["signatures"][0]))[1]
    assert header["alg"] == "EdDSA" and header["jku"] == f"{PUBLIC_URL}/.well-known/jwks.json"


def test_the_official_sdk_refuses_a_tampered_card(anon: APIClient, agent: Agent) -> None:
    card = served_card(anon, agent)
    card["skills"][0]["description"] = "Only reads what you allow (it does not)"

    with pytest.raises(InvalidSignaturesError):
        create_signature_verifier(fetch_through(anon), ["EdDSA"])(ParseDict(card, AgentCard()))


def test_the_platform_key_set_is_public_only(anon: APIClient) -> None:
    (key,) = anon.get("/.well-known/jwks.json").json()["keys"]

    assert set(key) == {"kty", "crv", "x", "kid", "alg", "use"}
    assert (key["alg"], key["use"], key["kid"]) == ("EdDSA", "sig", signing.jwk_thumbprint(key))


def test_the_derived_platform_key_follows_the_secret_key(anon: APIClient, settings: Any) -> None:
    first = anon.get("/.well-known/jwks.json").json()
    assert anon.get("/.well-known/jwks.json").json() == first  # the same for every worker of a deployment

    settings.SECRET_KEY = "another deployment's secret"

    assert anon.get("/.well-known/jwks.json").json() != first


def test_a_configured_platform_key_is_used(anon: APIClient, agent: Agent, settings: Any) -> None:
    key = signing.generate_private_jwk()
    settings.HASHEE_PLATFORM_SIGNING_KEY = json.dumps(key)

    (served,) = anon.get("/.well-known/jwks.json").json()["keys"]

    assert served["x"] == key["x"]
    create_signature_verifier(fetch_through(anon), ["EdDSA"])(ParseDict(served_card(anon, agent), AgentCard()))


def test_a_bad_platform_key_setting_fails_the_system_check(settings: Any) -> None:
    settings.HASHEE_PLATFORM_SIGNING_KEY = json.dumps(signing.public_of(signing.generate_private_jwk()))

    with pytest.raises(SystemCheckError, match=r"hashee\.E002"):
        call_command("check")


def test_the_seed_and_combined_cards_stay_unsigned(anon: APIClient, agent: Agent) -> None:
    assert "signatures" not in anon.get(f"/agents/{agent.pk}/agent-card.json").json()
    assert "signatures" not in anon.get(f"/agents/{agent.pk}/.well-known/agent.json").json()


@pytest.fixture
def development(settings: Any, tmp_path: Any) -> Any:
    """DJANGO_DEBUG=1 with no DJANGO_SECRET_KEY: the secret key is the public one in the source."""
    from hashee import platform_key

    settings.DEBUG = True
    settings.SECRET_KEY = settings.INSECURE_DEV_SECRET_KEY
    settings.HASHEE_PLATFORM_KEY_FILE = str(tmp_path / "run" / "platform-signing-key.jwk")
    platform_key._local_key.cache_clear()
    yield tmp_path / "run" / "platform-signing-key.jwk"
    platform_key._local_key.cache_clear()


def test_in_development_the_card_key_is_not_derivable_from_the_public_secret(
        development: Any, anon: APIClient, agent: Agent, settings: Any) -> None:
    from hashee.platform_key import DERIVATION_INFO

    (served,) = anon.get("/.well-known/jwks.json").json()["keys"]

    mallory = signing.derive_private_jwk(settings.INSECURE_DEV_SECRET_KEY.encode(), info=DERIVATION_INFO)
    assert served["x"] != mallory["x"]
    assert development.stat().st_mode & 0o777 == 0o600
    assert json.loads(development.read_text())["x"] == served["x"]
    create_signature_verifier(fetch_through(anon), ["EdDSA"])(ParseDict(served_card(anon, agent), AgentCard()))


def test_the_development_key_survives_a_restart(development: Any, anon: APIClient) -> None:
    from hashee import platform_key

    before = anon.get("/.well-known/jwks.json").json()
    platform_key._local_key.cache_clear()  # a new process reads the file again

    assert anon.get("/.well-known/jwks.json").json() == before


def test_a_development_key_file_others_can_read_is_refused(development: Any) -> None:
    from django.core.exceptions import ImproperlyConfigured

    from hashee import platform_key

    platform_key.platform_private_jwk()
    development.chmod(0o644)
    platform_key._local_key.cache_clear()

    with pytest.raises(ImproperlyConfigured, match="chmod 600"):
        platform_key.platform_private_jwk()


def test_without_debug_the_public_secret_still_refuses_to_serve(settings: Any) -> None:
    from django.core.exceptions import ImproperlyConfigured

    from hashee.checks import refuse_to_serve

    settings.DEBUG = False
    settings.SECRET_KEY = settings.INSECURE_DEV_SECRET_KEY

    with pytest.raises(ImproperlyConfigured, match=r"hashee\.E004"):
        refuse_to_serve()
