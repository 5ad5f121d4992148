// The lying server (SPEC §9's threat model) against the TypeScript Device and Agent: each
// attack tests/sdk_trust/ plays against the Python SDK, refused with the same stable reason.
import { test } from "node:test";
import assert from "node:assert/strict";
import { canonicalHash } from "./canonical.js";
import { signConsent } from "./consentStatements.js";
import { KeyPair } from "./crypto.js";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openCopy } from "./envelope.js";
import { ConsentUnverified, ResultInvalid } from "./errors.js";
import { fileStore } from "./node/fileStore.js";
import { generatePrivateJwk, ed25519PublicJwk, type PrivateJwk } from "./jose.js";
import { ALL_SCOPES, AGENT_ID, manifest, RELATION_ID, USER, widenedPath } from "./testing/fakeServer.js";
import { addAgentKey, addDevice, relationSays, serveManifest, settleRelation } from "./testing/lying.js";
import { Scene, statuses, T0_MS } from "./testing/scene.js";
import { replyKeyId, USER_TO_AGENT } from "./wire.js";

const toolCall = (scene: Scene, name: string, callId: string, args: object = { title: "forged" }): any => ({
  subtype: "tool_call", call_id: callId, tool_name: name, arguments: args, permission_scope: name === "notify" ? "notification:send" : "location:read",
  timeout_ms: 100, manifest_version: 1, manifest_hash: canonicalHash(manifest()),
  reply_key: Buffer.from(KeyPair.generate().public.x25519).toString("base64"), expires_at: scene.nowMs + 30_000,
});

test("a call through an honest server runs, and a low scope runs unprompted", async () => {
  const scene = await Scene.create();
  assert.deepEqual(statuses(await scene.call("notify", { title: "hello" })), [["ok", null]]);
  assert.deepEqual(scene.ran, [["notify", { title: "hello" }]]);
  assert.deepEqual(scene.asked, []);
});

test("an agent key the server injects is never trusted: nothing runs, and it is answered a denial only", async () => {
  const scene = await Scene.create();
  await scene.call("notify", { title: "hello" }); // the agent's keys are pinned
  const mallory = KeyPair.generate();
  scene.userSide.lie("/keys", addAgentKey({ ...mallory.public.asApi(), key_id: mallory.keyId }));
  assert.equal(await scene.device.handleFrame(scene.forgeCall(toolCall(scene, "notify", "forged"), mallory)), null);
  assert.equal(await scene.device.handleFrame(scene.forgeCall(toolCall(scene, "locate", "forged-2"), mallory)), null);
  assert.deepEqual(scene.ran, [["notify", { title: "hello" }]]);
  // For an agent without an identity key, an injected key looks like a second runtime's (as in the Python SDK).
  assert.deepEqual(await scene.refusals(), ["runtime_key_unpinned", "runtime_key_unpinned"]);
});

test("a second runtime's call is refused at once with runtime_key_unpinned, sealed to its reply key, answered once", async () => {
  const scene = await Scene.create();
  await scene.call("notify", { title: "hello" }); // bob's device pins the first runtime's key
  const second = KeyPair.generate();
  scene.server.publishAgent(second); // the same agent's second runtime, from another state directory
  const replyKey = KeyPair.generate();
  const call = { ...toolCall(scene, "notify", "second-1"), reply_key: Buffer.from(replyKey.public.x25519).toString("base64") };
  const frame = scene.forgeCall(call, second);
  const answered = scene.server.messages.length;
  assert.equal(await scene.device.handleFrame(frame), null);
  const reply = scene.server.messages.at(-1);
  assert.equal(scene.server.messages.length, answered + 1);
  const opened = openCopy(reply.payload, { recipientKeyId: replyKeyId(replyKey.public.x25519), recipientX25519: replyKey.boxKey,
    senders: new Map([[scene.device.keys.keyId, scene.device.keys.public]]), relationId: RELATION_ID, direction: USER_TO_AGENT });
  assert.deepEqual(opened.artifact, { subtype: "tool_response", call_id: "second-1", status: "denied", reason: "runtime_key_unpinned" });
  assert.deepEqual(scene.ran, [["notify", { title: "hello" }]]);
  assert.deepEqual(scene.asked.length, 0);

  await scene.startDevice().handleFrame(frame); // delivered again, to a restarted device: not answered twice
  assert.equal(scene.server.messages.length, answered + 1);
});

