"""An agent as an A2A AgentCard (SPEC §5.1): tools become skills, flags capabilities.

Three shapes:

* ``"seed"`` — the card of seed 003 (``/.well-known/agent.json``): ``url``,
  ``authentication.schemes``, ``capabilities.stateTransitionHistory``.
* ``"v1"`` — the A2A v1.0 ``AgentCard`` message in its JSON form, with no member it does
  not define, because the official SDK parses it strictly (protobuf ``ParseDict``):
  ``supportedInterfaces``, ``securitySchemes``, ``securityRequirements``.
* ``"combined"`` — the seed card plus the v1.0 members, for readers of either.

The four Hashee flags have no A2A equivalent except streaming, so all four also travel
as the params of a (non-required) capability extension.

The v1 card can be signed (SPEC §9.5, :func:`sign_agent_card`): an A2A
``AgentCardSignature``, a JWS over the card's canonical JSON without ``signatures``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

from hashee_sdk.core.canonical import canonicalize
from hashee_sdk.core.manifest import CAPABILITY_FLAGS
from hashee_sdk.core.signing import sign_detached

CardShape = Literal["combined", "v1", "seed"]

A2A_PROTOCOL_VERSION = "1.0"
A2A_PROTOCOL_BINDING = "HTTP+JSON"
FLAGS_EXTENSION_URI = "urn:hashee:a2a:capability-flags:v1"
SECURITY_SCHEME_NAME = "hasheeBearer"
DEFAULT_INPUT_MODES = ("text/plain", "application/json")
DEFAULT_OUTPUT_MODES = ("text/plain", "application/json")
SKILL_MODES = ("application/json",)


def build_agent_card(
    *,
    manifest: Mapping[str, Any],
    name: str,
    description: str,
    url: str,
    version: int | str,
    provider_name: str = "Hashee",
    documentation_url: str | None = None,
    shape: CardShape = "combined",
) -> dict[str, Any]:
    """The agent card of a validated manifest in the requested shape."""
    flags = _flags(manifest)
    card: dict[str, Any] = {"name": name, "description": description}
    if shape != "v1":
        card["url"] = url
    if shape != "seed":
        card["supportedInterfaces"] = [_interface(url)]
    card["provider"] = {"organization": provider_name, "url": _origin(url)}
    card["version"] = str(version)
    if documentation_url is not None:
        card["documentationUrl"] = documentation_url
    card["capabilities"] = _capabilities(flags, shape)
    card.update(_security(shape))
    card["defaultInputModes"] = list(DEFAULT_INPUT_MODES)
    card["defaultOutputModes"] = list(DEFAULT_OUTPUT_MODES)
    card["skills"] = skills_from_tools(manifest)
    return card


def skills_from_tools(manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One A2A skill per manifest tool, tagged with its scope and sensitivity."""
    levels = _scope_levels(manifest)
    tools = manifest.get("tools")
    return [_skill(tool, levels) for tool in tools if isinstance(tool, Mapping)] if isinstance(tools, list) else []


def humanize(tool_name: str) -> str:
    """``read_file`` → ``Read file``."""
    words = tool_name.replace("_", " ").split()
    return " ".join(words).capitalize() if words else tool_name


def _skill(tool: Mapping[str, Any], levels: Mapping[str, str]) -> dict[str, Any]:
    name = str(tool.get("name", ""))
    scope = tool.get("permission_scope")
    tags = [scope] if isinstance(scope, str) else []
    if isinstance(scope, str) and scope in levels:
        tags.append(f"sensitivity:{levels[scope]}")
    return {
        "id": name,
        "name": humanize(name),
        "description": str(tool.get("description_fallback") or tool.get("description_i18n_key") or name),
        "tags": tags,
        "inputModes": list(SKILL_MODES),
        "outputModes": list(SKILL_MODES),
    }


