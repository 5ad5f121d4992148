// SPEC §9.1–§9.2 against a lying server (tests/sdk_trust/test_identity_trust.py in TypeScript,
// on the fake server where the Python file uses the real one): an identified agent's manifest
// carries its pinned identity's signature, its runtime keys are vouched for by that identity, the
// user's devices by approvals, and a changed identity is refused until bob accepts the new
// safety number — exactly the one he compared.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ED25519_TORSION_SUBGROUP } from "@noble/curves/ed25519";
import { canonicalHash } from "./canonical.js";
import { KeyPair } from "./crypto.js";
import { b64url, b64urlDecode } from "./encoding.js";
import { SafetyNumberMismatch } from "./errors.js";
import { ed25519PublicJwk, generatePrivateJwk, signManifest, type PrivateJwk } from "./jose.js";
import { safetyNumber, signRuntimeKey } from "./statements.js";
import { AGENT_ID, listed, manifest, RELATION_ID } from "./testing/fakeServer.js";
import { addAgentKey, addDevice, relationSays, serveManifest } from "./testing/lying.js";
import { Scene, statuses } from "./testing/scene.js";

const PASSWD = ["/etc/passwd", "/etc/shadow"] as any;
const WAIT = { timeoutMs: 3000, untilAnswered: true };
const ALICE = generatePrivateJwk();
const NEW_KEY = generatePrivateJwk();
const MALLORY = generatePrivateJwk();
const relation = `/h2a/relations/${RELATION_ID}`;
const publicOf = (jwk: PrivateJwk): any => ed25519PublicJwk({ kty: "OKP", crv: "Ed25519", x: jwk.x });
const fromHex = (text: string): Uint8Array => Uint8Array.from(text.match(/../g) ?? [], (pair) => parseInt(pair, 16));
const forget = (scene: Scene): void => {
  scene.device.keydir.forget();
  (scene.device as any).cachedViews.clear();
};

/** alice's agent with an identity key; every version and runtime key signed by it. */
const identified = (): Promise<Scene> => Scene.create((s) => s.server.giveIdentity(ALICE));

function widen(served: any): void {
  served.tools[0].input_schema.properties.path = { type: ["string", "array"] };
}
const widened = (): any => {
  const changed = manifest();
  widen(changed);
  return changed;
};

/** alice rotates the identity: her runtime key and a new version are signed by the new key. */
function rotate(scene: Scene): any {
  const next = { ...manifest(), agent_version: "1.0.2" };
  scene.server.giveIdentity(NEW_KEY);
  scene.server.publish(next);
  scene.agent = scene.runtime(next);
  return next;
}

test("a signed call runs, and bob's prompt shows the safety number of alice's identity and his root", async () => {
  const scene = await identified();
  assert.deepEqual(statuses(await scene.call("read_file", { path: "notes.txt" }, WAIT)), [["ok", null]]);
  const expected = safetyNumber({ agentId: AGENT_ID, agentIdentity: b64urlDecode(ALICE.x), userRootDevice: scene.device.keys.public.ed25519 });
  assert.equal(scene.asked[0]?.safetyNumber, expected);
  assert.equal((await scene.agent.keydir.root(RELATION_ID))?.keyId, scene.device.keys.keyId); // the agent's half is the same root
});

for (const rewrite of ["filesystem:read made silent", "path widened to arrays"]) {
  test(`a manifest the server rewrote is refused though its hash matches (${rewrite}): manifest_unverified`, async () => {
    const scene = await identified();
    scene.userSide.lie(`/agents/${AGENT_ID}`, serveManifest((m) => {
      if (rewrite === "filesystem:read made silent") m.permission_scopes[0].sensitivity = "low";
      else widen(m);
    }));
    assert.deepEqual(statuses(await scene.call("read_file", { path: "notes.txt" }, WAIT)), [["denied", "manifest_unverified"]]);
    assert.deepEqual(scene.ran, []);
    assert.deepEqual(scene.asked, []);
    assert.deepEqual(await scene.refusals(), ["manifest_unverified"]);
  });
}

test("a runtime key the identity did not vouch for gets nothing run: untrusted_sender", async () => {
  const scene = await identified();
  const mallory = KeyPair.generate();
  scene.userSide.lie("/keys", addAgentKey({ ...mallory.public.asApi(), key_id: mallory.keyId,
    identity_signature: signRuntimeKey(MALLORY, { agentId: AGENT_ID, keyId: mallory.keyId }) }));
  assert.equal(await scene.device.handleFrame(scene.forgeCall(scene.toolCall("read_file", "call_forged", { path: "/etc/passwd" }), mallory)), null);
  assert.deepEqual(scene.ran, []);
  assert.deepEqual(await scene.refusals(), ["untrusted_sender"]);
});

