// An independent implementation of docs/wire-spec.md: it verifies and opens every vector
// of docs/wire-vectors.json with tweetnacl, canonicalize (RFC 8785) and node:crypto only,
// and prints one line per check. Exit status 0 only if every check passes.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import canonicalize from "canonicalize";
import nacl from "tweetnacl";

const vectors = JSON.parse(readFileSync(process.argv[2], "utf8"));
const b64 = (text) => new Uint8Array(Buffer.from(text, "base64"));
const b64url = (bytes) => Buffer.from(bytes).toString("base64url");
const utf8 = (text) => new TextEncoder().encode(text);
const concat = (...parts) => new Uint8Array(Buffer.concat(parts.map((p) => Buffer.from(p))));
const sha = (name, ...parts) => new Uint8Array(createHash(name).update(concat(...parts)).digest());
const equalBytes = (a, b) => Buffer.from(a).equals(Buffer.from(b));
let failures = 0;

function check(name, ok) {
  console.log(`${ok ? "ok" : "FAIL"} ${name}`);
  if (!ok) failures += 1;
}

function keyId(key) {
  return "k_" + Buffer.from(sha("sha256", utf8("hashee-key-v1"), b64(key.x25519_public), b64(key.ed25519_public)).slice(0, 16)).toString("hex");
}

function fingerprint(publicKey, stableId) {
  let digest = sha("sha512", new Uint8Array([0, 0]), publicKey, utf8(stableId));
  for (let i = 0; i < 5200; i += 1) digest = sha("sha512", digest, publicKey);
  let digits = "";
  for (let i = 0; i < 30; i += 5) {
    digits += (Buffer.from(digest.slice(i, i + 5)).readUIntBE(0, 5) % 100000).toString().padStart(5, "0");
  }
  return digits;
}

function openEnvelope(name, vector, recipientKeyId, recipientSecret, senderEd25519) {
  const envelope = vector.envelope;
  const copy = envelope.copies.find((c) => c.recipient_key_id === recipientKeyId);
  check(`${name}: a copy is addressed to ${recipientKeyId}`, copy !== undefined);
  if (copy === undefined) return;
  const plain = nacl.box.open(b64(copy.ciphertext), b64(copy.nonce), b64(copy.ephemeral_public), recipientSecret);
  check(`${name}: decrypts`, plain !== null);
  if (plain === null) return;
  const signature = plain.slice(0, 64);
  const signed = plain.slice(64);
  check(`${name}: signature verifies`, nacl.sign.detached.verify(signed, signature, senderEd25519));
  check(`${name}: signed bytes as the vector`, equalBytes(signed, b64(vector.signed_bytes)));
  const prefix = utf8("hashee-envelope-v2\n");
  check(`${name}: domain prefix`, equalBytes(signed.slice(0, prefix.length), prefix));
  const text = new TextDecoder().decode(signed.slice(prefix.length));
  const body = JSON.parse(text);
  check(`${name}: the body is canonical`, canonicalize(body) === text);
  check(`${name}: context`, body.v === 2 && body.relation_id === vector.relation_id && body.direction === vector.direction
    && body.sender_key_id === envelope.sender_key_id && body.recipient_key_id === recipientKeyId
    && body.ephemeral_public === copy.ephemeral_public);
  check(`${name}: artifact`, canonicalize(body.artifact) === canonicalize(vector.artifact));
}

for (const [label, key] of Object.entries(vectors.keys)) {
  check(`key_id of ${label}`, keyId(key) === key.key_id);
  check(`x25519 public of ${label}`, equalBytes(nacl.box.keyPair.fromSecretKey(b64(key.x25519_private)).publicKey, b64(key.x25519_public)));
  check(`ed25519 public of ${label}`, equalBytes(nacl.sign.keyPair.fromSeed(b64(key.ed25519_seed)).publicKey, b64(key.ed25519_public)));
}

const jwk = vectors.identity.jwk;
check("identity kid (RFC 7638)", b64url(sha("sha256", utf8(canonicalize({ crv: jwk.crv, kty: jwk.kty, x: jwk.x })))) === vectors.identity.kid);

const reply = vectors.reply_key;
check("reply key id", "r_" + Buffer.from(sha("sha256", utf8("hashee-reply-key-v1"), b64(reply.x25519_public)).slice(0, 16)).toString("hex") === reply.reply_key_id);

