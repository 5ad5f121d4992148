// The user's devices each side trusts, against a lying server (tests/sdk_trust/test_device_trust.py
// and test_relation_agent.py in TypeScript): one root, every other device trusted only through a
// chain of approvals from it, a device once revoked never trusted again nor what it approves, and
// a relation's agent pinned at the first look.
import { test } from "node:test";
import assert from "node:assert/strict";
import { KeyPair } from "./crypto.js";
import type { Device } from "./device.js";
import { AmbiguousRoot, NoRecipientKey, SafetyNumberMismatch } from "./errors.js";
import { generatePrivateJwk } from "./jose.js";
import { Recipient, seal } from "./envelope.js";
import type { HttpResponse } from "./rest.js";
import { memoryStore } from "./store.js";
import { AGENT_ID, FakeServer, listed, RELATION_ID } from "./testing/fakeServer.js";
import { addDevice } from "./testing/lying.js";
import { Scene } from "./testing/scene.js";
import { AGENT_TO_USER } from "./wire.js";

const WAIT = { timeoutMs: 3000, untilAnswered: true };
const ids = async (trusted: Promise<Map<string, unknown>>): Promise<Set<string>> => new Set((await trusted).keys());
/** The recipients of every tool call sealed so far, in order. */
const callsSealedTo = (scene: Scene): Set<string>[] => scene.server.messages.filter((m) => m.msg_subtype === "artifact_tool_call")
  .map((m) => new Set(m.payload.copies.map((c: any) => c.recipient_key_id as string)));

// --- what the user's device trusts ------------------------------------------------------------

test("bob's device trusts its root and what it approved, never a second root nor what that one approves", async () => {
  const scene = await Scene.create();
  const [phone, mallory, friend] = [KeyPair.generate(), KeyPair.generate(), KeyPair.generate()];
  scene.server.publishDevice("phone", phone, scene.device.keys);
  scene.userSide.lie("/keys", addDevice(listed("operator-row", mallory))); // a second "first device"
  scene.userSide.lie("/keys", addDevice(listed("friend", friend, mallory)));
  assert.deepEqual(await ids(scene.device.keydir.trustedUserDevices(RELATION_ID)), new Set([scene.device.keys.keyId, phone.keyId]));
  assert.equal((await scene.device.keydir.root(RELATION_ID))?.keyId, scene.device.keys.keyId);
});

test("a device knows the root it was approved through, and keeps it when the server names another", async () => {
  const scene = await Scene.create();
  const onPhone = scene.startDevice(memoryStore(), "phone");
  await onPhone.init();
  const phone = onPhone.keys;
  scene.server.publishDevice("phone", phone, scene.device.keys);
  assert.equal((await onPhone.keydir.root(RELATION_ID))?.keyId, scene.device.keys.keyId);
  const mallory = KeyPair.generate(); // later the server says the laptop is approved by mallory's root
  Object.assign(scene.server.devices[0], listed("laptop", scene.device.keys, mallory));
  scene.server.devices.push(listed("mallory", mallory));
  onPhone.keydir.forget();
  assert.equal((await onPhone.keydir.root(RELATION_ID))?.keyId, scene.device.keys.keyId);
  assert.deepEqual(await ids(onPhone.keydir.trustedUserDevices(RELATION_ID)), new Set([scene.device.keys.keyId, phone.keyId]));
});

test("bob's device always trusts itself, though the server lists none of his devices", async () => {
  const scene = await Scene.create();
  scene.server.devices.length = 0;
  assert.deepEqual(await ids(scene.device.keydir.trustedUserDevices(RELATION_ID)), new Set([scene.device.keys.keyId]));
});

// --- a second "first device" --------------------------------------------------------------------

test("a second first device at the agent's first look: AmbiguousRoot, no copy sealed, nothing runs, nothing pinned", async () => {
  const scene = await Scene.create();
  scene.server.publishDevice("operator-row", KeyPair.generate()); // a row an operator added, approved by no device
  await assert.rejects(scene.agent.callTool(RELATION_ID, "read_file", { path: "/etc/passwd" }, { timeoutMs: 300 }), AmbiguousRoot);
  assert.deepEqual(scene.server.messages, []);
  assert.deepEqual(scene.ran, []);
  await assert.rejects(scene.agent.callTool(RELATION_ID, "notify", { title: "again" }, { timeoutMs: 300 }), AmbiguousRoot);
});