test("a device the server injects is never sealed to (a second root, or one approved by nobody trusted)", async () => {
  const scene = await Scene.create();
  await scene.call("notify", { title: "a" }); // the agent pins bob's root
  const evil = KeyPair.generate();
  scene.agentSide.lie("/keys", addDevice({ device_id: "evil", ...evil.public.asApi(), key_id: evil.keyId, approved_by_key_id: null, approval: null }));
  scene.agent.keydir.forget();
  assert.deepEqual(statuses(await scene.call("notify", { title: "b" })), [["ok", null]]);
  const copies = scene.server.messages.at(-2).payload.copies.map((c: any) => c.recipient_key_id);
  assert.deepEqual(copies, [scene.device.keys.keyId]);
});

test("a relation the server settles to hide a re-consent is still reauth_required for that tool only", async () => {
  const scene = await Scene.create();
  scene.server.publish(widenedPath(), ["filesystem:read"]);
  scene.userSide.lie(`/h2a/relations/${RELATION_ID}`, settleRelation);
  const widened = scene.runtime(widenedPath());
  const result = await scene.call("read_file", { path: ["/etc/passwd"] } as any, { agent: widened });
  const other = await scene.call("notify", { title: "still works" }, { agent: widened });
  assert.deepEqual(statuses(result, other), [["denied", "reauth_required"], ["ok", null]]);
  assert.deepEqual(scene.ran, [["notify", { title: "still works" }]]);
});

test("a manifest rewritten with a recomputed hash is manifest_unverified", async () => {
  const scene = await Scene.create();
  scene.userSide.lie(`/agents/${AGENT_ID}`, serveManifest((m) => {
    m.permission_scopes[2].sensitivity = "low"; // locate, unprompted
  }));
  assert.deepEqual(statuses(await scene.call("locate", {})), [["denied", "manifest_unverified"]]);
  assert.deepEqual(scene.ran, []);
  assert.deepEqual(scene.asked, []);
  assert.deepEqual(await scene.refusals(), ["manifest_unverified"]);
});

test("a version served again with another content is manifest_unverified", async () => {
  const scene = await Scene.create();
  await scene.call("notify", { title: "v1 seen" });
  scene.server.publish(widenedPath(), ["filesystem:read"]);
  scene.userSide.lie("/manifest/versions/1", (body) => ({ ...body, manifest: widenedPath(), hash: canonicalHash(widenedPath()) }));
  await scene.device.handleFrame(scene.server.relationFrame("h2a.relation_updated"));
  const result = await scene.call("notify", { title: "v2" }, { agent: scene.runtime(widenedPath()) });
  assert.deepEqual(statuses(result), [["denied", "manifest_unverified"]]);
});

test("a call replayed after a restart runs once: call_replayed", async () => {
  const scene = await Scene.create();
  assert.deepEqual(statuses(await scene.call("notify", { title: "once" })), [["ok", null]]);
  const restarted = scene.startDevice(); // the same store: the replay record persists
  assert.equal(await restarted.handleFrame(scene.server.frame(0)), null);
  assert.deepEqual(scene.ran, [["notify", { title: "once" }]]);
  assert.deepEqual(await scene.refusals(restarted), ["call_replayed"]);
});

test("a call the server delays past its expiry is never prompted: call_expired", async () => {
  const scene = await Scene.create();
  assert.equal(await scene.call("locate", {}, { deliverAfterMs: 400 }), null);
  assert.deepEqual(scene.asked, []);
  assert.deepEqual(scene.ran, []);
  assert.deepEqual(await scene.refusals(), ["call_expired"]);
});

test("a swapped identity is refused without a prompt: identity_changed", async () => {
  const identity = generatePrivateJwk();
  const scene = await Scene.create((s) => s.server.giveIdentity(identity));
  scene.server.publishAgent(scene.agent.keys); // vouched for by the identity (the earlier listing too)
  scene.server.agentKeys.splice(0, 1);
  assert.deepEqual(statuses(await scene.call("notify", { title: "hi" })), [["ok", null]]); // the identity is pinned
  const mallory: PrivateJwk = generatePrivateJwk();
  scene.userSide.lie(`/agents/${AGENT_ID}/identity`, (body) => ({ ...body, jwk: ed25519PublicJwk({ kty: "OKP", crv: "Ed25519", x: mallory.x }) }));
  scene.device.keydir.forget();
  await scene.device.handleFrame(scene.server.relationFrame("h2a.relation_updated"));
  assert.equal(await scene.call("locate", {}), null); // nothing is answered to an agent that is not believed
  assert.deepEqual(scene.ran, [["notify", { title: "hi" }]]);
  assert.deepEqual(scene.asked, []);
  assert.deepEqual(await scene.refusals(), ["identity_changed"]);
});

