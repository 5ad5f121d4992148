"""The Hashee tool-call SDK: pure Python (no Django), for user clients and agent runtimes.

Every tool_call and tool_response is signed (Ed25519) and encrypted (NaCl Box, X25519)
end to end; the server only routes, stores and rate-limits opaque envelopes.

User client (SPEC §6: group → declared → granted → arguments → policy → prompt →
handler → audit)::

    keys = KeyPair.generate()                      # persist keys.secret() locally
    client = UserClient(transport=HttpxTransport(url, "hsk_…"), keys=keys, device_id="laptop",
                        prompt=ask_on_terminal, handlers={"read_file": read_file},
                        audit=AuditLog("audit.sqlite3"))
    await client.register_device()                 # POST /keys/devices
    await client.listen(url, "hsk_…")              # /ws/events; or await client.poll(since)

Agent runtime::

    agent = AgentRuntime(transport=HttpxTransport(url, "hak_…"), agent_id=AGENT_ID,
                         keys=KeyPair.generate(), manifest=MANIFEST)
    await agent.register_key()                     # POST /agents/{id}/keys
    listener = asyncio.create_task(agent.listen(url, "hak_…"))   # /ws/agent
    result = await agent.call_tool(relation_id, "read_file", {"path": "notes.txt"})
    text = result.unwrap()                         # ToolCallFailed if denied or error

Errors: RateLimited (429, ``retry_after``), ToolCallTimeout, ArgumentsInvalid,
ToolNotDeclared, ApiError, and the EnvelopeError family for refused envelopes.
"""

from __future__ import annotations

from toolcalls.sdk.agent import AgentRuntime, ToolResult
from toolcalls.sdk.audit import AuditEntry, AuditLog
from toolcalls.sdk.client import PromptRequest, RelationView, UserClient
from toolcalls.sdk.contract import CompiledManifest, Decision, compile_manifest, decide
from toolcalls.sdk.crypto import KeyPair, Opened, PublicKeys, open_, seal
from toolcalls.sdk.errors import (
    ApiError,
    ArgumentsInvalid,
    BadSignature,
    DecryptionFailed,
    EnvelopeError,
    MalformedEnvelope,
    NoRecipientKey,
    RateLimited,
    SdkError,
    StaleMessage,
    ToolCallFailed,
    ToolCallTimeout,
    ToolNotDeclared,
    UnknownSender,
    WebhookInvalid,
    WrongContext,
    WrongRecipient,
)
from toolcalls.sdk.keys import KeyDirectory, RelationKeys
from toolcalls.sdk.policy import PolicySubject, SensitivityPolicy
from toolcalls.sdk.rest import HttpResponse, HttpxTransport, Transport

__all__ = [
    "AgentRuntime", "ApiError", "ArgumentsInvalid", "AuditEntry", "AuditLog", "BadSignature",
    "CompiledManifest", "Decision", "DecryptionFailed", "EnvelopeError", "HttpResponse", "HttpxTransport",
    "KeyDirectory", "KeyPair", "MalformedEnvelope", "NoRecipientKey", "Opened", "PolicySubject", "PromptRequest",
    "PublicKeys", "RateLimited", "RelationKeys", "RelationView", "SdkError", "SensitivityPolicy", "StaleMessage",
    "ToolCallFailed", "ToolCallTimeout", "ToolNotDeclared", "ToolResult", "Transport", "UnknownSender",
    "UserClient", "WebhookInvalid", "WrongContext", "WrongRecipient", "compile_manifest", "decide", "open_",
    "seal",
]
