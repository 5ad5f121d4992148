import { test } from "node:test";
import assert from "node:assert/strict";
import { canonicalize } from "./canonical.js";
import { b64decode, b64encode, b64url, b64urlDecode, equalBytes, utf8 } from "./encoding.js";
import { InvalidSignatureError, MalformedSignatureError } from "./errors.js";
import { generatePrivateJwk, jwkThumbprint, signManifest, verifyDetached, verifyManifest } from "./jose.js";
import {
  approveDevice, deviceApprovalBytes, deviceApprovalValid, fingerprint, runtimeKeyBytes, runtimeKeyVouched,
  safetyNumber, signRuntimeKey,
} from "./statements.js";
import { keyPairOf, loadVectors } from "./testing/vectors.js";

const vectors = loadVectors();

test("the device approval's bytes and signature are the vector's, byte for byte", () => {
  const { approver_key_id, device_id, key_id, signed_bytes, signature } = vectors.device_approval;
  const signed = deviceApprovalBytes({ approverKeyId: approver_key_id, deviceId: device_id, keyId: key_id });
  assert.equal(b64encode(signed), signed_bytes);
  const laptop = keyPairOf(vectors.keys.bob_laptop);
  assert.equal(approveDevice(laptop, { deviceId: device_id, keyId: key_id }), signature); // Ed25519 is deterministic
  assert.ok(deviceApprovalValid(signature, laptop.public, { deviceId: device_id, keyId: key_id }));
});

test("a device approval for another device, key or approver does not verify", () => {
  const { device_id, key_id, signature } = vectors.device_approval;
  const laptop = keyPairOf(vectors.keys.bob_laptop).public;
  const phone = keyPairOf(vectors.keys.bob_phone).public;
  assert.ok(!deviceApprovalValid(signature, laptop, { deviceId: "tablet", keyId: key_id }));
  assert.ok(!deviceApprovalValid(signature, laptop, { deviceId: device_id, keyId: laptop.keyId }));
  assert.ok(!deviceApprovalValid(signature, phone, { deviceId: device_id, keyId: key_id }));
  const flipped = b64decode(signature);
  flipped[10] = (flipped[10] ?? 0) ^ 1;
  assert.ok(!deviceApprovalValid(b64encode(flipped), laptop, { deviceId: device_id, keyId: key_id }));
  assert.ok(!deviceApprovalValid("not base64", laptop, { deviceId: device_id, keyId: key_id }));
});

test("the runtime-key statement is the vector's and the identity's JWS vouches for it", () => {
  const { agent_id, key_id, signed_bytes, identity_signature } = vectors.runtime_key;
  assert.equal(b64encode(runtimeKeyBytes({ agentId: agent_id, keyId: key_id })), signed_bytes);
  assert.ok(runtimeKeyVouched(identity_signature, vectors.identity.jwk, { agentId: agent_id, keyId: key_id }));
  assert.ok(!runtimeKeyVouched(identity_signature, vectors.identity.jwk, { agentId: agent_id, keyId: vectors.keys.bob_laptop.key_id }));
  assert.ok(!runtimeKeyVouched(identity_signature, vectors.identity.jwk, { agentId: "another", keyId: key_id }));
  assert.ok(!runtimeKeyVouched(null, vectors.identity.jwk, { agentId: agent_id, keyId: key_id }));
});

test("the manifest signature verifies over the manifest's RFC 8785 bytes with the identity", () => {
  const { manifest, signature } = vectors.manifest_signature;
  verifyManifest(manifest, signature, vectors.identity.jwk, vectors.identity.kid);
  const changed = { ...manifest, agent_version: "1.0.1" };
  assert.throws(() => verifyManifest(changed, signature, vectors.identity.jwk), InvalidSignatureError);
});

test("a JWS that is not exactly {alg, kid}, detached and EdDSA is refused", () => {
  const { manifest, signature } = vectors.manifest_signature;
  const [protectedPart, , sig] = signature.split(".");
  const payload = b64url(canonicalize(manifest));
  const header = (value: object) => b64url(utf8(JSON.stringify(value)));
  const cases: [string, string][] = [
    ["attached payload", `${protectedPart}.${payload}.${sig}`],
    ["b64 header", `${header({ alg: "EdDSA", kid: vectors.identity.kid, b64: false })}..${sig}`],
    ["another alg", `${header({ alg: "ES256", kid: vectors.identity.kid })}..${sig}`],
    ["another kid", `${header({ alg: "EdDSA", kid: "k1" })}..${sig}`],
    ["two parts", `${protectedPart}.${sig}`],
    ["a flipped signature byte", `${protectedPart}..${flip(sig ?? "")}`],
  ];
  for (const [label, jws] of cases) {
    assert.throws(() => verifyManifest(manifest, jws, vectors.identity.jwk), InvalidSignatureError, label);
  }
  assert.throws(() => verifyManifest(manifest, "a.b", vectors.identity.jwk), MalformedSignatureError);
});

test("a manifest and a runtime key signed here verify here (kid = the thumbprint)", () => {
  const identity = generatePrivateJwk();
  const publicJwk = { kty: identity.kty, crv: identity.crv, x: identity.x };
  const { manifest } = vectors.manifest_signature;
  verifyManifest(manifest, signManifest(manifest, identity), publicJwk);
  const fields = { agentId: "a1", keyId: vectors.keys.agent_runtime.key_id };
  assert.ok(runtimeKeyVouched(signRuntimeKey(identity, fields), publicJwk, fields));
  assert.throws(() => verifyDetached(signManifest(manifest, identity), canonicalize(manifest), vectors.identity.jwk),
    InvalidSignatureError);
  assert.equal(jwkThumbprint(identity), jwkThumbprint(publicJwk));
});

test("the fingerprints and the safety number are the vector's", () => {
  const v = vectors.safety_number;
  const agentIdentity = b64urlDecode(v.agent_identity_x_b64url);
  const userRootDevice = b64decode(v.user_root_device_ed25519);
  assert.equal(fingerprint(agentIdentity, `agent:${v.agent_id}`), v.agent_fingerprint);
  assert.equal(fingerprint(userRootDevice, "user"), v.user_fingerprint);
  assert.equal(safetyNumber({ agentId: v.agent_id, agentIdentity, userRootDevice }), v.safety_number);
  assert.ok(equalBytes(userRootDevice, b64decode(vectors.keys.bob_laptop.ed25519_public)));
});

function flip(b64urlText: string): string {
  const raw = b64urlDecode(b64urlText);
  raw[0] = (raw[0] ?? 0) ^ 1;
  return b64url(raw);
}
