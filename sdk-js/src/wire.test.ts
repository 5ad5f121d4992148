import { test } from "node:test";
import assert from "node:assert/strict";
import { ED25519_TORSION_SUBGROUP } from "@noble/curves/ed25519";
import { b64decode, b64encode, b64url, b64urlDecode, hex } from "./encoding.js";
import { PublicKeys } from "./crypto.js";
import { InvalidPublicKey } from "./errors.js";
import { jwkThumbprint } from "./jose.js";
import { checkedEd25519, checkedX25519, keyIdFor, replyKeyId } from "./wire.js";
import { bytes, keyPairOf, loadVectors } from "./testing/vectors.js";

const vectors = loadVectors();

// The X25519 points of small order (as libsodium's blocklist lists them), little-endian u.
const X25519_SMALL_ORDER = [
  "0000000000000000000000000000000000000000000000000000000000000000",
  "0100000000000000000000000000000000000000000000000000000000000000",
  "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
  "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157",
  "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
];
const fromHex = (text: string) => Uint8Array.from(text.match(/../g) ?? [], (pair) => parseInt(pair, 16));

test("every vector key pair derives its public keys and key id", () => {
  for (const [label, key] of Object.entries(vectors.keys)) {
    const pair = keyPairOf(key);
    assert.equal(b64encode(pair.public.x25519), key.x25519_public, label);
    assert.equal(b64encode(pair.public.ed25519), key.ed25519_public, label);
    assert.equal(pair.keyId, key.key_id, label);
    assert.equal(keyIdFor(bytes(key.x25519_public), bytes(key.ed25519_public)), key.key_id, label);
    assert.deepEqual(pair.secret(), { x25519_private: key.x25519_private, ed25519_seed: key.ed25519_seed });
  }
});

test("the reply key id and the identity's RFC 7638 kid match the vectors", () => {
  assert.equal(replyKeyId(bytes(vectors.reply_key.x25519_public)), vectors.reply_key.reply_key_id);
  assert.equal(jwkThumbprint(vectors.identity.jwk), vectors.identity.kid);
});

test("PublicKeys.fromApi recomputes the key id and refuses one that does not match", () => {
  const key = vectors.keys.bob_laptop;
  const keys = PublicKeys.fromApi(key);
  assert.equal(keys.keyId, key.key_id);
  assert.deepEqual(keys.asApi(), { x25519_public: key.x25519_public, ed25519_public: key.ed25519_public });
  assert.throws(() => PublicKeys.fromApi({ ...key, key_id: vectors.keys.bob_phone.key_id }), InvalidPublicKey);
  assert.throws(() => PublicKeys.fromApi({ ...key, x25519_public: key.x25519_public.slice(4) }), InvalidPublicKey);
});

test("X25519 keys of small order are refused, by the check and by PublicKeys.fromApi", () => {
  for (const point of X25519_SMALL_ORDER) {
    assert.throws(() => checkedX25519(fromHex(point)), /small order/, point);
    const listed = { x25519_public: b64encode(fromHex(point)), ed25519_public: vectors.keys.bob_laptop.ed25519_public };
    assert.throws(() => PublicKeys.fromApi(listed), InvalidPublicKey, point);
  }
  assert.doesNotThrow(() => checkedX25519(bytes(vectors.keys.bob_laptop.x25519_public)));
});

test("Ed25519 keys of small order (the torsion subgroup) are refused", () => {
  for (const point of ED25519_TORSION_SUBGROUP) {
    assert.throws(() => checkedEd25519(fromHex(point)), RangeError, point);
    const listed = { x25519_public: vectors.keys.bob_laptop.x25519_public, ed25519_public: b64encode(fromHex(point)) };
    assert.throws(() => PublicKeys.fromApi(listed), InvalidPublicKey, point);
  }
  assert.throws(() => jwkThumbprint({ kty: "OKP", crv: "Ed25519", x: b64url(fromHex(ED25519_TORSION_SUBGROUP[1] ?? "")) }));
});

test("base64 and base64url are strict in both directions", () => {
  assert.deepEqual(b64decode("AAEC"), Uint8Array.of(0, 1, 2));
  for (const bad of ["AAE", "AA=C", "AA-_", " AAEC", "AAEC\n", 3]) assert.throws(() => b64decode(bad), RangeError, String(bad));
  assert.equal(b64url(Uint8Array.of(251, 255)), "-_8");
  assert.equal(hex(b64urlDecode("-_8")), "fbff");
  for (const bad of ["-_8=", "+/8", "-_9", "A"]) assert.throws(() => b64urlDecode(bad), RangeError, bad);
});
