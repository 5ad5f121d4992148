"""drf-spectacular hook: the OpenAPI document says what the code enforces (issue 17).

A schema-driven client (schemathesis, generated SDKs) trusts the document: a request it
calls valid must be accepted, one it calls invalid must be refused. The views parse
query strings and headers by hand: each view declares its parameters' schemas beside the
constants it checks them against (``OpenApiParameter`` with a schema); this hook adds what
is document-wide — the manifest described by its own JSON Schema, closed bodies, bearer
security, links between operations and the 401 answers.
"""

from __future__ import annotations

from typing import Any, Final

from hashee_sdk.core.manifest_jsonschema import build_manifest_json_schema

MANIFEST = "CapabilityManifest"
# A character Python's str.strip() keeps: DRF's CharField trims before its non-blank check.
NOT_BLANK: Final = "[^\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"

# Bodies whose unknown members are refused (hashee.api.validated with a hint, StrictInput).
CLOSED_BODIES: Final = ("AgentCreateInputRequest", "AgentUpdateInputRequest", "IdentityPublishInputRequest")
# 404 until the new agent publishes a manifest or an identity key: not linked from its creation.
UNTIL_PUBLISHED: Final = ("agents_well_known_agent_card", "agents_well_known_agent_json", "agents_agent_card",
                          "agents_jwks", "agents_identity_retrieve", "agents_manifest_diff")
BASE64_32_BYTES: Final = {"pattern": "^[A-Za-z0-9+/]{43}=$", "minLength": 44, "maxLength": 44}


def _openapi_30(node: Any) -> Any:
    """The manifest schema's Draft 2020-12 keywords that OpenAPI 3.0 lacks, in 3.0 terms."""
    if isinstance(node, list):
        return [_openapi_30(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _openapi_30(value) for key, value in node.items() if key not in ("$schema", "$id", "$defs")}
    if "const" in out:
        out["enum"] = [out.pop("const")]
    if isinstance(out.get("$ref"), str) and out["$ref"].startswith("#/$defs/"):
        out["$ref"] = f"#/components/schemas/{MANIFEST}_{out['$ref'].removeprefix('#/$defs/')}"
    return out


def _manifest_components() -> dict[str, Any]:
    schema = build_manifest_json_schema()
    components = {f"{MANIFEST}_{name}": _openapi_30(body) for name, body in schema.get("$defs", {}).items()}
    components[MANIFEST] = _openapi_30(schema)
    return components


def _bearer_security(result: dict[str, Any]) -> None:
    """Bearer keys are how API clients authenticate; the portal's session cookie is the
    browser's (Try it sends it by itself), so it is not a parameter a client must send."""
    result["components"]["securitySchemes"] = {"bearerAuth": {
        "type": "http", "scheme": "bearer",
        "description": "A user's hsk_ key, an agent's hak_ key or an hat_ access token (POST /oauth/token)."}}
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            if isinstance(operation, dict) and "security" in operation:
                operation["security"] = [{"bearerAuth": []} if "cookieAuth" in requirement else requirement
                                         for requirement in operation["security"]]


def _unauthenticated_answers(paths: dict[str, Any]) -> None:
    """An operation that needs a key answers 401 without one."""
    unauthorized = {"description": "No valid credentials",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    for operations in paths.values():
        for operation in operations.values():
            if isinstance(operation, dict) and {} not in operation.get("security", [{}]):
                operation["responses"].setdefault("401", unauthorized)


def _bodies(paths: dict[str, Any], schemas: dict[str, Any]) -> None:
    for name in CLOSED_BODIES:
        schemas[name]["additionalProperties"] = False
    manifest_ref = {"$ref": f"#/components/schemas/{MANIFEST}"}
    schemas["AgentCreateInputRequest"]["properties"]["capability_manifest"] = {"allOf": [manifest_ref], "nullable": True}
    schemas["AgentUpdateInputRequest"]["properties"]["capability_manifest"] = manifest_ref
    schemas["IdentityPublishInputRequest"]["properties"]["jwk"]["type"] = "object"
    for name in ("AgentKeyInputRequest", "DeviceKeyInputRequest"):
        for field in ("x25519_public", "ed25519_public"):
            schemas[name]["properties"][field].update(BASE64_32_BYTES)
    for name in ("RelationCreateInputRequest", "RelationUpdateInputRequest"):
        schemas[name]["properties"]["granted_scopes"]["items"]["pattern"] = NOT_BLANK
    for name in (name for name in schemas if name.endswith("Request")):
        for field in schemas[name].get("properties", {}).values():
            if field.get("type") == "string" and field.get("minLength") and not {"pattern", "format", "enum"} & set(field):
                field["pattern"] = NOT_BLANK
    # DELETE /h2a/relations/{id} reads an optional body (SPEC §9.6), which drf-spectacular
    # leaves out of a DELETE: the same signed consent as POST's, alone.
    signed_consent = schemas["RelationCreateInputRequest"]["properties"]["consent_statement"]
    paths["/h2a/relations/{relation_id}"]["delete"]["requestBody"] = {"required": False, "content": {
        "application/json": {"schema": {"type": "object", "additionalProperties": False,
                                        "properties": {"consent_statement": signed_consent}}}}}
    # Any JSON value is validated: the answer (200) reports what is wrong with it.
    paths["/manifests/validate"]["post"]["requestBody"] = {
        "required": True, "content": {"application/json": {"schema": {}}}}
    served = paths["/schemas/capability-manifest/v1.json"]["get"]["responses"]["200"]
    served["content"] = {"application/schema+json": {"schema": {"type": "object"}}}


def _links(paths: dict[str, Any]) -> None:
    """Create → read/update/delete: a POST on ``P`` whose 201 body names the new object's id
    links to every operation under ``P/{id}`` (the stateful phase follows them)."""
    for path, operations in paths.items():
        created = operations.get("post", {}).get("responses", {}).get("201")
        if not created:
            continue
        for child, child_operations in paths.items():
            rest = child.removeprefix(path + "/")
            if child == rest or not rest.startswith("{"):
                continue
            name = rest[1:rest.index("}")]
            for operation in child_operations.values():
                if not isinstance(operation, dict) or operation.get("operationId") in (None, *UNTIL_PUBLISHED):
                    continue
                parameters = {p["name"]: f"$request.path.{p['name']}" for p in operation.get("parameters", [])
                              if p["in"] == "path" and p["name"] != name}
                if any(f"{{{parent}}}" not in path for parent in parameters):
                    continue  # it needs an id the create call does not know (a key of the new agent)
                created.setdefault("links", {})[operation["operationId"]] = {
                    "operationId": operation["operationId"],
                    "parameters": {**parameters, name: f"$response.body#/{name}"}}


def match_the_code(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(_manifest_components())
    _bearer_security(result)
    _bodies(result["paths"], schemas)
    _links(result["paths"])
    _unauthenticated_answers(result["paths"])
    return result