test("the root each side makes its safety number from is bob's, whatever the listing puts first", async () => {
  const scene = await Scene.create();
  await scene.call("notify", { title: "pins the laptop" }, WAIT);
  scene.server.devices.unshift(listed("operator-row", KeyPair.generate()));
  scene.agent.keydir.forget();
  scene.device.keydir.forget();
  assert.equal((await scene.agent.keydir.root(RELATION_ID))?.keyId, scene.device.keys.keyId);
  assert.equal((await scene.device.keydir.root(RELATION_ID))?.keyId, scene.device.keys.keyId);
  assert.equal((await scene.call("notify", { title: "b" }, WAIT))?.status, "ok");
  assert.deepEqual(callsSealedTo(scene).at(-1), new Set([scene.device.keys.keyId]));
});

// --- revoked devices ------------------------------------------------------------------------------

for (const learnsBy of ["the keys.device_revoked event", "the listing alone"]) {
  test(`a revoked device listed again gets no copy, and what it approves is refused (${learnsBy})`, async () => {
    const scene = await Scene.create();
    const [phone, thiefApproved] = [KeyPair.generate(), KeyPair.generate()];
    scene.server.publishDevice("phone", phone, scene.device.keys);
    assert.equal((await scene.call("notify", { title: "to both" }, WAIT))?.status, "ok");
    const bobsView = [await ids(scene.device.keydir.trustedUserDevices(RELATION_ID))];
    const phoneRow = scene.server.devices.pop(); // bob revokes his stolen phone
    scene.device.keydir.forget();
    bobsView.push(await ids(scene.device.keydir.trustedUserDevices(RELATION_ID)));
    if (learnsBy === "the listing alone") scene.agent.keydir.forget();
    else await scene.agent.handleFrame({ id: 1, type: "keys.device_revoked", data: { relation_id: RELATION_ID, device: phoneRow } });
    assert.equal((await scene.call("notify", { title: "laptop only" }, WAIT))?.status, "ok");
    scene.server.devices.push(phoneRow, listed("thief", thiefApproved, phone)); // listed again, and a device the thief approved
    scene.agent.keydir.forget();
    scene.device.keydir.forget();
    assert.equal((await scene.call("notify", { title: "still laptop only" }, WAIT))?.status, "ok");
    const laptop = scene.device.keys.keyId;
    assert.deepEqual(callsSealedTo(scene), [new Set([laptop, phone.keyId]), new Set([laptop]), new Set([laptop])]);
    bobsView.push(await ids(scene.device.keydir.trustedUserDevices(RELATION_ID)));
    assert.deepEqual(bobsView, [new Set([laptop, phone.keyId]), new Set([laptop]), new Set([laptop])]);
  });
}

test("a revoked device is never trusted again after the agent restarts on its store", async () => {
  const scene = await Scene.create();
  const phone = KeyPair.generate();
  scene.server.publishDevice("phone", phone, scene.device.keys);
  const store = memoryStore();
  await store.set("secret/key-pair", (await scene.agentStore.get("secret/key-pair"))!);
  scene.agent = scene.runtime(scene.server.manifest, store);
  assert.equal((await scene.call("notify", { title: "to both" }, WAIT))?.status, "ok");
  const phoneRow = scene.server.devices.pop();
  scene.agent.keydir.forget();
  assert.equal((await scene.call("notify", { title: "laptop only" }, WAIT))?.status, "ok");
  scene.server.devices.push(phoneRow);
  scene.agent = scene.runtime(scene.server.manifest, store); // restarted
  assert.equal((await scene.call("notify", { title: "after the restart" }, WAIT))?.status, "ok");
  assert.deepEqual(callsSealedTo(scene).at(-1), new Set([scene.device.keys.keyId]));
});

test("an agent restarted on its store does not trust a second root on first sight", async () => {
  const scene = await Scene.create();
  const store = memoryStore();
  await store.set("secret/key-pair", (await scene.agentStore.get("secret/key-pair"))!);
  scene.agent = scene.runtime(scene.server.manifest, store);
  await scene.call("notify", { title: "pins the laptop" }, WAIT);
  scene.server.devices.unshift(listed("mallory", KeyPair.generate())); // a second root, after the restart
  scene.agent = scene.runtime(scene.server.manifest, store);
  assert.equal((await scene.call("notify", { title: "after the restart" }, WAIT))?.status, "ok");
  assert.deepEqual(callsSealedTo(scene).at(-1), new Set([scene.device.keys.keyId]));
});

