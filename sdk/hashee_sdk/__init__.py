"""The Hashee tool-call SDK: pure Python (no Django), for user clients and agent runtimes.

Every tool_call and tool_response travels in a version 2 envelope (docs/wire-spec.md):
signed (Ed25519) and encrypted from a fresh X25519 key per copy, one copy per trusted
device of the user; the response is sealed to a reply key that lives for one call. The
server only routes, stores and rate-limits opaque envelopes, and the SDK believes nothing
it says without checking (SPEC §9): pinned keys, verified manifest hashes, consent bound
to the acknowledged version, expiry and a persistent replay record.

User client (docs/wire-spec.md §4: envelope → expiry → replay → manifest → SPEC §6 group →
declared → pending re-consent → granted → arguments → policy → prompt → handler → audit)::

    keys = KeyPair.generate()                      # persist keys.secret() locally
    client = UserClient(transport=HttpxTransport(url, "hsk_…"), keys=keys, device_id="laptop",
                        prompt=ask_on_terminal, handlers={"read_file": read_file},
                        audit=AuditLog("audit.sqlite3"))   # also holds the replay record and pins
    await client.register_device()                 # POST /keys/devices
    await client.listen(url, "hsk_…")              # /ws/events, resumed; or await client.poll(since)

Agent runtime::

    agent = AgentRuntime(transport=HttpxTransport(url, "hak_…"), agent_id=AGENT_ID,
                         keys=KeyPair.generate(), manifest=MANIFEST,   # the published manifest
                         store=LocalStore("runtime.sqlite3"))  # pins and tombstones (default: $HASHEE_STATE_DIR)
    await agent.register_key()                     # POST /agents/{id}/keys
    listener = asyncio.create_task(agent.listen(url, "hak_…"))   # /ws/agent
    result = await agent.call_tool(relation_id, "read_file", {"path": "notes.txt"})
    text = result.unwrap()                         # ToolCallFailed if denied or error

The ``async with`` forms, with tools declared from type hints and keys kept on disk::

    @tool(scope="notes:read", sensitivity="low")
    def read_note(title: str) -> str: ...          # input_schema from the hints (pydantic)
    manifest = manifest_from_tools([read_note], agent_version="1.0.0")   # what the owner publishes

    async with Device(url, "hsk_…", tools=[read_note], keystore=KeyStore("~/.hashee/device"),
                      prompt=ask, on_notice=tell) as device:
        await device.grant(agent_id, ["notes:read"], grant_options={"notes:read": {"once": True}})
        for unused in await device.unused_grants():   # high grants unused for 90 days
            await device.withdraw(unused.relation_id, unused.scope)   # if the user agrees
        await device.serve_forever()
    async with Agent(url, "hak_…", agent_id=AGENT_ID, keystore=KeyStore("~/.hashee/agent")) as agent:
        result = await agent.call_tool(relation_id, "read_note", {"title": "groceries"})  # NotListening if offline

A tool runtime that must not hold the agent key uses short-lived ``hat_`` tokens (SPEC
§10.3), renewed at 80 % of their lifetime and when refused, for REST and the socket::

    await publish_runtime_key(url, "hak_…", agent_id=AGENT_ID, keystore=store)   # once, with the key
    tokens = TokenSource.exchanging(url, "hak_…")     # POST /oauth/token; or TokenSource(ask_parent)
    async with Agent(url, tokens, agent_id=AGENT_ID, keystore=store) as agent: ...

Errors: RateLimited (429, ``retry_after``), ToolCallTimeout, ArgumentsInvalid,
ToolNotDeclared, ManifestNotPublished, NoRecipientKey (AmbiguousRoot), ResultInvalid (a result that breaks
the tool's output_schema), TokenExchangeRefused (a revoked key ends renewal), ApiError, and the EnvelopeError family for refused envelopes.
"""

from __future__ import annotations

from hashee_sdk._version import __version__
from hashee_sdk.agent import AgentRuntime, ToolResult
from hashee_sdk.audit import AuditEntry, AuditLog
from hashee_sdk.client import UserClient
from hashee_sdk.contract import CompiledManifest, Decision, compile_manifest, decide
from hashee_sdk.credentials import AccessToken, AgentKeyExchange, Credential, TokenSource
from hashee_sdk.crypto import KeyPair, PublicKeys
from hashee_sdk.device_tools import desktop_tools
from hashee_sdk.envelope import OpenedCopy, Recipient, open_copy, seal
from hashee_sdk.errors import (
    AgentChanged,
    AmbiguousRoot,
    ApiError,
    ArgumentsInvalid,
    BadSignature,
    CallExpired,
    CallMalformed,
    CallReplayed,
    ConsentUnverified,
    DecryptionFailed,
    EnvelopeError,
    MalformedEnvelope,
    ManifestNotPublished,
    ManifestUnverified,
    NoRecipientKey,
    PlatformRefused,
    RateLimited,
    ResultInvalid,
    SafetyNumberMismatch,
    SdkError,
    TokenExchangeRefused,
    ToolCallFailed,
    ToolCallTimeout,
    ToolNotDeclared,
    UnknownSender,
    WebhookInvalid,
    WrongContext,
    WrongRecipient,
)
from hashee_sdk.grants import Notice, UnusedGrant
from hashee_sdk.keys import KeyDirectory, RelationKeys
from hashee_sdk.keystore import KeyStore, KeyStoreError
from hashee_sdk.owner import Owner
from hashee_sdk.policy import PolicySubject, SensitivityPolicy
from hashee_sdk.prompts import PromptRequest
from hashee_sdk.rest import HttpResponse, HttpxTransport, Transport
from hashee_sdk.runtime import Agent, Device, NotListening, publish_runtime_key
from hashee_sdk.store import LocalStore
from hashee_sdk.tools import ManifestInvalid, Tool, manifest_from_tools, tool
from hashee_sdk.trust import KeyPins, ManifestVerifier, VerifiedManifest
from hashee_sdk.views import RelationView

__all__ = [
    "AccessToken", "Agent", "AgentChanged", "AgentKeyExchange", "AgentRuntime", "AmbiguousRoot", "ApiError", "ArgumentsInvalid",
    "AuditEntry",
    "AuditLog", "BadSignature", "CallExpired", "CallMalformed", "CallReplayed", "CompiledManifest", "ConsentUnverified",
    "Credential",
    "Decision", "DecryptionFailed", "Device", "EnvelopeError", "HttpResponse", "HttpxTransport", "KeyDirectory",
    "KeyPair", "KeyPins", "KeyStore", "KeyStoreError", "LocalStore", "MalformedEnvelope", "ManifestInvalid",
    "ManifestNotPublished", "ManifestUnverified", "ManifestVerifier", "NoRecipientKey", "NotListening", "Notice",
    "OpenedCopy", "Owner", "PlatformRefused", "PolicySubject", "PromptRequest", "PublicKeys", "RateLimited", "Recipient",
    "RelationKeys", "RelationView", "ResultInvalid", "SafetyNumberMismatch", "SdkError", "SensitivityPolicy",
    "TokenExchangeRefused", "TokenSource", "Tool",
    "ToolCallFailed", "ToolCallTimeout", "ToolNotDeclared", "ToolResult", "Transport", "UnknownSender", "UnusedGrant",
    "UserClient", "VerifiedManifest", "WebhookInvalid", "WrongContext", "WrongRecipient", "__version__", "compile_manifest",
    "decide", "desktop_tools", "manifest_from_tools", "open_copy", "publish_runtime_key", "seal", "tool",
]