def _scope_levels(manifest: Mapping[str, Any]) -> dict[str, str]:
    scopes = manifest.get("permission_scopes")
    if not isinstance(scopes, list):
        return {}
    return {
        scope["id"]: scope["sensitivity"]
        for scope in scopes
        if isinstance(scope, Mapping) and isinstance(scope.get("id"), str) and isinstance(scope.get("sensitivity"), str)
    }


def _flags(manifest: Mapping[str, Any]) -> dict[str, bool]:
    declared = manifest.get("capability_flags")
    declared = declared if isinstance(declared, Mapping) else {}
    return {flag: declared.get(flag) is True for flag in CAPABILITY_FLAGS}


def _capabilities(flags: Mapping[str, bool], shape: CardShape) -> dict[str, Any]:
    capabilities: dict[str, Any] = {"streaming": flags["supports_streaming"], "pushNotifications": False}
    if shape != "v1":
        capabilities["stateTransitionHistory"] = False
    if shape != "seed":
        capabilities["extensions"] = [
            {
                "uri": FLAGS_EXTENSION_URI,
                "description": "Hashee capability flags of the agent's manifest (a missing flag is false).",
                "required": False,
                "params": dict(flags),
            }
        ]
    return capabilities


def _security(shape: CardShape) -> dict[str, Any]:
    security: dict[str, Any] = {}
    if shape != "v1":
        security["authentication"] = {"schemes": ["Bearer"]}
    if shape != "seed":
        scheme = {"scheme": "Bearer", "description": "A Hashee API key: Authorization: Bearer hsk_…"}
        security["securitySchemes"] = {SECURITY_SCHEME_NAME: {"httpAuthSecurityScheme": scheme}}
        security["securityRequirements"] = [{"schemes": {SECURITY_SCHEME_NAME: {"list": []}}}]
    return security


def _interface(url: str) -> dict[str, str]:
    return {"url": url, "protocolBinding": A2A_PROTOCOL_BINDING, "protocolVersion": A2A_PROTOCOL_VERSION}


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else url


def card_signing_payload(card: Mapping[str, Any]) -> bytes:
    """The bytes an A2A card signature signs: what the official SDK recomputes from the
    card it parsed (``a2a.utils.signing._canonicalize_agent_card``).

    The SDK signs the protobuf message's JSON (``MessageToDict``), not the card as served:
    proto3 drops booleans that are false where the field has no presence (an extension's
    ``required``); the SDK then removes empty strings, lists and objects, recursively, and
    serializes the rest as RFC 8785. Signing the served JSON instead would not verify.
    """
    body = {name: value for name, value in card.items() if name != "signatures"}
    capabilities = body.get("capabilities")
    if isinstance(capabilities, Mapping) and isinstance(capabilities.get("extensions"), list):
        extensions = [{k: v for k, v in ext.items() if not (k == "required" and v is False)}
                      for ext in capabilities["extensions"]]
        body["capabilities"] = {**capabilities, "extensions": extensions}
    return canonicalize(_without_empty(body) or {})


def sign_agent_card(card: Mapping[str, Any], private_jwk: Mapping[str, Any], *, kid: str,
                    jku: str) -> dict[str, Any]:
    """``card`` with ``signatures``: one AgentCardSignature by ``private_jwk`` (EdDSA), whose
    protected header names the key (``kid``) and where to fetch it (``jku``, a JWK Set)."""
    protected, _empty, signature = sign_detached(card_signing_payload(card), private_jwk, kid=kid,
                                                 jku=jku).split(".")
    return {**card, "signatures": [{"protected": protected, "signature": signature}]}


def _without_empty(value: Any) -> Any:
    """The SDK's ``_clean_empty``: None for "", [] and {} (after cleaning their members)."""
    if isinstance(value, Mapping):
        cleaned = {k: c for k, v in value.items() if (c := _without_empty(v)) is not None}
        return cleaned or None
    if isinstance(value, list):
        items = [c for v in value if (c := _without_empty(v)) is not None]
        return items or None
    if isinstance(value, str) and not value:
        return None
    return value