test("after bob's reset the agent seals to nothing: not the old root, not the new one it never compared", async () => {
  const scene = await Scene.create();
  await scene.call("notify", { title: "pins the laptop" }, WAIT);
  const laptopRow = scene.server.devices.pop();
  scene.server.publishDevice("tablet", KeyPair.generate()); // POST /keys/devices with reset: a new root
  await scene.agent.handleFrame({ id: 1, type: "keys.device_revoked", data: { relation_id: RELATION_ID, device: laptopRow } });
  await scene.agent.handleFrame({ id: 2, type: "keys.device_reset",
    data: { relation_id: RELATION_ID, device: scene.server.devices[0], revoked_key_ids: [laptopRow.key_id] } });
  const sent = scene.server.messages.length;
  await assert.rejects(scene.agent.callTool(RELATION_ID, "notify", { title: "to whom?" }, { timeoutMs: 300 }), NoRecipientKey);
  assert.equal(scene.server.messages.length, sent);
});

/** Bob resets: his laptop is revoked, his tablet is his new root; the agent is told both. */
async function resetToTablet(scene: Scene): Promise<Device> {
  const tablet = scene.startDevice(memoryStore(), "tablet");
  await tablet.init();
  const laptopRow = scene.server.devices.pop();
  scene.server.publishDevice("tablet", tablet.keys);
  await scene.agent.handleFrame({ id: 1, type: "keys.device_revoked", data: { relation_id: RELATION_ID, device: laptopRow } });
  await scene.agent.handleFrame({ id: 2, type: "keys.device_reset",
    data: { relation_id: RELATION_ID, device: scene.server.devices[0], revoked_key_ids: [laptopRow.key_id] } });
  return tablet;
}

test("after bob's reset the agent trusts his new root only once its owner accepts exactly the key id compared", async () => {
  // tests/sdk_trust/test_device_reset_live.py on the fake server
  const scene = await Scene.create();
  assert.equal((await scene.call("notify", { title: "pins the laptop" }, WAIT))?.status, "ok");
  const tablet = await resetToTablet(scene);
  await assert.rejects(scene.agent.callTool(RELATION_ID, "notify", { title: "x" }, { timeoutMs: 300 }), NoRecipientKey);
  await assert.rejects(scene.agent.acceptUserReset(RELATION_ID, { rootKeyId: KeyPair.generate().keyId }), SafetyNumberMismatch);
  await assert.rejects(scene.agent.callTool(RELATION_ID, "notify", { title: "x" }, { timeoutMs: 300 }), NoRecipientKey);
  assert.equal(await scene.agent.acceptUserReset(RELATION_ID, { rootKeyId: tablet.keys.keyId }), null); // no identity key: no number
  assert.equal((await scene.call("notify", { title: "to the tablet" }, { device: tablet, ...WAIT }))?.status, "ok");
  assert.deepEqual(callsSealedTo(scene).at(-1), new Set([tablet.keys.keyId]));
});

test("after bob's reset the owner accepts the safety number compared, never a root the server lists instead", async () => {
  const scene = await Scene.create((s) => s.server.giveIdentity(generatePrivateJwk()));
  assert.equal((await scene.call("notify", { title: "pins the laptop" }, WAIT))?.status, "ok");
  const before = await scene.agent.safetyNumber(RELATION_ID);
  const tablet = await resetToTablet(scene);
  const compared = await scene.agent.pendingSafetyNumber(RELATION_ID);
  assert.ok(compared !== null && compared !== before);
  assert.equal((await tablet.relation(RELATION_ID)).safetyNumber, compared); // what bob's new device shows
  const mallory = KeyPair.generate(); // between the comparison and the accept, the server lists mallory's root instead
  const tabletRow = scene.server.devices.pop();
  scene.server.publishDevice("mallory", mallory);
  await assert.rejects(scene.agent.acceptUserReset(RELATION_ID, { safetyNumber: compared }), SafetyNumberMismatch);
  await assert.rejects(scene.agent.callTool(RELATION_ID, "notify", { title: "x" }, { timeoutMs: 300 }), NoRecipientKey);
  scene.server.devices.splice(0, 1, tabletRow);
  assert.equal(await scene.agent.acceptUserReset(RELATION_ID, { safetyNumber: compared.replace(/ /g, "") }), compared);
  assert.equal(await scene.agent.safetyNumber(RELATION_ID), compared);
  assert.equal((await scene.call("notify", { title: "to the tablet" }, { device: tablet, ...WAIT }))?.status, "ok");
  assert.deepEqual(callsSealedTo(scene).at(-1), new Set([tablet.keys.keyId]));
});

