"""An in-memory stand-in for the REST API, enough for the SDK's agent and client to talk
through it without Django: relations (with signed consent, SPEC §9.6), agents and their
manifest versions (signed when the agent has an identity key), the key directory and the
message pipe."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from typing import Any

from hashee_sdk import KeyPair, PublicKeys, statements
from hashee_sdk.consent_statements import ConsentInvalid, verify_consent
from hashee_sdk.core import signing
from hashee_sdk.core.canonical import canonical_hash
from hashee_sdk.rest import HttpResponse

RELATION_ID = "7d1f4f0e-1111-4a4a-9b9b-000000000001"
AGENT_ID = "7d1f4f0e-2222-4a4a-9b9b-000000000002"
AGENT_NAME = "Notes helper"
USER = "bob"

MANIFEST: dict[str, Any] = {
    "schema_version": "1.0", "agent_version": "1.0.0",
    "tools": [
        {"name": "read_file", "description_i18n_key": "agent.cap.read_file.description",
         "description_fallback": "Read a file you choose",
         "input_schema": {"type": "object", "additionalProperties": False, "required": ["path"],
                          "properties": {"path": {"type": "string", "maxLength": 1024},
                                         "offset": {"type": "integer", "minimum": 0},
                                         "limit": {"type": "integer", "minimum": 1, "maximum": 65536}}},
         "permission_scope": "filesystem:read", "timeout_ms": 5000},
        {"name": "notify", "description_i18n_key": "agent.cap.notify.description",
         "input_schema": {"type": "object", "additionalProperties": False, "required": ["title"],
                          "properties": {"title": {"type": "string", "maxLength": 80}}},
         "permission_scope": "notification:send", "timeout_ms": 100},
        {"name": "locate", "description_i18n_key": "agent.cap.locate.description",
         "input_schema": {"type": "object", "additionalProperties": False, "properties": {}},
         "permission_scope": "location:read"},
    ],
    "permission_scopes": [
        {"id": "filesystem:read", "label_i18n_key": "agent.scope.filesystem_read.label", "sensitivity": "medium"},
        {"id": "notification:send", "label_i18n_key": "agent.scope.notification_send.label", "sensitivity": "low"},
        {"id": "location:read", "label_i18n_key": "agent.scope.location_read.label", "sensitivity": "high"},
    ],
}
ALL_SCOPES = ["filesystem:read", "notification:send", "location:read"]
MANIFEST_HASH = canonical_hash(MANIFEST)


def manifest() -> dict[str, Any]:
    return copy.deepcopy(MANIFEST)


NOTIFY_RESULT: dict[str, Any] = {"type": "object", "properties": {"shown": {"type": "boolean"}}, "required": ["shown"]}


def typed_manifest() -> dict[str, Any]:
    """The manifest with notify's result declared (SPEC §10.4): ``{"shown": <boolean>}``."""
    typed = manifest()
    typed["tools"][1]["output_schema"] = copy.deepcopy(NOTIFY_RESULT)
    return typed


def approval(device_id: str, keys: KeyPair, approver: KeyPair | None) -> dict[str, Any]:
    """The listing's approval fields of a device approved by ``approver`` (none: a first device)."""
    if approver is None:
        return {"approved_by_key_id": None, "approval": None}
    return {"approved_by_key_id": approver.key_id,
            "approval": statements.approve_device(approver, device_id=device_id, key_id=keys.key_id)}


