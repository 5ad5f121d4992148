import { test } from "node:test";
import assert from "node:assert/strict";
import { checkShape, signConsent, statementBytes, verifyConsent, type ConsentStatement } from "./consentStatements.js";
import { b64decode, b64encode, fromUtf8 } from "./encoding.js";
import { ConsentInvalid } from "./errors.js";
import { keyPairOf, loadVectors } from "./testing/vectors.js";

const vectors = loadVectors();
const laptop = keyPairOf(vectors.keys.bob_laptop);
const phone = keyPairOf(vectors.keys.bob_phone);
const trusted = new Map([[laptop.keyId, laptop.public]]);
const FIELDS = {
  agentId: "7d1f4f0e-2222-4a4a-9b9b-000000000002", userId: "42", grantedScopes: ["notification:send", "filesystem:read", "filesystem:read"],
  acknowledgedManifestVersion: 3, acknowledgedManifestHash: "0".repeat(64), seq: 1, ts: 1795481450000,
};

test("a statement signed on a trusted device verifies, scopes sorted and unique", () => {
  const signed = signConsent(laptop, FIELDS);
  assert.deepEqual(signed.statement.granted_scopes, ["filesystem:read", "notification:send"]);
  assert.deepEqual(verifyConsent(signed, trusted), signed.statement);
  const text = fromUtf8(statementBytes(signed.statement));
  assert.ok(text.startsWith('hashee-consent-v1\n{"acknowledged_manifest_hash":"'), text);
});

test("a statement signed by a device the user has not approved, or tampered with, is refused", () => {
  assert.throws(() => verifyConsent(signConsent(phone, FIELDS), trusted), /not signed by a trusted device/);
  const signed = signConsent(laptop, FIELDS);
  const widened = { ...signed, statement: { ...signed.statement, granted_scopes: ["clipboard:read", "filesystem:read", "notification:send"] } };
  assert.throws(() => verifyConsent(widened, trusted), /does not verify/);
  const flipped = b64decode(signed.signature);
  flipped[0] = (flipped[0] ?? 0) ^ 1;
  assert.throws(() => verifyConsent({ ...signed, signature: b64encode(flipped) }, trusted), /does not verify/);
  assert.throws(() => verifyConsent({ ...signed, signature: signed.signature.slice(4) }, trusted), /does not verify/);
  assert.throws(() => verifyConsent({ ...signed, extra: 1 }, trusted), ConsentInvalid);
  // a statement claiming the laptop's key id, signed by the phone
  const forged = { statement: { ...signed.statement }, signature: b64encode(phone.sign(statementBytes(signed.statement))) };
  assert.throws(() => verifyConsent(forged, trusted), /does not verify/);
});

test("the shape is strict, naming the first field that is wrong", () => {
  const good = signConsent(laptop, FIELDS).statement;
  const cases: [string, Partial<Record<keyof ConsentStatement, unknown>>][] = [
    ["granted_scopes", { granted_scopes: ["b", "a"] }],
    ["granted_scopes", { granted_scopes: ["a", "a"] }],
    ["granted_scopes", { granted_scopes: [""] }],
    ["acknowledged_manifest_version", { acknowledged_manifest_version: 0 }],
    ["acknowledged_manifest_version", { acknowledged_manifest_version: 1.5 }],
    ["acknowledged_manifest_hash", { acknowledged_manifest_hash: "A".repeat(64) }],
    ["revoked", { revoked: "false" }],
    ["seq", { seq: 2 ** 53 }],
    ["ts", { ts: -1 }],
    ["device_key_id", { device_key_id: "r_" + "0".repeat(32) }],
    ["grant_options", { grant_options: [] }],
    ["agent_id", { agent_id: "" }],
  ];
  for (const [field, change] of cases) {
    assert.throws(() => checkShape({ ...good, ...change }), new RegExp(`'s ${field} is not valid`), JSON.stringify(change));
  }
  assert.throws(() => checkShape({ ...good, extra: 1 }), /exactly the fields/);
  const { seq: _seq, ...missing } = good;
  assert.throws(() => checkShape(missing), /exactly the fields/);
  assert.throws(() => checkShape({ ...good, revoked: true }), /a revocation grants no scope/);
  assert.doesNotThrow(() => checkShape({ ...good, revoked: true, granted_scopes: [] }));
});

test("scopes are ordered by code point, as Python's sorted() orders them", () => {
  // U+FF21 sorts before U+1F600 by code point, after it by UTF-16 unit
  const signed = signConsent(laptop, { ...FIELDS, grantedScopes: ["\u{1F600}", "\uFF21"] });
  assert.deepEqual(signed.statement.granted_scopes, ["\uFF21", "\u{1F600}"]);
  assert.deepEqual(verifyConsent(signed, trusted), signed.statement);
});

test("the consent statement vector of docs/wire-vectors.json: its bytes and signature, byte for byte", () => {
  const vector = vectors.consent_statement;
  assert.equal(b64encode(statementBytes(vector.statement)), vector.signed_bytes);
  assert.deepEqual(verifyConsent({ statement: vector.statement, signature: vector.signature }, trusted), vector.statement);
  const tampered = { ...vector.statement, seq: vector.statement.seq + 1 };
  assert.throws(() => verifyConsent({ statement: tampered, signature: vector.signature }, trusted), ConsentInvalid);
  const byPhone = new Map([[laptop.keyId, phone.public]]);
  assert.throws(() => verifyConsent({ statement: vector.statement, signature: vector.signature }, byPhone), ConsentInvalid);
});
