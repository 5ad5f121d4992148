import { test } from "node:test";
import assert from "node:assert/strict";
import nacl from "tweetnacl";
import { x25519 } from "@noble/curves/ed25519";
import { canonicalText } from "./canonical.js";
import { KeyPair, PublicKeys } from "./crypto.js";
import { b64decode, b64encode, concatBytes, utf8 } from "./encoding.js";
import { openCopy, Recipient, seal, signedBytes, type Envelope, type OpenOptions } from "./envelope.js";
import {
  BadSignature, DecryptionFailed, MalformedEnvelope, UnknownSender, WrongContext, WrongRecipient,
} from "./errors.js";
import { AGENT_TO_USER, USER_TO_AGENT } from "./wire.js";
import { keyPairOf, loadVectors, type EnvelopeVector } from "./testing/vectors.js";

const vectors = loadVectors();
const agent = keyPairOf(vectors.keys.agent_runtime);
const laptop = keyPairOf(vectors.keys.bob_laptop);
const phone = keyPairOf(vectors.keys.bob_phone);
const replyPrivate = b64decode(vectors.reply_key.x25519_private);
const RELATION = vectors.tool_call.relation_id;

function trusted(...pairs: KeyPair[]): Map<string, PublicKeys> {
  return new Map(pairs.map((pair) => [pair.keyId, pair.public]));
}

function openToolCall(envelope: unknown, overrides: Partial<OpenOptions> = {}) {
  return openCopy(envelope, {
    recipientKeyId: laptop.keyId, recipientX25519: laptop.boxKey, senders: trusted(agent),
    relationId: RELATION, direction: AGENT_TO_USER, ...overrides,
  });
}

/** The bytes the vector says were signed, rebuilt from what was opened: equal only if the
 * envelope's body, as the SDK verified it, is the vector's byte for byte. */
function rebuiltSignedBytes(vector: EnvelopeVector, recipientKeyId: string, signedAtMs: number, artifact: object): string {
  const copy = vector.envelope.copies[0];
  return b64encode(signedBytes({
    v: 2, relation_id: vector.relation_id, direction: vector.direction, sender_key_id: vector.envelope.sender_key_id,
    recipient_key_id: recipientKeyId, ephemeral_public: copy?.ephemeral_public ?? "", ts: signedAtMs,
    artifact: artifact as never,
  }));
}

test("the tool_call vector opens on bob's laptop, byte for byte", () => {
  const opened = openToolCall(vectors.tool_call.envelope);
  assert.deepEqual(opened.artifact, vectors.tool_call.artifact);
  assert.equal(opened.senderKeyId, agent.keyId);
  assert.equal(rebuiltSignedBytes(vectors.tool_call, laptop.keyId, opened.signedAtMs, opened.artifact),
    vectors.tool_call.signed_bytes);
});

test("the tool_response vector opens with the reply key, byte for byte", () => {
  const vector = vectors.tool_response;
  const opened = openCopy(vector.envelope, {
    recipientKeyId: vectors.reply_key.reply_key_id, recipientX25519: replyPrivate, senders: trusted(laptop),
    relationId: vector.relation_id, direction: USER_TO_AGENT,
  });
  assert.deepEqual(opened.artifact, vector.artifact);
  assert.equal(rebuiltSignedBytes(vector, vectors.reply_key.reply_key_id, opened.signedAtMs, opened.artifact),
    vector.signed_bytes);
});

test("a copy for another device, from an untrusted sender, or for another context is refused", () => {
  const envelope = vectors.tool_call.envelope;
  assert.throws(() => openToolCall(envelope, { recipientKeyId: phone.keyId, recipientX25519: phone.boxKey }), WrongRecipient);
  assert.throws(() => openToolCall(envelope, { senders: trusted(phone) }), UnknownSender);
  assert.throws(() => openToolCall(envelope, { relationId: "7d1f4f0e-1111-4a4a-9b9b-000000000009" }), /relation_id/);
  assert.throws(() => openToolCall(envelope, { direction: USER_TO_AGENT }), WrongContext);
  // the right key id, the wrong private key: the box does not open
  assert.throws(() => openToolCall(envelope, { recipientX25519: phone.boxKey }), DecryptionFailed);
  // the server swaps the sender's key for another it also lists as trusted: the signature fails
  const lying = new Map([[agent.keyId, phone.public]]);
  assert.throws(() => openToolCall(envelope, { senders: lying }), BadSignature);
});

test("a flipped byte of the ciphertext, nonce or ephemeral key is refused", () => {
  for (const field of ["ciphertext", "nonce", "ephemeral_public"] as const) {
    const envelope = structuredClone(vectors.tool_call.envelope);
    const copy = envelope.copies[0]!;
    const raw = b64decode(copy[field]);
    raw[5] = (raw[5] ?? 0) ^ 0x40;
    copy[field] = b64encode(raw);
    assert.throws(() => openToolCall(envelope), DecryptionFailed, field);
  }
});

test("a malformed envelope or copy is refused before any decryption", () => {
  const good = vectors.tool_call.envelope;
  const copy = good.copies[0]!;
  const cases: [string, unknown][] = [
    ["not an object", "payload"],
    ["version 1", { ...good, v: 1 }],
    ["another algorithm", { ...good, alg: "x25519-aes" }],
    ["an extra field", { ...good, extra: true }],
    ["no copies", { ...good, copies: [] }],
    ["a copy with an extra field", { ...good, copies: [{ ...copy, extra: "" }] }],
    ["a short nonce", { ...good, copies: [{ ...copy, nonce: b64encode(new Uint8Array(23)) }] }],
    ["a nonce not base64", { ...good, copies: [{ ...copy, nonce: "%%%%" }] }],
    ["an ephemeral key of small order", { ...good, copies: [{ ...copy, ephemeral_public: b64encode(new Uint8Array(32)) }] }],
  ];
  for (const [label, envelope] of cases) assert.throws(() => openToolCall(envelope), MalformedEnvelope, label);
});

