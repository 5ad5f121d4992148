// The Node half of bench/sdk_js_envelopes.py: @hashee/sdk (sdk-js/dist, built) opens and
// verifies docs/wire-vectors.json's tool_call envelope on bob's laptop, BATCH times per
// sample; and the floor: the two primitives alone (tweetnacl's crypto_box_open and noble's
// Ed25519 verify, the libraries the SDK uses) on a message of the same size. Prints
// {"samples": [seconds per batch…], "floor": […], "loadavg": [1, 5, 15 min]} as JSON.
//   node bench/sdk_js_envelopes.mjs BATCH SAMPLES
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { createRequire } from "node:module";
import { KeyPair, openCopy } from "../sdk-js/dist/index.node.js";

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

function timed(fn) {
  for (let i = 0; i < batch; i++) fn(); // warm-up: the JIT
  const out = [];
  for (let s = 0; s < samples; s++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < batch; i++) fn();
    out.push(Number(process.hrtime.bigint() - start) / 1e9);
  }
  return out;
}
process.stdout.write(JSON.stringify({ samples: timed(once), floor: timed(floor), loadavg: loadavg() }));