class FakeServer:
    """Routes the few endpoints the SDK uses; messages become ``message.new`` frames."""

    def __init__(self, *, granted: list[str] | None = None, status: str = "active") -> None:
        self.versions: list[dict[str, Any]] = [manifest()]  # version n is versions[n - 1]
        self.granted = list(ALL_SCOPES if granted is None else granted)
        self.status = status
        self.pending: list[str] = []
        self.acknowledged = 1
        self.devices: list[dict[str, Any]] = []
        self.agent_keys: list[dict[str, Any]] = []
        self.messages: list[dict[str, Any]] = []
        self.rate_limited = False
        self.consent_statement: dict[str, Any] | None = None  # the last change's, None when unsigned
        self.grant_options: dict[str, Any] = {}  # SPEC §5.2, as the last change sent them
        self.offline = False  # PATCH and DELETE of the relation fail (the device cannot reach it)
        self.identity: dict[str, str] | None = None  # the agent's private identity JWK, if it has one
        self.signatures: dict[int, str | None] = {}  # version → capability_manifest_signature
        self._ids = itertools.count(1)

    @property
    def manifest(self) -> dict[str, Any]:
        return self.versions[-1]

    def publish(self, new_manifest: dict[str, Any], *, pending: list[str] | None = None) -> None:
        """A new version, as the server stores it (signed with the identity key, if any);
        ``pending``: the relation goes to reauth."""
        self.versions.append(new_manifest)
        if self.identity is not None:
            self.signatures[len(self.versions)] = signing.sign_manifest(new_manifest, self.identity)
        if pending:
            self.status = "reauth_required"
            self.pending = sorted({*self.pending, *pending})

    def transport(self, party: str) -> FakeTransport:
        return FakeTransport(self, party)

    def publish_device(self, device_id: str, keys: KeyPair, *, approver: KeyPair | None = None) -> None:
        """A device of the user; without ``approver`` a first device (a user has one)."""
        self.devices.append({"device_id": device_id, **keys.public.as_api(), "key_id": keys.key_id,
                             "created_at": f"2026-01-01T00:00:{len(self.devices):02d}Z", **approval(device_id, keys,
                                                                                                     approver)})

    def relation(self) -> dict[str, Any]:
        """The relation as the API (and its events) return it."""
        return {"relation_id": RELATION_ID, "agent_id": AGENT_ID, "user": USER, "granted_scopes": self.granted,
                "pending_scopes": self.pending, "status": self.status,
                "acknowledged_manifest_version": self.acknowledged,
                "acknowledged_manifest_hash": canonical_hash(self.versions[self.acknowledged - 1]),
                "current_manifest_version": len(self.versions), "consent_statement": self.consent_statement,
                "grant_options": {k: v for k, v in self.grant_options.items() if k in self.granted},
                "revoked_at": "2026-01-02T00:00:00Z" if self.status == "revoked" else None}

    def relation_frame(self, kind: str) -> dict[str, Any]:
        """An ``h2a.relation_*`` event frame about the relation as it is now."""
        return {"id": next(self._ids), "type": kind, "created_at": "2026-01-01T00:00:00Z",
                "data": {"relation": copy.deepcopy(self.relation())}}

    def give_identity(self, private_jwk: dict[str, str]) -> None:
        """The agent gets an identity key (SPEC §9.1): its runtime keys are vouched for by it,
        and versions published from now on are signed."""
        self.identity = private_jwk
        for key in self.agent_keys:
            key["identity_signature"] = statements.sign_runtime_key(private_jwk, agent_id=AGENT_ID,
                                                                    key_id=key["key_id"])

    def publish_agent(self, keys: KeyPair) -> None:
        self.agent_keys.append({**keys.public.as_api(), "key_id": keys.key_id, "created_at": "2026-01-01T00:00:00Z"})

    def post(self, party: str, msg_subtype: str, payload: Any) -> dict[str, Any]:
        """Store a message as if ``party`` had sent it; returns its ``message.new`` frame."""
        self._message(party, {"msg_subtype": msg_subtype, "content_type": "application/json", "payload": payload})
        return self.frame()

    def frame(self, index: int = -1) -> dict[str, Any]:
        message = self.messages[index]
        return {"id": next(self._ids), "type": "message.new", "created_at": message["created_at"],
                "data": {"relation_id": message["relation_id"], "message": message}}

    def handle(self, party: str, method: str, path: str, body: Any) -> HttpResponse:
        route = (method, path)
        if route == ("GET", f"/h2a/relations/{RELATION_ID}"):
            return self._ok(self.relation())
        if route == ("GET", "/h2a/relations"):
            return self._ok({"count": 1, "next": None, "previous": None, "results": [self.relation()]})
        if route in (("POST", "/h2a/relations"), ("PATCH", f"/h2a/relations/{RELATION_ID}"),
                     ("DELETE", f"/h2a/relations/{RELATION_ID}")):
            return self._consent(method, body or {})
        if route == ("GET", f"/agents/{AGENT_ID}"):
            return self._ok({"agent_id": AGENT_ID, "name": AGENT_NAME, "capability_manifest": self.manifest,
                             "capability_manifest_version": len(self.versions),
                             "capability_manifest_hash": canonical_hash(self.manifest),
                             "capability_manifest_signature": self.signatures.get(len(self.versions))})
        if route == ("GET", f"/agents/{AGENT_ID}/identity"):
            if self.identity is None:
                return HttpResponse(404, {"error": {"code": "NOT_FOUND", "message": "No identity.", "details": []}})
            public = signing.public_of(self.identity)
            return self._ok({"kid": signing.jwk_thumbprint(public), "jwk": public, "created_at": "2026-01-01T00:00:00Z"})
        prefix = f"/agents/{AGENT_ID}/manifest/versions/"
        if method == "GET" and path.startswith(prefix) and path[len(prefix):].isdigit():
            return self._version(int(path[len(prefix):]))
        if route == ("GET", f"/h2a/relations/{RELATION_ID}/keys"):
            return self._ok({"relation_id": RELATION_ID, "user": {"devices": self.devices},
                             "agent": {"agent_id": AGENT_ID, "keys": self.agent_keys}})
        if route == ("POST", f"/h2a/relations/{RELATION_ID}/messages"):
            return self._message(party, body)
        if method == "GET" and path.startswith(f"/h2a/relations/{RELATION_ID}/messages?after="):
            after = path.rsplit("=", 1)[1]
            ids = [m["message_id"] for m in self.messages]
            later = self.messages[ids.index(after) + 1:] if after in ids else []
            return self._ok({"messages": later, "has_more": False})
        return HttpResponse(404, {"error": {"code": "NOT_FOUND", "message": "No such route.", "details": []}})

    def _message(self, party: str, body: Mapping[str, Any]) -> HttpResponse:
        if self.rate_limited and body["msg_subtype"] == "artifact_tool_call":
            return HttpResponse(429, {"error": {"code": "RATE_LIMITED", "message": "slow down", "details": []}},
                                {"retry-after": "17", "x-ratelimit-limit": "60", "x-ratelimit-remaining": "0",
                                 "x-ratelimit-reset": "1767225600"})
        message = {"message_id": f"m{len(self.messages) + 1}", "relation_id": RELATION_ID, "sender": party,
                   "msg_subtype": body["msg_subtype"], "content_type": body["content_type"],
                   "payload": body["payload"], "created_at": "2026-01-01T00:00:00Z"}
        self.messages.append(message)
        return HttpResponse(201, {k: v for k, v in message.items() if k != "payload"})

    def _consent(self, method: str, body: Mapping[str, Any]) -> HttpResponse:
        """POST, PATCH or DELETE of the relation, with the checks of SPEC §9.6 on a
        ``consent_statement`` (its device among the listed ones: this fake has no approvals)."""
        revoked = method == "DELETE"
        if self.offline and method != "POST":
            return _error(503, "SERVICE_UNAVAILABLE", "offline")
        granted = [] if revoked else sorted(set(body.get("granted_scopes") or []))
        options = {} if revoked else dict(body.get("grant_options") or {})
        acknowledged = body.get("acknowledged_manifest_version", len(self.versions))
        if acknowledged != len(self.versions):  # as the server: consent is to the current version only
            return _error(409, "VERSION_CONFLICT", f"the current version is {len(self.versions)}")
        signed = body.get("consent_statement")
        if signed is not None:
            devices = {d["key_id"]: PublicKeys.from_api(d) for d in self.devices}
            try:
                statement = verify_consent(signed, devices=devices)
            except ConsentInvalid as exc:
                return _error(400, "CONSENT_SIGNATURE_INVALID", str(exc))
            expected = {"agent_id": AGENT_ID, "user_id": USER, "granted_scopes": granted, "revoked": revoked,
                        "grant_options": options, "acknowledged_manifest_version": acknowledged,
                        "acknowledged_manifest_hash": canonical_hash(self.versions[acknowledged - 1])}
            if any(statement[name] != value for name, value in expected.items()):
                return _error(400, "CONSENT_SIGNATURE_INVALID", "the statement is not this request's")
            if self.consent_statement is not None and statement["seq"] <= self.consent_statement["statement"]["seq"]:
                return _error(409, "CONSENT_OUT_OF_ORDER", "seq")
        self.consent_statement = copy.deepcopy(signed)
        if revoked:
            self.status = "revoked"
        else:
            self.granted, self.status, self.pending, self.acknowledged = granted, "active", [], acknowledged
            self.grant_options = {k: v for k, v in options.items() if v}
        return HttpResponse(201 if method == "POST" else 200, copy.deepcopy(self.relation()))

    def _version(self, version: int) -> HttpResponse:
        if not 1 <= version <= len(self.versions):
            return HttpResponse(404, {"error": {"code": "NOT_FOUND", "message": "No such version.", "details": []}})
        found = self.versions[version - 1]
        return self._ok({"version": version, "hash": canonical_hash(found), "manifest": found,
                         "capability_manifest_signature": self.signatures.get(version)})

    @staticmethod
    def _ok(body: Any) -> HttpResponse:
        return HttpResponse(200, copy.deepcopy(body))


def _error(status: int, code: str, message: str) -> HttpResponse:
    return HttpResponse(status, {"error": {"code": code, "message": message, "details": []}})


class FakeTransport:
    def __init__(self, server: FakeServer, party: str) -> None:
        self.server = server
        self.party = party
        self.requests: list[tuple[str, str, Any]] = []

    async def request(self, method: str, path: str, *, json: Any = None,
                      headers: Mapping[str, str] | None = None) -> HttpResponse:
        self.requests.append((method, path, copy.deepcopy(json)))
        return self.server.handle(self.party, method, path, copy.deepcopy(json))