/** A copy for bob's laptop whose plaintext (signature || signed bytes) the test chooses:
 * what a sender holding the agent's real key, or a forger, could put inside. */
function forgedCopy(build: (body: Record<string, unknown>, ephemeralPublic: string) => { signature: Uint8Array; signed: Uint8Array }): Envelope {
  const ephemeral = nacl.randomBytes(32);
  const ephemeralPublic = b64encode(x25519.getPublicKey(ephemeral));
  const nonce = nacl.randomBytes(24);
  const body = {
    v: 2, relation_id: RELATION, direction: AGENT_TO_USER, sender_key_id: agent.keyId, recipient_key_id: laptop.keyId,
    ephemeral_public: ephemeralPublic, ts: 1795481450000, artifact: { subtype: "tool_call" },
  };
  const { signature, signed } = build(body, ephemeralPublic);
  const ciphertext = nacl.box(concatBytes(signature, signed), nonce, laptop.public.x25519, ephemeral);
  return {
    v: 2, alg: "x25519-xsalsa20poly1305+ed25519", sender_key_id: agent.keyId,
    copies: [{ recipient_key_id: laptop.keyId, ephemeral_public: ephemeralPublic, nonce: b64encode(nonce), ciphertext: b64encode(ciphertext) }],
  };
}

const signedBy = (signed: Uint8Array) => ({ signature: agent.sign(signed), signed });

test("inside the box: a bad signature, another prefix, a non-canonical body or another context is refused", () => {
  assert.ok(openToolCall(forgedCopy((body) => signedBy(signedBytes(body as never)))));
  assert.throws(() => openToolCall(forgedCopy((body) => {
    const { signature, signed } = signedBy(signedBytes(body as never));
    signature[0] = (signature[0] ?? 0) ^ 1;
    return { signature, signed };
  })), BadSignature);
  assert.throws(() => openToolCall(forgedCopy((body) =>
    signedBy(concatBytes(utf8("hashee-envelope-v1\n"), utf8(canonicalText(body)))))), WrongContext);
  assert.throws(() => openToolCall(forgedCopy((body) =>
    signedBy(concatBytes(utf8("hashee-envelope-v2\n"), utf8(JSON.stringify(body, null, 1)))))), /not canonical/);
  assert.throws(() => openToolCall(forgedCopy((body) =>
    signedBy(concatBytes(utf8("hashee-envelope-v2\n"), utf8(canonicalText(body).replace("{\"artifact\"", "{\"ts\":1,\"artifact\"")))))),
  MalformedEnvelope);
  assert.throws(() => openToolCall(forgedCopy((body) => signedBy(signedBytes({ ...body, recipient_key_id: phone.keyId } as never)))),
    /recipient_key_id/);
  assert.throws(() => openToolCall(forgedCopy((body) => signedBy(signedBytes({ ...body, ephemeral_public: laptop.public.asApi().x25519_public } as never)))),
    /ephemeral_public/);
  assert.throws(() => openToolCall(forgedCopy((body) => signedBy(signedBytes({ ...body, ts: "now" } as never)))), MalformedEnvelope);
  assert.throws(() => openToolCall(forgedCopy(() => ({ signature: new Uint8Array(64), signed: new Uint8Array() }))), DecryptionFailed);
});

test("seal then open: every device gets its own copy, and a reply key opens the answer", () => {
  const call = { subtype: "tool_call", call_id: "call_1", arguments: { path: "é/🙂" } };
  const envelope = seal(call, {
    sender: agent, recipients: [Recipient.of(laptop.public), Recipient.of(phone.public)], relationId: RELATION,
    direction: AGENT_TO_USER, nowMs: 1_795_481_450_000,
  });
  assert.equal(envelope.copies.length, 2);
  assert.notEqual(envelope.copies[0]?.ephemeral_public, envelope.copies[1]?.ephemeral_public);
  for (const device of [laptop, phone]) {
    const opened = openToolCall(envelope, { recipientKeyId: device.keyId, recipientX25519: device.boxKey });
    assert.deepEqual(opened.artifact, call);
    assert.equal(opened.signedAtMs, 1_795_481_450_000);
  }
  const reply = KeyPair.generate();
  const answer = seal({ subtype: "tool_response", call_id: "call_1", status: "ok" }, {
    sender: laptop, recipients: [Recipient.reply(reply.public.x25519)], relationId: RELATION, direction: USER_TO_AGENT, nowMs: 1,
  });
  const opened = openCopy(answer, {
    recipientKeyId: Recipient.reply(reply.public.x25519).keyId, recipientX25519: reply.boxKey, senders: trusted(laptop),
    relationId: RELATION, direction: USER_TO_AGENT,
  });
  assert.equal(opened.artifact["status"], "ok");
});

test("sealing refuses a recipient key of small order, no recipient, and values RFC 8785 cannot write", () => {
  const options = { sender: agent, relationId: RELATION, direction: AGENT_TO_USER, nowMs: 1 } as const;
  assert.throws(() => seal({}, { ...options, recipients: [new Recipient(laptop.keyId, new Uint8Array(32))] }), /small order/);
  assert.throws(() => seal({}, { ...options, recipients: [] }), RangeError);
  assert.throws(() => seal({ n: 2 ** 60 }, { ...options, recipients: [Recipient.of(laptop.public)] }), /2\^53/);
  assert.throws(() => seal({ u: undefined } as never, { ...options, recipients: [Recipient.of(laptop.public)] }), /JSON type/);
});
