// The cross-check with the Python SDK: each side verifies and opens what the other made
// with the vector keys. Skipped when no Python with hashee_sdk is at hand.
import { test } from "node:test";
import assert from "node:assert/strict";
import { signConsent, statementBytes, verifyConsent } from "./consentStatements.js";
import { hex } from "./encoding.js";
import { openCopy, Recipient, seal } from "./envelope.js";
import {
  API_ERRORS, DENIAL_REASON_ALIASES, DENIAL_REASONS, DETAIL_CODES, REFUSAL_REASONS, TOOL_ERROR_CODES,
} from "./errors.js";
import { generatePrivateJwk, signManifest, verifyManifest } from "./jose.js";
import { approveDevice, runtimeKeyVouched, signRuntimeKey } from "./statements.js";
import { AGENT_TO_USER } from "./wire.js";
import { pythonPath, runInterop } from "./testing/python.js";
import { keyPairOf, loadVectors } from "./testing/vectors.js";

const python = pythonPath();
const vectors = loadVectors();
const agent = keyPairOf(vectors.keys.agent_runtime);
const laptop = keyPairOf(vectors.keys.bob_laptop);
const phone = keyPairOf(vectors.keys.bob_phone);
const RELATION = vectors.tool_call.relation_id;
const ARTIFACT = { subtype: "tool_call", call_id: "call_ts", arguments: { path: "é/🙂" }, n: 1.5 };

test("the Python SDK and this one open and verify what the other made", { skip: python === undefined && "no Python with hashee_sdk" }, () => {
  const identity = generatePrivateJwk();
  const mine = {
    envelope: seal(ARTIFACT, {
      sender: agent, recipients: [Recipient.of(laptop.public)], relationId: RELATION, direction: AGENT_TO_USER, nowMs: Date.now(),
    }),
    consent: signConsent(laptop, {
      agentId: "a-1", userId: "u-1", grantedScopes: ["location:read", "filesystem:read"], acknowledgedManifestVersion: 3,
      acknowledgedManifestHash: "ab".repeat(32), seq: 7, ts: 1795481450000, grantOptions: { note: "ünï" },
    }),
    identity: { kty: identity.kty, crv: identity.crv, x: identity.x },
    manifest_signature: signManifest(vectors.manifest_signature.manifest, identity),
    runtime_key_signature: signRuntimeKey(identity, { agentId: "a-1", keyId: agent.keyId }),
    device_approval: approveDevice(laptop, { deviceId: "tablet", keyId: agent.keyId }),
    public_keys: { key_id: phone.keyId, ...phone.public.asApi() },
  };
  const { made, verdicts } = runInterop(python as string, mine);

  assert.deepEqual(verdicts.envelope, { ok: ARTIFACT });
  assert.deepEqual(verdicts.consent, { ok: mine.consent.statement });
  assert.deepEqual(verdicts.consent_bytes, { ok: hex(statementBytes(mine.consent.statement)) });
  assert.deepEqual(verdicts.manifest_signature, { ok: true });
  assert.deepEqual(verdicts.runtime_key, { ok: true });
  assert.deepEqual(verdicts.device_approval, { ok: true });
  assert.deepEqual(verdicts.public_keys, { ok: phone.keyId });

  for (const device of [laptop, phone]) {
    const opened = openCopy(made.envelope, {
      recipientKeyId: device.keyId, recipientX25519: device.boxKey, senders: new Map([[agent.keyId, agent.public]]),
      relationId: RELATION, direction: AGENT_TO_USER,
    });
    assert.deepEqual(opened.artifact, made.artifact);
  }
  assert.deepEqual(verifyConsent(made.consent, new Map([[laptop.keyId, laptop.public]])), made.consent.statement);
  verifyManifest(vectors.manifest_signature.manifest, made.manifest_signature, made.identity);
  assert.ok(runtimeKeyVouched(made.runtime_key_signature, made.identity, { agentId: "a-1", keyId: agent.keyId }));

  const registry = made.registry;
  assert.deepEqual(Object.fromEntries(Object.entries(API_ERRORS).map(([code, info]) => [code, info.httpStatus])), registry.api_errors);
  assert.deepEqual(Object.keys(DETAIL_CODES).sort(), registry.detail_codes);
  assert.deepEqual([...TOOL_ERROR_CODES], registry.tool_error_codes);
  assert.deepEqual([...DENIAL_REASONS], registry.denial_reasons);
  assert.deepEqual([...REFUSAL_REASONS], registry.refusal_reasons);
  assert.deepEqual(DENIAL_REASON_ALIASES, registry.denial_reason_aliases);
});