test("an acknowledged version 0 never lets a widened read_file run: manifest_unverified", async () => {
  const scene = await Scene.create();
  await scene.call("read_file", { path: "notes.txt" }); // an open medium window
  scene.server.publish(widenedPath(), ["filesystem:read"]);
  scene.userSide.lie(`/h2a/relations/${RELATION_ID}`, settleRelation);
  scene.userSide.lie(`/h2a/relations/${RELATION_ID}`, relationSays({ acknowledged_manifest_version: 0 }));
  await scene.device.handleFrame(scene.server.relationFrame("agent.manifest_updated"));
  (scene.device as any).cachedViews.clear();
  const result = await scene.call("read_file", { path: ["/etc/passwd"] } as any, { agent: scene.runtime(widenedPath()) });
  assert.deepEqual(statuses(result), [["denied", "manifest_unverified"]]);
  assert.deepEqual(scene.ran, [["read_file", { path: "notes.txt" }]]);
});

test("a relation seen revoked stays revoked when the server says it is live again: consent_unverified", async () => {
  const scene = await Scene.create();
  scene.server.status = "revoked";
  assert.deepEqual(statuses(await scene.call("notify", { title: "a" })), [["denied", "permission_revoked"]]);
  scene.server.status = "active";
  scene.device = scene.startDevice(); // restarted meanwhile
  assert.deepEqual(statuses(await scene.call("notify", { title: "b" })), [["denied", "consent_unverified"]]);
  assert.deepEqual(scene.ran, []);
});

test("a relation bob revoked with a signature never runs again", async () => {
  const scene = await Scene.create();
  const revoked = await scene.device.revoke(RELATION_ID);
  assert.equal(revoked.consent_statement.statement.revoked, true);
  scene.userSide.lie(`/h2a/relations/${RELATION_ID}`, relationSays({ status: "active", consent_statement: null }));
  assert.deepEqual(statuses(await scene.call("notify", { title: "after" })), [["denied", "consent_unverified"]]);
  assert.deepEqual(scene.ran, []);
});

test("a scope bob withdrew with a signature never runs when the server grants it again", async () => {
  const scene = await Scene.create();
  await scene.device.reconsent(RELATION_ID, ["filesystem:read", "location:read"]);
  scene.userSide.lie(`/h2a/relations/${RELATION_ID}`, relationSays({ granted_scopes: ALL_SCOPES, consent_statement: null }));
  const result = await scene.call("notify", { title: "restored" });
  const other = await scene.call("read_file", { path: "notes.txt" });
  assert.deepEqual(statuses(result, other), [["denied", "consent_unverified"], ["ok", null]]);
  assert.deepEqual(scene.asked.map((p) => p.toolName), ["read_file"]);
});

for (const lie of [{ grant_options: {} }, { grant_options: null }, { consent_statement: null, grant_options: {} }]) {
  test(`a once grant used stays used when the server keeps the grant and serves ${JSON.stringify(lie)}: scope_not_granted`, async () => {
    const scene = await Scene.create();
    await scene.device.reconsent(RELATION_ID, ALL_SCOPES, { grantOptions: { "notification:send": { once: true } } });
    scene.server.refusePatch = "VERSION_CONFLICT"; // the withdrawal does not reach the server
    assert.deepEqual(statuses(await scene.call("notify", { title: "once" })), [["ok", null]]);
    scene.userSide.lie(`/h2a/relations/${RELATION_ID}`, relationSays(lie));
    (scene.device as any).cachedViews.clear();
    assert.deepEqual(statuses(await scene.call("notify", { title: "twice" })), [["denied", "scope_not_granted"]]);
    assert.deepEqual(scene.ran, [["notify", { title: "once" }]]);
    assert.ok((await scene.device.audit.entries()).some((e) => e.status === "withdraw_failed" && e.scope === "notification:send"));
  });
}

test("a once grant withdrawn with a signature is scope_not_granted when the server serves the relation as before", async () => {
  const scene = await Scene.create();
  const before = await scene.device.reconsent(RELATION_ID, ALL_SCOPES, { grantOptions: { "notification:send": { once: true } } });
  assert.deepEqual(statuses(await scene.call("notify", { title: "once" })), [["ok", null]]);
  assert.ok(!scene.server.granted.includes("notification:send")); // withdrawn, signed
  scene.userSide.lie(`/h2a/relations/${RELATION_ID}`, () => before); // the relation and statement of before the call
  (scene.device as any).cachedViews.clear();
  assert.deepEqual(statuses(await scene.call("notify", { title: "twice" })), [["denied", "scope_not_granted"]]);
  assert.deepEqual(scene.ran, [["notify", { title: "once" }]]);
});

