// The Node half of bench/sdk_js_envelopes.py: @hashee/sdk (sdk-js/dist, built) opens and
// verifies docs/wire-vectors.json's tool_call envelope on bob's laptop, BATCH times per
// sample; and the floor: the two primitives alone (tweetnacl's crypto_box_open and noble's
// Ed25519 verify, the libraries the SDK uses) on a message of the same size; then the same on
// the platform's primitives: openCopyAsync (the device's path: WebCrypto's X25519 and Ed25519,
// tweetnacl's HSalsa20 + secretbox) and its floor (those primitives alone, the imported sender
// key cached as the SDK caches it). Prints {"samples": [seconds per batch…], "floor": […],
// "async": […], "async_floor": […], "native": {ed25519, x25519}, "loadavg": [1, 5, 15 min]} as JSON.
//   node bench/sdk_js_envelopes.mjs BATCH SAMPLES
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { createRequire } from "node:module";
import { KeyPair, openCopy, openCopyAsync } from "../sdk-js/dist/index.node.js";
import { platformCrypto } from "../sdk-js/dist/crypto.js";

const sdk = createRequire(new URL("../sdk-js/package.json", import.meta.url));
const nacl = sdk("tweetnacl");
const { ed25519 } = await import(sdk.resolve("@noble/curves/ed25519"));

const [batch, samples] = process.argv.slice(2).map(Number);
const vectors = JSON.parse(readFileSync(new URL("../docs/wire-vectors.json", import.meta.url), "utf8"));
const pair = (label) => KeyPair.fromSecret(vectors.keys[label]);
const laptop = pair("bob_laptop");
const agent = pair("agent_runtime");
const options = { recipientKeyId: laptop.keyId, recipientX25519: laptop.boxKey, senders: new Map([[agent.keyId, agent.public]]),
  relationId: vectors.tool_call.relation_id, direction: vectors.tool_call.direction };
const envelope = vectors.tool_call.envelope;
const once = () => {
  if (openCopy(envelope, options).artifact.call_id !== vectors.tool_call.artifact.call_id) throw new Error("opened another call");
};

const size = Buffer.from(envelope.copies[0].ciphertext, "base64").length - 16; // signature + signed bytes
const [a, b] = [nacl.box.keyPair(), nacl.box.keyPair()];
const nonce = new Uint8Array(24);
const message = new Uint8Array(size);
const boxed = nacl.box(message, nonce, b.publicKey, a.secretKey);
const seed = ed25519.utils.randomPrivateKey();
const [signer, signature] = [ed25519.getPublicKey(seed), ed25519.sign(message.subarray(64), seed)];
const floor = () => {
  if (nacl.box.open(boxed, nonce, a.publicKey, b.secretKey) === null || !ed25519.verify(signature, message.subarray(64), signer)) {
    throw new Error("the floor failed");
  }
};

const onceAsync = async () => {
  if ((await openCopyAsync(envelope, options)).artifact.call_id !== vectors.tool_call.artifact.call_id) throw new Error("opened another call");
};
const subtle = globalThis.crypto.subtle;
const pkcs8 = Uint8Array.of(0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x6e, 0x04, 0x22, 0x04, 0x20, ...b.secretKey);
const mine = await subtle.importKey("pkcs8", pkcs8, { name: "X25519" }, false, ["deriveBits"]);
const verifier = await subtle.importKey("raw", signer, { name: "Ed25519" }, false, ["verify"]);
const sigma = new TextEncoder().encode("expand 32-byte k");
const floorAsync = async () => {
  const theirs = await subtle.importKey("raw", a.publicKey, { name: "X25519" }, false, []);
  const shared = new Uint8Array(await subtle.deriveBits({ name: "X25519", public: theirs }, mine, 256));
  const key = new Uint8Array(32);
  nacl.lowlevel.crypto_core_hsalsa20(key, new Uint8Array(16), shared, sigma);
  if (nacl.secretbox.open(boxed, nonce, key) === null || !(await subtle.verify({ name: "Ed25519" }, verifier, signature, message.subarray(64)))) {
    throw new Error("the floor failed");
  }
};

async function timed(fn) {
  for (let i = 0; i < batch; i++) await fn(); // warm-up: the JIT
  const out = [];
  for (let s = 0; s < samples; s++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < batch; i++) await fn();
    out.push(Number(process.hrtime.bigint() - start) / 1e9);
  }
  return out;
}
process.stdout.write(JSON.stringify({ samples: await timed(once), floor: await timed(floor), async: await timed(onceAsync),
  async_floor: await timed(floorAsync), native: await platformCrypto(), loadavg: loadavg() }));
