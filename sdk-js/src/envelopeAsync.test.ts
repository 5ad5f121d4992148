// openCopyAsync (the device's path, on WebCrypto's Ed25519 and X25519 where the platform has
// them, else noble's) against openCopy (noble and tweetnacl): on the vectors and on every way
// envelope.test.ts breaks one, the same artifact or the same refusal (class and message), on
// both backends.
import { test } from "node:test";
import assert from "node:assert/strict";
import nacl from "tweetnacl";
import { x25519 } from "@noble/curves/ed25519";
import { largeOrderX25519Async, platformCrypto, usePlatformCrypto, verifyEd25519, verifyEd25519Async } from "./crypto.js";
import { b64decode, b64encode, concatBytes, utf8 } from "./encoding.js";
import { openCopy, openCopyAsync, Recipient, seal, sealAsync, signedBytes, type Envelope, type OpenOptions } from "./envelope.js";
import { AGENT_TO_USER, USER_TO_AGENT } from "./wire.js";
import { keyPairOf, loadVectors } from "./testing/vectors.js";

const vectors = loadVectors();
const agent = keyPairOf(vectors.keys.agent_runtime);
const laptop = keyPairOf(vectors.keys.bob_laptop);
const phone = keyPairOf(vectors.keys.bob_phone);
const RELATION = vectors.tool_call.relation_id;
const base: OpenOptions = { recipientKeyId: laptop.keyId, recipientX25519: laptop.boxKey,
  senders: new Map([[agent.keyId, agent.public]]), relationId: RELATION, direction: AGENT_TO_USER };

function forged(body: Record<string, unknown>, sign: (signed: Uint8Array) => [Uint8Array, Uint8Array]): Envelope {
  const ephemeral = nacl.randomBytes(32);
  const ephemeralPublic = b64encode(x25519.getPublicKey(ephemeral));
  const nonce = nacl.randomBytes(24);
  const full = { v: 2, relation_id: RELATION, direction: AGENT_TO_USER, sender_key_id: agent.keyId, recipient_key_id: laptop.keyId,
    ephemeral_public: ephemeralPublic, ts: 1795481450000, artifact: { subtype: "tool_call" }, ...body };
  const [signature, signed] = sign(signedBytes(full as never));
  return { v: 2, alg: "x25519-xsalsa20poly1305+ed25519", sender_key_id: agent.keyId, copies: [{ recipient_key_id: laptop.keyId,
    ephemeral_public: ephemeralPublic, nonce: b64encode(nonce),
    ciphertext: b64encode(nacl.box(concatBytes(signature, signed), nonce, laptop.public.x25519, ephemeral)) }] };
}

function flipped(field: "ciphertext" | "nonce" | "ephemeral_public", at: number): Envelope {
  const envelope = structuredClone(vectors.tool_call.envelope) as unknown as Envelope;
  const copy = { ...envelope.copies[0]! };
  const raw = b64decode(copy[field]);
  raw[at] = (raw[at] ?? 0) ^ 0x40;
  copy[field] = b64encode(raw);
  return { ...envelope, copies: [copy] };
}

const good = vectors.tool_call.envelope;
const copy = good.copies[0]!;
const signedBy = (signed: Uint8Array): [Uint8Array, Uint8Array] => [agent.sign(signed), signed];
const CASES: [string, unknown, Partial<OpenOptions>][] = [
  ["the tool_call vector", good, {}],
  ["for another device", good, { recipientKeyId: phone.keyId, recipientX25519: phone.boxKey }],
  ["an untrusted sender", good, { senders: new Map([[phone.keyId, phone.public]]) }],
  ["another relation", good, { relationId: "7d1f4f0e-1111-4a4a-9b9b-000000000009" }],
  ["another direction", good, { direction: USER_TO_AGENT }],
  ["the wrong private key", good, { recipientX25519: phone.boxKey }],
  ["a swapped sender key", good, { senders: new Map([[agent.keyId, phone.public]]) }],
  ["a flipped ciphertext byte", flipped("ciphertext", 5), {}],
  ["a flipped nonce byte", flipped("nonce", 5), {}],
  ["a flipped ephemeral key byte", flipped("ephemeral_public", 5), {}],
  ["not an object", "payload", {}],
  ["version 1", { ...good, v: 1 }, {}],
  ["no copies", { ...good, copies: [] }, {}],
  ["a short nonce", { ...good, copies: [{ ...copy, nonce: b64encode(new Uint8Array(23)) }] }, {}],
  ["a short ephemeral key", { ...good, copies: [{ ...copy, ephemeral_public: b64encode(new Uint8Array(31)) }] }, {}],
  ...["0000000000000000000000000000000000000000000000000000000000000000",
    "0100000000000000000000000000000000000000000000000000000000000000",
    "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"].map((hex): [string, unknown, Partial<OpenOptions>] =>
    [`an ephemeral key of small order ${hex.slice(0, 8)}`, { ...good, copies: [{ ...copy,
      ephemeral_public: b64encode(Uint8Array.from(hex.match(/../g)!, (p) => parseInt(p, 16))) }] }, {}]),
  ["a good forged copy", forged({}, signedBy), {}],
  ["a bad signature", forged({}, (signed) => {
    const [signature] = signedBy(signed);
    signature[0] = (signature[0] ?? 0) ^ 1;
    return [signature, signed];
  }), {}],
  ["another prefix", forged({}, (signed) => signedBy(concatBytes(utf8("hashee-envelope-v1\n"), signed.subarray(19)))), {}],
  ["a body not canonical", forged({}, (signed) => signedBy(concatBytes(signed.subarray(0, 19),
    utf8(JSON.stringify(JSON.parse(new TextDecoder().decode(signed.subarray(19))), null, 1))))), {}],
  ["signed for another recipient", forged({ recipient_key_id: phone.keyId }, signedBy), {}],
  ["a timestamp that is not a number", forged({ ts: "now" }, signedBy), {}],
  ["a plaintext of only a signature", forged({}, () => [new Uint8Array(64), new Uint8Array()]), {}],
];