for (const shape of ["older statement", "malformed statement", "another agent's statement", "forged by a device bob does not trust"]) {
  test(`a consent statement ${shape} never restores a grant: consent_unverified`, async () => {
    const scene = await Scene.create();
    const older = (await scene.device.reconsent(RELATION_ID, ALL_SCOPES)).consent_statement;
    await scene.device.reconsent(RELATION_ID, ["filesystem:read"]);
    let served = JSON.parse(JSON.stringify(older));
    if (shape === "malformed statement") served.statement.granted_scopes = ["notification:send", "filesystem:read"]; // not sorted
    if (shape === "another agent's statement") {
      served = signConsent(scene.device.keys, { agentId: "another-agent", userId: USER, grantedScopes: ALL_SCOPES,
        acknowledgedManifestVersion: 1, acknowledgedManifestHash: canonicalHash(manifest()), seq: 2 ** 52, ts: T0_MS });
    }
    if (shape === "forged by a device bob does not trust") {
      served = signConsent(KeyPair.generate(), { agentId: AGENT_ID, userId: USER, grantedScopes: ALL_SCOPES,
        acknowledgedManifestVersion: 1, acknowledgedManifestHash: canonicalHash(manifest()), seq: 2 ** 52, ts: T0_MS });
    }
    scene.userSide.lie(`/h2a/relations/${RELATION_ID}`, relationSays({ granted_scopes: ALL_SCOPES, consent_statement: served }));
    (scene.device as any).cachedViews.clear();
    assert.deepEqual(statuses(await scene.call("notify", { title: "restored" })), [["denied", "consent_unverified"]]);
    assert.deepEqual(scene.ran, []);
    if (shape !== "older statement") assert.ok((await scene.refusals()).includes("consent_unverified"));
  });
}

test("the agent refuses locally a tool the newest verified statement does not give", async () => {
  const scene = await Scene.create();
  await scene.call("read_file", { path: "a" }); // the agent pins bob's devices
  const relation = await scene.device.reconsent(RELATION_ID, ["filesystem:read"]);
  await scene.agent.handleFrame({ id: 1, type: "h2a.relation_updated", data: { relation } });
  const sent = scene.server.messages.length;
  await assert.rejects(scene.agent.callTool(RELATION_ID, "notify", { title: "x" }), ConsentUnverified);
  assert.equal(scene.server.messages.length, sent);
});

test("the pending call, and with it the reply key's private half, is dropped once the call ends", async () => {
  const scene = await Scene.create();
  await scene.call("notify", { title: "x" });
  assert.equal(scene.agent.pendingCalls, 0);
  assert.equal(await scene.call("locate", {}, { deliverAfterMs: 400 }), null); // timed out
  assert.equal(scene.agent.pendingCalls, 0);
});

// --- the rest of tests/sdk_trust/test_lying_server.py and test_live_server.py -------------------------

test("a call replayed after a restart runs once, whether the server sends the old message again or posts its payload anew: call_replayed", async () => {
  const scene = await Scene.create();
  assert.deepEqual(statuses(await scene.call("notify", { title: "once" })), [["ok", null]]);
  const stored = scene.server.messages[0];
  const restarted = scene.startDevice();
  const replays = [scene.server.frame(0), scene.server.post("agent", "artifact_tool_call", stored.payload)];
  for (const frame of replays) assert.equal(await restarted.handleFrame(frame), null);
  assert.deepEqual(scene.ran, [["notify", { title: "once" }]]);
  assert.deepEqual(await scene.refusals(restarted), ["call_replayed", "call_replayed"]);
});

