"""The client security contract (SPEC §6) up to the prompt, as one pure, fast function.

:func:`decide` takes a decrypted ``tool_call`` artifact and answers, in this order:

1. a group conversation → ``denied: tool_not_supported_in_group``;
2. ``tool_name`` not in the cached manifest → ``denied: tool_not_declared``;
3. the relation revoked → ``denied: permission_revoked``; the tool's scope withdrawn on the
   device by its grant options (a once-grant used, past ``until``: SPEC §5.2) →
   ``denied: scope_not_granted``; the tool's scope pending
   re-consent → ``denied: reauth_required`` (SPEC §9.3, that tool only); the tool's
   *declared* scope not granted, or the call claiming another scope → ``denied: scope_not_granted``;
4. ``arguments`` failing ``input_schema`` → ``error: TOOL_INVALID_ARGUMENTS`` with details;
   then outside the scope's narrowed grant of this tool → ``denied: scope_not_granted``
   with details;
5. the sensitivity policy → ``run`` (silent) or ``prompt``.

Validators are compiled once per (manifest hash, tool) with jsonschema-rs (offline: no
remote reference is ever fetched), whose patterns run in bounded work
(:mod:`hashee_sdk.core.bounded_regex`): a malicious agent's pattern cannot hang the device, and
arguments it cannot decide within the limit fail (``TOOL_INVALID_ARGUMENTS``) rather than
run. A manifest with more distinct patterns than a device should compile gets no validator
for its tools that have patterns (``TOOL_PLATFORM_ERROR``). Argument values never appear in
details (they are masked).

A tool's ``output_schema`` (SPEC §10.4) is compiled the same way (``CompiledTool.output``),
for the client to check a handler's result before answering and the agent SDK on receipt;
one that does not compile leaves its tool without a validator: it runs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field
from typing import Any

from hashee_sdk.core.bounded_regex import MAX_PATTERNS, bounded_validator, schema_patterns
from hashee_sdk.core.canonical import canonical_hash, pointer_token
from hashee_sdk.core.codes import DENIAL_REASON_ALIASES, DENIAL_REASONS, TOOL_ERROR_CODES
from hashee_sdk.core.manifest import with_defaults
from hashee_sdk.grants import ALWAYS, ScopeGrant, outside
from hashee_sdk.policy import PolicySubject, SensitivityPolicy

DENIED, ERROR, RUN, PROMPT = "denied", "error", "run", "prompt"
RESPONSE_STATUSES = ("ok", "error", "denied")
INVALID_ARGUMENTS = "TOOL_INVALID_ARGUMENTS"
MASK = "[value]"
MAX_DETAILS = 20
MAX_CACHED_MANIFESTS = 64
MAX_MANIFEST_PATTERNS = 128  # distinct patterns compiled per manifest: at most ~1.5 s, once
# Validation keywords → the registry's detail codes (hashee_sdk.core.codes.DETAIL_CODES).
_DETAIL_CODES = {
    "required": "REQUIRED", "additionalProperties": "UNKNOWN_FIELD", "unevaluatedProperties": "UNKNOWN_FIELD",
    "type": "INVALID_TYPE", "pattern": "PATTERN_MISMATCH", "maxLength": "TOO_LONG", "maxItems": "TOO_LONG",
    "maxProperties": "TOO_LONG", "minimum": "OUT_OF_RANGE", "maximum": "OUT_OF_RANGE",
    "exclusiveMinimum": "OUT_OF_RANGE", "exclusiveMaximum": "OUT_OF_RANGE",
}


@dataclass(frozen=True, slots=True)
class Decision:
    """``outcome`` is denied, error, run or prompt; ``reason`` a denial reason or tool code."""

    outcome: str
    reason: str | None = None
    details: tuple[dict[str, str], ...] = ()
    tool: CompiledTool | None = None


class ArgumentValidator:
    """A compiled ``input_schema`` (or ``output_schema``, rooted at ``/result``): ``is_valid``
    is the fast path, ``details`` explains."""

    def __init__(self, schema: Any, max_patterns: int = MAX_PATTERNS, root: str = "/arguments") -> None:
        self._impl: Any = bounded_validator(schema, linear=False, mask=MASK, max_patterns=max_patterns)
        self.is_valid: Callable[[Any], bool] = self._impl.is_valid
        self.root = root

    def details(self, instance: Any) -> tuple[dict[str, str], ...]:
        """SPEC §2 details, pointers rooted at ``/arguments`` (or ``/result``)."""
        errors = self._impl.iter_errors(instance)
        found = [_detail(error, self.root) for _, error in zip(range(MAX_DETAILS), errors, strict=False)]
        return tuple(sorted(found, key=lambda d: (d["path"], d["code"])))


def _detail(error: Any, root: str) -> dict[str, str]:
    path = list(getattr(error, "instance_path", None) or getattr(error, "absolute_path", None) or ())
    keyword = str(getattr(error, "validator", None) or (list(error.schema_path) or ["?"])[-1])
    missing = _missing_property(error, keyword)
    if missing is not None:
        path.append(missing)
    pointer = root + "".join(f"/{pointer_token(str(token))}" for token in path)
    return {"path": pointer, "code": _DETAIL_CODES.get(keyword, "INVALID_VALUE"), "message": error.message}


def _missing_property(error: Any, keyword: str) -> str | None:
    # REQUIRED points at the missing member, as manifest validation does.
    if keyword != "required":
        return None
    name = getattr(getattr(error, "kind", None), "property", None)
    if name is None and isinstance(getattr(error, "message", None), str):
        name = error.message.split("'")[1] if error.message.count("'") >= 2 else None
    return str(name) if name is not None else None


@dataclass(frozen=True, slots=True)
class CompiledTool:
    name: str
    scope: str
    sensitivity: str
    timeout_ms: int
    validator: ArgumentValidator | None  # None: the schema did not compile (deny by default)
    description: str = ""  # the manifest's description_fallback, for the prompt
    output: ArgumentValidator | None = None  # the compiled output_schema; None: none declared


@dataclass(frozen=True)
class CompiledManifest:
    """A manifest (defaults applied) with a compiled validator per tool."""

    hash: str
    tools: dict[str, CompiledTool] = field(default_factory=dict)


_MANIFESTS: dict[str, CompiledManifest] = {}
_VALIDATORS: dict[tuple[str, str, str], ArgumentValidator | None] = {}  # (hash, tool, member)


def compile_manifest(manifest: Mapping[str, Any]) -> CompiledManifest:
    """Compile (or fetch from the cache) the tools of a manifest, keyed by its hash."""
    digest = canonical_hash(manifest)
    cached = _MANIFESTS.get(digest)
    if cached is not None:
        return cached
    filled = with_defaults(manifest)
    levels = {s.get("id"): s.get("sensitivity") for s in filled.get("permission_scopes", []) if isinstance(s, dict)}
    declared = [t for t in filled.get("tools", []) if isinstance(t, dict) and isinstance(t.get("name"), str)]
    schemas = [t.get(member) for t in declared for member in ("input_schema", "output_schema")]
    too_many = len(schema_patterns(schemas)) > MAX_MANIFEST_PATTERNS
    tools = {t["name"]: _compile_tool(digest, t, levels, 0 if too_many else MAX_PATTERNS) for t in declared}
    compiled = CompiledManifest(digest, tools)
    if len(_MANIFESTS) >= MAX_CACHED_MANIFESTS:
        _MANIFESTS.clear()
        _VALIDATORS.clear()
    _MANIFESTS[digest] = compiled
    return compiled


def _compile_tool(digest: str, tool: dict[str, Any], levels: Mapping[Any, Any], max_patterns: int) -> CompiledTool:
    scope = str(tool.get("permission_scope", ""))
    sensitivity = levels.get(scope)
    validator = _validator(digest, tool, "input_schema", max_patterns)
    output = _validator(digest, tool, "output_schema", max_patterns) if "output_schema" in tool else None
    if "output_schema" in tool and output is None:
        validator = None  # a result that cannot be checked is never produced: the tool runs nothing
    return CompiledTool(name=tool["name"], scope=scope,
                        sensitivity=sensitivity if sensitivity in ("low", "medium") else "high",
                        timeout_ms=int(tool.get("timeout_ms", 10000)), validator=validator,
                        description=str(tool.get("description_fallback") or ""), output=output)


def _validator(digest: str, tool: dict[str, Any], member: str, max_patterns: int) -> ArgumentValidator | None:
    key = (digest, tool["name"], member)
    if key not in _VALIDATORS:
        root = "/result" if member == "output_schema" else "/arguments"
        try:
            _VALIDATORS[key] = ArgumentValidator(tool.get(member), max_patterns, root)
        except Exception:  # a schema that does not compile validates nothing
            _VALIDATORS[key] = None
    return _VALIDATORS[key]


DENY_GROUP = Decision(DENIED, "tool_not_supported_in_group")
DENY_UNDECLARED = Decision(DENIED, "tool_not_declared")
DENY_REVOKED = Decision(DENIED, "permission_revoked")
DENY_SCOPE = Decision(DENIED, "scope_not_granted")
DENY_REAUTH = Decision(DENIED, "reauth_required")
DENY_CONSENT = Decision(DENIED, "consent_unverified")


def decide(call: Mapping[str, Any], *, manifest: CompiledManifest, granted: Set[str], in_group: bool,
           policy: SensitivityPolicy, subject: PolicySubject, now: float, revoked: bool = False,
           pending: Set[str] = frozenset(), unconfirmed: Set[str] = frozenset(),
           unbacked: Set[str] = frozenset(), consent_revoked: bool = False,
           grants: Mapping[str, ScopeGrant] | None = None, spent: Set[str] = frozenset()) -> Decision:
    """Steps 1-5 of SPEC §6 for one tool call; pure and side-effect free. A scope in
    ``unconfirmed`` (granted by the server's word only) is prompted whatever its level; a
    scope in ``unbacked`` (the newest verified consent statement does not give it), or any
    tool of a relation the device knows revoked (``consent_revoked``) while the server says
    it is live, is ``consent_unverified`` (SPEC §9.6). ``grants``: how each scope is
    granted (:mod:`hashee_sdk.grants`; missing: always); a scope in ``spent`` (its
    once-grant used) or past its ``until`` is ``scope_not_granted`` whatever the server
    says, and arguments outside a narrowed grant are ``scope_not_granted`` with details."""
    if in_group:
        return DENY_GROUP
    name = call.get("tool_name")
    tool = manifest.tools.get(name) if isinstance(name, str) else None
    if tool is None:
        return DENY_UNDECLARED
    if revoked:
        return DENY_REVOKED
    if consent_revoked:
        return DENY_CONSENT
    grant = (grants or {}).get(tool.scope, ALWAYS)
    if tool.scope in spent or grant.expired(now):
        return DENY_SCOPE
    if tool.scope in unbacked:
        return DENY_CONSENT
    if tool.scope in pending:
        return DENY_REAUTH
    if tool.scope not in granted or call.get("permission_scope") != tool.scope:
        return DENY_SCOPE
    if tool.validator is None:
        return Decision(ERROR, "TOOL_PLATFORM_ERROR", (), tool)
    arguments = call.get("arguments")
    if not tool.validator.is_valid(arguments):
        return Decision(ERROR, INVALID_ARGUMENTS, tool.validator.details(arguments), tool)
    narrowed = outside(grant, tool.name, arguments)
    if narrowed is not None:
        return Decision(DENIED, DENY_SCOPE.reason, narrowed, tool)
    if tool.scope not in unconfirmed and policy.is_silent(subject, tool.scope, tool.sensitivity, now):
        return Decision(RUN, None, (), tool)
    return Decision(PROMPT, None, (), tool)


# --- tool_response artifacts -------------------------------------------------------


def response_ok(call_id: str, result: Any) -> dict[str, Any]:
    return {"subtype": "tool_response", "call_id": call_id, "status": "ok", "result": result}


def response_denied(call_id: str, reason: str, details: tuple[dict[str, str], ...] = ()) -> dict[str, Any]:
    assert reason in DENIAL_REASONS, reason
    response: dict[str, Any] = {"subtype": "tool_response", "call_id": call_id, "status": "denied", "reason": reason}
    if details:
        response["details"] = list(details)
    return response


def response_error(call_id: str, code: str, details: tuple[dict[str, str], ...] = ()) -> dict[str, Any]:
    assert code in TOOL_ERROR_CODES, code
    response: dict[str, Any] = {"subtype": "tool_response", "call_id": call_id, "status": "error", "reason": code}
    if details:
        response["details"] = list(details)
    return response


def normalize_reason(reason: Any) -> str | None:
    """A denial reason or tool code as received; ``user_rejected`` reads ``user_refused``."""
    if not isinstance(reason, str):
        return None
    return DENIAL_REASON_ALIASES.get(reason, reason)