for (const index of [0, 4]) {
  test(`an identity of small order is never pinned (torsion point ${index})`, async () => {
    // A server that serves, from the first sight, a key for which forged signatures verify.
    const scene = await identified();
    const small = { kty: "OKP", crv: "Ed25519", x: b64url(fromHex(ED25519_TORSION_SUBGROUP[index]!)) };
    scene.userSide.lie(`/agents/${AGENT_ID}/identity`, (body) => ({ ...body, jwk: small }));
    assert.equal(await scene.call("notify", { title: "hi" }, WAIT), null);
    assert.deepEqual(scene.ran, []);
    assert.deepEqual(scene.asked, []);
    assert.deepEqual(await scene.device.state.pinnedIdentity(RELATION_ID), [false, null]);
  });
}

test("after a real rotation bob accepts the new safety number, and calls run again", async () => {
  const scene = await identified();
  assert.deepEqual(statuses(await scene.call("notify", { title: "hi" }, WAIT)), [["ok", null]]);
  const before = (await scene.device.relation(RELATION_ID)).safetyNumber;
  rotate(scene);
  forget(scene);
  assert.equal(await scene.call("notify", { title: "not yet" }, WAIT), null); // refused until bob compares
  const pending = await scene.device.pendingSafetyNumber(RELATION_ID);
  assert.ok(pending !== null && pending !== before);
  assert.equal(await scene.device.acceptIdentity(RELATION_ID, { safetyNumber: pending }), pending);
  assert.deepEqual(statuses(await scene.call("notify", { title: "again" }, WAIT)), [["ok", null]]);
  assert.deepEqual(scene.ran, [["notify", { title: "hi" }], ["notify", { title: "again" }]]);
  assert.deepEqual(await scene.refusals(), ["identity_changed"]);
});

test("accepting pins only the identity bob compared, not the one the server swapped in since", async () => {
  // A real rotation; bob compares the new safety number with alice. Between that read and his
  // "accept", the server swaps in mallory's identity, a widened manifest she signed and a
  // runtime key she vouched for.
  const scene = await identified();
  assert.deepEqual(statuses(await scene.call("notify", { title: "hi" }, WAIT)), [["ok", null]]);
  rotate(scene);
  forget(scene);
  const compared = await scene.device.pendingSafetyNumber(RELATION_ID);
  assert.ok(compared !== null);
  const mallory = KeyPair.generate();
  scene.userSide.lie(`/agents/${AGENT_ID}/identity`, (body) => ({ ...body, jwk: publicOf(MALLORY) }));
  scene.userSide.lie(`/agents/${AGENT_ID}`, serveManifest(widen));
  scene.userSide.lie(`/agents/${AGENT_ID}`, (body) => ({ ...body, capability_manifest_signature: signManifest(body.capability_manifest, MALLORY) }));
  scene.userSide.lie("/keys", addAgentKey({ ...mallory.public.asApi(), key_id: mallory.keyId,
    identity_signature: signRuntimeKey(MALLORY, { agentId: AGENT_ID, keyId: mallory.keyId }) }));
  await assert.rejects(scene.device.acceptIdentity(RELATION_ID, { safetyNumber: compared }), SafetyNumberMismatch);
  forget(scene);
  const call = scene.toolCall("read_file", "call_widened", { path: PASSWD }, { manifest_version: 2, manifest_hash: canonicalHash(widened()), timeout_ms: 5000 });
  assert.equal(await scene.device.handleFrame(scene.forgeCall(call, mallory)), null);
  assert.deepEqual(scene.ran, [["notify", { title: "hi" }]]);
  assert.deepEqual(scene.asked, []);
  assert.equal((await scene.refusals()).at(-1), "identity_changed");
});

test("the agent seals to no device the server slipped in: one that approved itself, or a root again", async () => {
  const scene = await identified();
  const [mallory, phone] = [KeyPair.generate(), KeyPair.generate()];
  scene.server.publishDevice("phone", phone, scene.device.keys);
  assert.deepEqual(statuses(await scene.call("notify", { title: "first" }, WAIT)), [["ok", null]]); // pins the laptop and the approved phone
  const forged = { ...listed("tablet", mallory, mallory), approved_by_key_id: scene.device.keys.keyId }; // "approved by the laptop", signed by itself
  scene.agentSide.lie("/keys", addDevice(forged));
  scene.agentSide.lie("/keys", addDevice(listed("evil", KeyPair.generate())));
  scene.agent.keydir.forget();
  const sent = scene.server.messages.length;
  assert.deepEqual(statuses(await scene.call("notify", { title: "second" }, WAIT)), [["ok", null]]);
  const copies = scene.server.messages[sent].payload.copies.map((c: any) => c.recipient_key_id);
  assert.deepEqual(new Set(copies), new Set([scene.device.keys.keyId, phone.keyId]));
});