function outcome(open: () => unknown): unknown {
  try {
    return { opened: open() };
  } catch (error) {
    return { refused: (error as Error).constructor.name, message: (error as Error).message };
  }
}

for (const platform of [true, false]) {
  test(`openCopyAsync answers as openCopy, every case (${platform ? "the platform's WebCrypto where it has it" : "noble alone"})`,
    async () => {
      usePlatformCrypto(platform);
      try {
        for (const [label, envelope, options] of CASES) {
          const expected = outcome(() => openCopy(envelope, { ...base, ...options }));
          let actual: unknown;
          try {
            actual = { opened: await openCopyAsync(envelope, { ...base, ...options }) };
          } catch (error) {
            actual = { refused: (error as Error).constructor.name, message: (error as Error).message };
          }
          assert.deepEqual(actual, expected, label);
        }
        assert.deepEqual((await openCopyAsync(good, base)).artifact, vectors.tool_call.artifact);
      } finally {
        usePlatformCrypto(true);
      }
    });
}

test("Node ≥ 20 has Ed25519 and X25519 in WebCrypto, and the device's path uses them", async () => {
  const major = Number(process.versions.node.split(".")[0]);
  assert.deepEqual(await platformCrypto(), major >= 20 ? { ed25519: true, x25519: true } : await platformCrypto());
});

test("verifyEd25519Async answers as verifyEd25519; largeOrderX25519Async refuses what checkedX25519 refuses", async () => {
  const data = utf8("hashee");
  const signature = laptop.sign(data);
  const torsion = Uint8Array.from("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a".match(/../g)!, (p) => parseInt(p, 16));
  const bent = Uint8Array.from(signature);
  bent[63] = (bent[63] ?? 0) | 0x80; // S above the group order
  for (const [label, sig, key] of [["good", signature, laptop.public.ed25519], ["another key", signature, phone.public.ed25519],
    ["a non-canonical S", bent, laptop.public.ed25519], ["a key of small order", signature, torsion],
    ["a short signature", signature.subarray(1), laptop.public.ed25519]] as const) {
    for (const platform of [true, false]) {
      usePlatformCrypto(platform);
      assert.equal(await verifyEd25519Async(sig, data, key), verifyEd25519(sig, data, key), `${label} ${platform}`);
    }
  }
  usePlatformCrypto(true);
  assert.equal(await verifyEd25519Async(signature, data, laptop.public.ed25519), true);
  assert.equal(await largeOrderX25519Async(laptop.public.x25519), true);
  assert.equal(await largeOrderX25519Async(new Uint8Array(32)), false);
  assert.equal(await largeOrderX25519Async(Uint8Array.of(1, ...new Uint8Array(31))), false);
  assert.equal(await largeOrderX25519Async(new Uint8Array(31)), false);
});

for (const platform of [true, false]) {
  test(`sealAsync makes what openCopy opens, signs as sign, and refuses as seal (${platform ? "WebCrypto" : "noble alone"})`, async () => {
    usePlatformCrypto(platform);
    try {
      const data = utf8("the same bytes");
      assert.deepEqual(await laptop.signAsync(data), laptop.sign(data));
      const answer = { subtype: "tool_response", call_id: "call_1", status: "ok", result: { text: "é/🙂" } };
      const sealed = await sealAsync(answer, { sender: laptop, recipients: [Recipient.of(agent.public), Recipient.of(phone.public)],
        relationId: RELATION, direction: USER_TO_AGENT, nowMs: 1_795_481_450_000 });
      for (const to of [agent, phone]) {
        const opened = openCopy(sealed, { recipientKeyId: to.keyId, recipientX25519: to.boxKey,
          senders: new Map([[laptop.keyId, laptop.public]]), relationId: RELATION, direction: USER_TO_AGENT });
        assert.deepEqual(opened.artifact, answer);
        assert.equal(opened.signedAtMs, 1_795_481_450_000);
      }
      const options = { sender: agent, relationId: RELATION, direction: AGENT_TO_USER, nowMs: 1 } as const;
      for (const [artifact, recipients, refused] of [
        [{}, [new Recipient(laptop.keyId, new Uint8Array(32))], /small order/],
        [{}, [], /1 to 32 recipients/],
        [{ n: 2 ** 60 }, [Recipient.of(laptop.public)], /2\^53/],
      ] as const) {
        await assert.rejects(sealAsync(artifact, { ...options, recipients }), refused);
        assert.throws(() => seal(artifact, { ...options, recipients }), refused);
      }
    } finally {
      usePlatformCrypto(true);
    }
  });
}