const approval = vectors.device_approval;
const approvalBytes = concat(utf8("hashee-device-approval-v1\n"), utf8(canonicalize({
  approver_key_id: approval.approver_key_id, device_id: approval.device_id, key_id: approval.key_id })));
check("device approval bytes", equalBytes(approvalBytes, b64(approval.signed_bytes)));
check("device approval signature", nacl.sign.detached.verify(approvalBytes, b64(approval.signature), b64(vectors.keys.bob_laptop.ed25519_public)));

const runtime = vectors.runtime_key;
check("runtime key bytes", equalBytes(concat(utf8("hashee-agent-runtime-key-v1\n"),
  utf8(canonicalize({ agent_id: runtime.agent_id, key_id: runtime.key_id }))), b64(runtime.signed_bytes)));

// A detached JWS (RFC 7515 Appendix F): the signing input is <protected>.<base64url(payload)>.
function verifyDetachedJws(jws, payload, x, kid) {
  const [protectedPart, middle, signature] = jws.split(".");
  const header = JSON.parse(Buffer.from(protectedPart, "base64url").toString("utf8"));
  const input = utf8(`${protectedPart}.${b64url(payload)}`);
  return middle === "" && header.alg === "EdDSA" && header.kid === kid && !("b64" in header)
    && nacl.sign.detached.verify(input, new Uint8Array(Buffer.from(signature, "base64url")),
      new Uint8Array(Buffer.from(x, "base64url")));
}

check("runtime key vouched for by the identity", verifyDetachedJws(runtime.identity_signature,
  b64(runtime.signed_bytes), jwk.x, vectors.identity.kid));
const signed = vectors.manifest_signature;
check("manifest signature over its RFC 8785 bytes", verifyDetachedJws(signed.signature,
  utf8(canonicalize(signed.manifest)), jwk.x, vectors.identity.kid));

// A consent statement (SPEC §9.6): exactly its ten fields, scopes sorted and unique, signed
// by the device it names over the prefix and its RFC 8785 bytes.
const consent = vectors.consent_statement;
const consentFields = ["agent_id", "user_id", "granted_scopes", "grant_options", "acknowledged_manifest_version",
  "acknowledged_manifest_hash", "revoked", "seq", "ts", "device_key_id"];
const statement = consent.statement;
const consentBytes = concat(utf8("hashee-consent-v1\n"), utf8(canonicalize(statement)));
const scopes = statement.granted_scopes;
check("consent statement fields", canonicalize(Object.keys(statement).sort()) === canonicalize([...consentFields].sort()));
check("consent statement scopes sorted and unique", scopes.every((s, i) => i === 0 || scopes[i - 1] < s));
check("consent statement typed", typeof statement.revoked === "boolean" && Number.isSafeInteger(statement.seq)
  && statement.seq >= 1 && Number.isSafeInteger(statement.ts) && /^[0-9a-f]{64}$/.test(statement.acknowledged_manifest_hash)
  && !(statement.revoked && scopes.length > 0));
check("consent statement bytes", equalBytes(consentBytes, b64(consent.signed_bytes)));
check("consent statement names its device", statement.device_key_id === keyId(vectors.keys[consent.device]));
check("consent statement signature", nacl.sign.detached.verify(consentBytes, b64(consent.signature),
  b64(vectors.keys[consent.device].ed25519_public)));

const laptop = vectors.keys.bob_laptop;
openEnvelope("tool_call", vectors.tool_call, laptop.key_id, b64(laptop.x25519_private), b64(vectors.keys.agent_runtime.ed25519_public));
openEnvelope("tool_response", vectors.tool_response, reply.reply_key_id, b64(reply.x25519_private), b64(laptop.ed25519_public));

const safety = vectors.safety_number;
const agentHalf = fingerprint(new Uint8Array(Buffer.from(safety.agent_identity_x_b64url, "base64url")), `agent:${safety.agent_id}`);
const userHalf = fingerprint(b64(safety.user_root_device_ed25519), "user");
check("agent fingerprint", agentHalf === safety.agent_fingerprint);
check("user fingerprint", userHalf === safety.user_fingerprint);
const digits = [agentHalf, userHalf].sort().join("");
check("safety number", digits.match(/.{5}/g).join(" ") === safety.safety_number);

console.log(failures === 0 ? "all vectors verified" : `${failures} checks failed`);
process.exit(failures === 0 ? 0 : 1);