test("a stolen runtime key cannot widen the manifest bob consented to: manifest_unverified", async () => {
  // The server and a thief of the runtime key together: the server serves a widened manifest
  // (hash recomputed) and says bob consented to it; the thief signs a call under it. Only the
  // identity's signature, which neither holds, is missing.
  const scene = await identified();
  scene.userSide.lie(`/agents/${AGENT_ID}`, serveManifest(widen));
  scene.userSide.lie(relation, relationSays({ acknowledged_manifest_hash: canonicalHash(widened()) }));
  const call = scene.toolCall("read_file", "call_widened", { path: PASSWD }, { manifest_hash: canonicalHash(widened()), timeout_ms: 5000 });
  assert.notEqual(await scene.device.handleFrame(scene.forgeCall(call, scene.agent.keys)), null);
  assert.deepEqual(scene.ran, []);
  assert.deepEqual(scene.asked, []);
  assert.deepEqual(await scene.refusals(), ["manifest_unverified"]);
});

test("an acknowledged hash that is not the acknowledged version's is refused: manifest_unverified", async () => {
  const scene = await identified();
  scene.userSide.lie(relation, relationSays({ acknowledged_manifest_hash: "0".repeat(64) }));
  assert.deepEqual(statuses(await scene.call("notify", { title: "hi" }, WAIT)), [["denied", "manifest_unverified"]]);
  assert.deepEqual(scene.ran, []);
});

test("an identity reset on the server is refused until bob accepts: identity_changed", async () => {
  // Whoever holds the owner's account (or the server's database) resets the identity.
  const scene = await identified();
  assert.deepEqual(statuses(await scene.call("notify", { title: "hi" }, WAIT)), [["ok", null]]);
  scene.server.giveIdentity(MALLORY); // everything re-signed by the new key: no rotation signature
  forget(scene);
  assert.equal(await scene.call("notify", { title: "after the reset" }, WAIT), null);
  assert.deepEqual(scene.ran, [["notify", { title: "hi" }]]);
  assert.deepEqual(await scene.refusals(), ["identity_changed"]);
});

test("a grant the server forges is asked on bob's device before anything runs", async () => {
  // bob never allowed notification:send (low: silent once granted); the server says he did.
  const scene = await identified();
  scene.server.granted = ["filesystem:read"];
  await scene.device.relation(RELATION_ID); // the device has seen bob's grants
  scene.userSide.lie(relation, relationSays({ granted_scopes: ["filesystem:read", "notification:send"] }));
  forget(scene);
  scene.answer = "deny";
  assert.deepEqual(statuses(await scene.call("notify", { title: "you won a prize" }, WAIT)), [["denied", "user_refused"]]);
  assert.deepEqual(scene.ran, []);
  assert.deepEqual(scene.asked.map((p) => p.newlyGranted), [true]);
});

test("a grant given on the web is confirmed once on bob's device", async () => {
  const scene = await identified();
  scene.server.granted = ["filesystem:read"];
  await scene.device.relation(RELATION_ID);
  scene.server.granted = ["filesystem:read", "notification:send"]; // bob re-consented on the web
  forget(scene);
  const results = [await scene.call("notify", { title: "#0" }, WAIT), await scene.call("notify", { title: "#1" }, WAIT)];
  assert.deepEqual(statuses(...results), [["ok", null], ["ok", null]]);
  assert.deepEqual(scene.asked.map((p) => [p.scope, p.newlyGranted]), [["notification:send", true]]);
});

test("a re-consent the server claims is asked on bob's device before the wider tool runs", async () => {
  // alice widens read_file's path to arrays (breaking: bob must consent again). The server hides
  // it completely: bob "acknowledged" the new version, nothing is pending.
  const scene = await identified();
  await scene.device.relation(RELATION_ID); // the device saw bob's consent to v1
  const wider = { ...widened(), agent_version: "2.0.0" };
  scene.server.publish(wider, ["filesystem:read"]);
  scene.userSide.lie(relation, relationSays({ status: "active", pending_scopes: [], acknowledged_manifest_version: 2,
    acknowledged_manifest_hash: canonicalHash(wider) }));
  forget(scene);
  scene.answer = "deny";
  const result = await scene.call("read_file", { path: PASSWD }, { agent: scene.runtime(wider), ...WAIT });
  assert.deepEqual(statuses(result), [["denied", "user_refused"]]);
  assert.deepEqual(scene.ran, []);
  assert.deepEqual(scene.asked.map((p) => [p.scope, p.newlyGranted]), [["filesystem:read", true]]);
});