// --- a relation's agent (issue 23, hole 6) -------------------------------------------------------

const RELATION_B = "7d1f4f0e-1111-4a4a-9b9b-00000000000b";
const AGENT_B = "7d1f4f0e-2222-4a4a-9b9b-00000000000b";

/** Bob also has a relation B with mallory's agent (agent B, key `mallory`), whose manifest is a byte copy of alice's. */
class WithMallorysRelation extends FakeServer {
  constructor(readonly mallory: KeyPair) {
    super();
  }

  override handle(party: string, method: string, path: string, body: any): HttpResponse {
    if (path === `/agents/${AGENT_B}`) {
      const response = super.handle(party, method, `/agents/${AGENT_ID}`, body);
      return { ...response, body: { ...(response.body as object), agent_id: AGENT_B } };
    }
    if (!path.includes(RELATION_B)) return super.handle(party, method, path, body);
    const response = super.handle(party, method, path.replace(RELATION_B, RELATION_ID), body);
    const answer: any = { ...(response.body as object), relation_id: RELATION_B };
    if (path.endsWith("/keys")) answer.agent = { agent_id: AGENT_B, keys: [{ ...this.mallory.public.asApi(), key_id: this.mallory.keyId }] };
    else answer.agent_id = AGENT_B;
    return { ...response, body: answer };
  }
}

/** The lie: relation B's agent is alice's (in the relation and in its key listing). */
const presentedAsAlices = (body: any): any => {
  if ("agent" in body) body.agent.agent_id = AGENT_ID;
  else body.agent_id = AGENT_ID;
  return body;
};

async function malloryScene(): Promise<[Scene, KeyPair]> {
  const mallory = KeyPair.generate();
  const scene = await Scene.create();
  const server = new WithMallorysRelation(mallory);
  [server.devices, server.agentKeys] = [scene.server.devices, scene.server.agentKeys];
  (scene as any).server = server;
  (scene.userSide as any).inner = server.transport("user");
  (scene.agentSide as any).inner = server.transport("agent");
  return [scene, mallory];
}

/** A read_file call signed by mallory's key in relation B, under alice's manifest. */
function callInB(scene: Scene, mallory: KeyPair, callId: string): any {
  const call = scene.toolCall("read_file", callId, { path: "/etc/shadow" }, { expires_at: scene.nowMs + 60_000, timeout_ms: 5000 });
  const payload = seal(call, { sender: mallory, recipients: [Recipient.of(scene.device.keys.public)], relationId: RELATION_B,
    direction: AGENT_TO_USER, nowMs: scene.nowMs });
  return { message_id: `b-${callId}`, relation_id: RELATION_B, sender: "agent", msg_subtype: "artifact_tool_call",
    content_type: "application/json", payload };
}

test("another agent's relation presented as alice's runs nothing in the window bob opened for alice: untrusted_sender", async () => {
  const [scene, mallory] = await malloryScene();
  assert.equal((await scene.call("read_file", { path: "notes.txt" }, WAIT))?.status, "ok"); // bob allows alice for 24 h
  assert.equal(scene.asked.length, 1);
  scene.userSide.lie(`/h2a/relations/${RELATION_B}`, presentedAsAlices);
  scene.userSide.lie(`/h2a/relations/${RELATION_B}/keys`, presentedAsAlices);
  assert.equal(await scene.device.handleMessage(RELATION_B, callInB(scene, mallory, "call-b")), null);
  assert.deepEqual(scene.ran, [["read_file", { path: "notes.txt" }]]);
  assert.equal(scene.asked.length, 1);
  assert.deepEqual(await scene.refusals(), ["untrusted_sender"]);
});

test("a relation first seen with one agent is refused when presented as another: agent_changed", async () => {
  const [scene, mallory] = await malloryScene();
  assert.notEqual(await scene.device.handleMessage(RELATION_B, callInB(scene, mallory, "call-b1")), null); // as B's
  scene.userSide.lie(`/h2a/relations/${RELATION_B}`, presentedAsAlices);
  scene.userSide.lie(`/h2a/relations/${RELATION_B}/keys`, presentedAsAlices);
  scene.device.keydir.forget();
  (scene.device as any).cachedViews.clear();
  assert.equal(await scene.device.handleMessage(RELATION_B, callInB(scene, mallory, "call-b2")), null);
  assert.deepEqual(await scene.refusals(), ["agent_changed"]);
  assert.equal(scene.ran.length, 1); // B's own call, asked and run as B's; never again as alice's
});