test("a device restarted on its file store refuses the replay: call_replayed", async () => {
  const dir = await mkdtemp(join(tmpdir(), "hashee-device-"));
  try {
    const scene = await Scene.create();
    scene.device = scene.startDevice(fileStore(dir)); // what a Node device keeps on disk
    await scene.device.init();
    scene.server.devices.length = 0;
    scene.server.publishDevice("laptop", scene.device.keys);
    assert.deepEqual(statuses(await scene.call("notify", { title: "once" })), [["ok", null]]);
    const restarted = scene.startDevice(fileStore(dir));
    assert.equal(await restarted.handleFrame(scene.server.frame(0)), null);
    assert.deepEqual(scene.ran, [["notify", { title: "once" }]]);
    assert.deepEqual(await scene.refusals(restarted), ["call_replayed"]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("a preset scope never falls below its platform level, though the server let the manifest through", async () => {
  const scene = await Scene.create();
  const lowLocation = manifest();
  lowLocation.permission_scopes[2].sensitivity = "low";
  scene.server.versions[0] = lowLocation;
  scene.agent = scene.runtime(lowLocation);
  assert.deepEqual(statuses(await scene.call("locate", {})), [["ok", null]]);
  assert.deepEqual(scene.asked.map((p) => [p.toolName, p.sensitivity]), [["locate", "high"]]);
});

// The TypeScript device has no diff engine yet (src/views.ts): any change of a scope's tools or
// entry is pending re-consent — stricter than Python, where lowering a level or widening a
// bound is not breaking and the floors of what bob consented to hold instead (contract.test.ts
// tests those floors in decide()). Either way nothing runs that bob did not consent to.
test("a scope lowered since bob consented never runs below his level: reauth_required here (stricter than Python's floor)", async () => {
  const scene = await Scene.create();
  const v1 = manifest();
  v1.permission_scopes.push({ id: "calendar:read", label_i18n_key: "agent.scope.calendar.label", label_fallback: "Calendar", sensitivity: "high" });
  v1.tools.push({ name: "agenda", description_i18n_key: "agent.cap.agenda.description", input_schema: { type: "object", properties: {} },
    permission_scope: "calendar:read" });
  const v2 = JSON.parse(JSON.stringify(v1));
  v2.permission_scopes[3].sensitivity = "low"; // lowering is not breaking
  scene.server.versions[0] = v1;
  scene.server.granted.push("calendar:read");
  scene.server.publish(v2);
  assert.deepEqual(statuses(await scene.call("agenda", {}, { agent: scene.runtime(v2) })), [["denied", "reauth_required"]]);
  assert.deepEqual(scene.asked, []); // never silently at low
  assert.deepEqual(scene.ran, []);
});

test("arguments beyond the schema bob consented to never run: reauth_required here (stricter than Python's TOOL_INVALID_ARGUMENTS)", async () => {
  const scene = await Scene.create();
  const longer = manifest();
  longer.tools[0].input_schema.properties.path.maxLength = 4096; // a widening: not breaking
  scene.server.publish(longer);
  assert.deepEqual(statuses(await scene.call("read_file", { path: "x".repeat(2000) }, { agent: scene.runtime(longer) })),
    [["denied", "reauth_required"]]);
  assert.deepEqual(scene.ran, []);
});

test("a raised sensitivity is reauth_required even when the server hides it", async () => {
  const scene = await Scene.create();
  const raised = manifest();
  raised.permission_scopes[1].sensitivity = "medium"; // notification:send low → medium
  scene.server.publish(raised, ["notification:send"]);
  scene.userSide.lie(`/h2a/relations/${RELATION_ID}`, settleRelation);
  assert.deepEqual(statuses(await scene.call("notify", { title: "hi" }, { agent: scene.runtime(raised) })), [["denied", "reauth_required"]]);
  assert.deepEqual(scene.ran, []);
});

test("a call under another manifest than the published one is manifest_unverified", async () => {
  const scene = await Scene.create();
  const call = scene.toolCall("notify", "call_other", { title: "a version 1 bob never saw" }, { manifest_hash: "0".repeat(64) });
  assert.notEqual(await scene.device.handleFrame(scene.forgeCall(call, scene.agent.keys)), null);
  assert.deepEqual(scene.ran, []);
  assert.deepEqual(await scene.refusals(), ["manifest_unverified"]);
});

test("a result that breaks the output schema never reaches the agent: TOOL_PLATFORM_ERROR, or ResultInvalid from a device that skips the check", async () => {
  const scene = await Scene.create();
  const withOutput = manifest();
  withOutput.tools[0].output_schema = { type: "object", required: ["text"], properties: { text: { type: "string", maxLength: 4 } } };
  scene.server.versions[0] = withOutput;
  scene.agent = scene.runtime(withOutput);
  const honest = await scene.call("read_file", { path: "/etc/passwd" });
  const execute = (scene.device as any).execute.bind(scene.device); // a device that skips its result check
  (scene.device as any).execute = (view: unknown, callId: string, tool: any, args: unknown) => execute(view, callId, { ...tool, output: null }, args);
  const refused = await scene.call("read_file", { path: "/etc/passwd" }).then(() => null, (error: unknown) => error);
  assert.deepEqual(statuses(honest), [["error", "TOOL_PLATFORM_ERROR"]]);
  assert.ok(refused instanceof ResultInvalid);
  assert.deepEqual(refused.details.map((d) => [d.path, d.code]), [["/result/text", "TOO_LONG"]]);
  assert.ok(!`${refused.message} ${JSON.stringify(refused.details)}`.includes("hello")); // the result is never echoed
  assert.equal(scene.ran.length, 2); // both ran; neither result reached the agent's caller
});
