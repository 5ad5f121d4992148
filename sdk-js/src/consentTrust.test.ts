// What bob consented to holds against the server's answers (tests/sdk_trust/test_consent_trust.py
// in TypeScript; SPEC §9.6 and issue 23 holes 1, 4 and 5): every attack ends with the tool never
// run and a stable reason bob sees (an audit entry) or the agent gets (a denial, or its typed error).
import { test } from "node:test";
import assert from "node:assert/strict";
import { canonicalHash } from "./canonical.js";
import { signConsent } from "./consentStatements.js";
import { KeyPair } from "./crypto.js";
import { ConsentUnverified } from "./errors.js";
import { generatePrivateJwk, signManifest } from "./jose.js";
import { AGENT_ID, ALL_SCOPES, manifest, RELATION_ID, USER, widenedPath } from "./testing/fakeServer.js";
import { relationSays, settleRelation, type Rewrite } from "./testing/lying.js";
import { Scene, statuses, T0_MS } from "./testing/scene.js";

const PASSWD = ["/etc/passwd", "/etc/shadow"] as any;
const WAIT = { timeoutMs: 3000, untilAnswered: true };
const ALICE = generatePrivateJwk();
const EARLIER = generatePrivateJwk();
const MANIFEST_HASH = canonicalHash(manifest());
const relation = `/h2a/relations/${RELATION_ID}`;
const forget = (scene: Scene): void => (scene.device as any).cachedViews.clear();

/** Versions of the manifest whose notification:send has these sensitivities, in turn. */
function notifyLevels(...levels: string[]): any[] {
  return levels.map((level, index) => {
    const version = manifest();
    version.agent_version = `1.0.${index}`;
    version.permission_scopes[1].sensitivity = level;
    return version;
  });
}

/** `GET /h2a/relations/{id}` drops these fields. */
const relationDrops = (...names: string[]): Rewrite => (body) => {
  for (const name of names) delete body[name];
  return body;
};

// --- hole 1: an acknowledged version of any other shape than the one bob gave ----------------------

const ACK_LIES: Record<string, (scene: Scene) => Rewrite> = {
  dropped: () => relationDrops("acknowledged_manifest_version", "acknowledged_manifest_hash"),
  "0": () => relationSays({ acknowledged_manifest_version: 0, acknowledged_manifest_hash: null }),
  null: () => relationSays({ acknowledged_manifest_version: null, acknowledged_manifest_hash: null }),
  empty: () => relationSays({ acknowledged_manifest_version: "", acknowledged_manifest_hash: "" }),
  "not an int": () => relationSays({ acknowledged_manifest_version: 2.5 }),
  "a string": () => relationSays({ acknowledged_manifest_version: "2" }),
  older: (scene) => relationSays({ acknowledged_manifest_version: 1, acknowledged_manifest_hash: canonicalHash(scene.server.versions[0]) }),
  "another agent's": () => relationSays({ acknowledged_manifest_hash: MANIFEST_HASH }),
};

for (const [lie, rewrite] of Object.entries(ACK_LIES)) {
  test(`a scope consented to at medium never runs silently, whatever the acknowledgement says (${lie}): manifest_unverified`, async () => {
    // v1 low, v2 medium (bob consented again, signed), v3 back to low: lowering is not breaking,
    // so only the level bob consented at (medium) keeps notify from running unasked.
    const scene = await Scene.create();
    const [low, medium, lowered] = notifyLevels("low", "medium", "low");
    scene.server.versions = [low];
    scene.server.publish(medium, ["notification:send"]);
    await scene.device.reconsent(RELATION_ID, ALL_SCOPES);
    await scene.device.relation(RELATION_ID); // the device pins bob's acknowledgement of v2
    scene.server.publish(lowered);
    scene.userSide.lie(relation, rewrite(scene));
    forget(scene);
    const result = await scene.call("notify", { title: "silently" }, { agent: scene.runtime(lowered), ...WAIT });
    assert.deepEqual(statuses(result), [["denied", "manifest_unverified"]]);
    assert.deepEqual(scene.ran, []);
    assert.deepEqual(scene.asked, []);
    assert.deepEqual(await scene.refusals(), ["manifest_unverified"]);
  });
}

// --- hole 4: withdrawn consent given back ------------------------------------------------------------

test("a scope bob withdrew on the web and the server lists again is asked on his device", async () => {
  const scene = await Scene.create();
  await scene.call("notify", { title: "granted" }, WAIT); // low: silent, and confirmed on the device
  scene.server.granted = ["filesystem:read", "location:read"]; // withdrawn on the web
  await scene.device.relation(RELATION_ID, true);
  scene.server.granted = [...ALL_SCOPES]; // the database lists it again
  forget(scene);
  scene.answer = "deny";
  assert.deepEqual(statuses(await scene.call("notify", { title: "restored" }, WAIT)), [["denied", "user_refused"]]);
  assert.deepEqual(scene.ran, [["notify", { title: "granted" }]]);
  assert.deepEqual(scene.asked.map((p) => [p.toolName, p.newlyGranted]), [["notify", true]]);
});

// --- hole 5: earlier versions of an identified agent ---------------------------------------------------

for (const v1Signature of ["none", "an earlier key"]) {
  test(`a version not signed by the pinned identity is never taken as what bob acknowledged (${v1Signature})`, async () => {
    // The device's first look comes after a breaking change. The server serves "version 1" with
    // the widened content (hash recomputed), unsigned or signed by another key, and hides the
    // pending re-consent: nothing would look breaking.
    const scene = await Scene.create((s) => s.server.giveIdentity(ALICE));
    scene.server.publish(widenedPath(), ["filesystem:read"]);
    scene.userSide.lie("/manifest/versions/1", (body) => ({ ...body, manifest: widenedPath(), hash: canonicalHash(widenedPath()),
      capability_manifest_signature: v1Signature === "an earlier key" ? signManifest(widenedPath(), EARLIER) : null }));
    scene.userSide.lie(relation, settleRelation);
    scene.userSide.lie(relation, relationSays({ acknowledged_manifest_hash: canonicalHash(widenedPath()) }));
    const result = await scene.call("read_file", { path: PASSWD }, { agent: scene.runtime(widenedPath()), ...WAIT });
    assert.deepEqual(statuses(result), [["denied", "manifest_unverified"]]);
    assert.deepEqual(scene.ran, []);
    assert.deepEqual(scene.asked, []);
  });
}

test("a version the device verified before a rotation is still believed", async () => {
  const scene = await Scene.create((s) => s.server.giveIdentity(ALICE));
  scene.server.publish(notifyLevels("low")[0]);
  await scene.device.reconsent(RELATION_ID, ALL_SCOPES);
  await scene.device.relation(RELATION_ID); // v2, signed by alice, pinned as acknowledged
  scene.server.publish(notifyLevels("low", "low")[1]); // not breaking: v2 stays acknowledged
  scene.server.signatures.set(2, signManifest(scene.server.versions[1], EARLIER)); // as if rotated since
  forget(scene);
  const result = await scene.call("notify", { title: "hi" }, { agent: scene.runtime(scene.server.manifest), ...WAIT });
  assert.deepEqual(statuses(result), [["ok", null]]);
});

// --- SPEC §9.6: consent signed on the device ---------------------------------------------------------

test("bob grants with a statement signed on his device, and the call runs", async () => {
  const scene = await Scene.create();
  const granted = await scene.device.grant(AGENT_ID, ["notification:send"]);
  const result = await scene.call("notify", { title: "hi" }, WAIT);
  const statement = granted.consent_statement.statement;
  assert.deepEqual([statement.user_id, statement.granted_scopes, statement.device_key_id], [USER, ["notification:send"], scene.device.keys.keyId]);
  assert.equal(statement.acknowledged_manifest_hash, MANIFEST_HASH);
  assert.ok(statement.seq >= T0_MS);
  assert.deepEqual(statuses(result), [["ok", null]]);
});

test("each statement bob signs has a higher seq", async () => {
  const scene = await Scene.create();
  const first = (await scene.device.reconsent(RELATION_ID, ALL_SCOPES)).consent_statement.statement.seq;
  const second = (await scene.device.reconsent(RELATION_ID, ["filesystem:read"])).consent_statement.statement.seq;
  assert.ok(second > first);
});

test("a statement signed by a device bob does not trust is ignored and in his audit, then the call: consent_unverified twice", async () => {
  const scene = await Scene.create();
  await scene.device.reconsent(RELATION_ID, ["filesystem:read"]);
  const forged = signConsent(KeyPair.generate(), { agentId: AGENT_ID, userId: USER, grantedScopes: ALL_SCOPES,
    acknowledgedManifestVersion: 1, acknowledgedManifestHash: MANIFEST_HASH, seq: 2 ** 52, ts: T0_MS });
  scene.userSide.lie(relation, relationSays({ granted_scopes: ALL_SCOPES, consent_statement: forged }));
  forget(scene);
  assert.deepEqual(statuses(await scene.call("notify", { title: "forged" }, WAIT)), [["denied", "consent_unverified"]]);
  assert.deepEqual(scene.ran, []);
  assert.deepEqual(await scene.refusals(), ["consent_unverified", "consent_unverified"]); // the statement, then the call
});

test("a re-consent not signed after a signed one is not believed for the changed tool: consent_unverified", async () => {
  const scene = await Scene.create();
  await scene.device.reconsent(RELATION_ID, ALL_SCOPES);
  scene.server.publish(widenedPath(), ["filesystem:read"]);
  [scene.server.pending, scene.server.status, scene.server.acknowledged] = [[], "active", 2]; // on the web, unsigned
  scene.server.consentStatement = null;
  forget(scene);
  const v2 = scene.runtime(widenedPath());
  const result = await scene.call("read_file", { path: PASSWD }, { agent: v2, ...WAIT });
  const other = await scene.call("notify", { title: "still works" }, { agent: v2, ...WAIT });
  assert.deepEqual(statuses(result, other), [["denied", "consent_unverified"], ["ok", null]]);
  assert.deepEqual(scene.ran, [["notify", { title: "still works" }]]);
});

test("a statement that arrives in an event holds though the server drops it later: consent_unverified", async () => {
  const scene = await Scene.create();
  scene.server.consentStatement = signConsent(scene.device.keys, { agentId: AGENT_ID, userId: USER, grantedScopes: ["filesystem:read"],
    acknowledgedManifestVersion: 1, acknowledgedManifestHash: MANIFEST_HASH, seq: T0_MS, ts: T0_MS });
  await scene.device.handleFrame(scene.server.relationFrame("h2a.relation_updated"));
  scene.server.consentStatement = null;
  assert.deepEqual(statuses(await scene.call("notify", { title: "unsigned" }, WAIT)), [["denied", "consent_unverified"]]);
});

test("the agent refuses a tool changed since the version bob signed for, before sealing it: ConsentUnverified", async () => {
  const scene = await Scene.create();
  await scene.call("notify", { title: "first" }, WAIT);
  await scene.device.reconsent(RELATION_ID, ALL_SCOPES);
  await scene.agent.handleFrame(scene.server.relationFrame("h2a.relation_updated"));
  scene.server.publish(widenedPath(), ["filesystem:read"]);
  const v2 = scene.runtime(widenedPath(), scene.agent.state.store); // the same runtime, upgraded: what it verified is kept
  const sent = scene.server.messages.length;
  await assert.rejects(v2.callTool(RELATION_ID, "read_file", { path: PASSWD }, { timeoutMs: 300 }), ConsentUnverified);
  assert.equal(scene.server.messages.length, sent);
  await v2.checkConsent(RELATION_ID, "notification:send", 2); // unchanged since: still given
});

test("a statement not signed by a trusted device of bob is not believed by the agent", async () => {
  const scene = await Scene.create();
  await scene.call("notify", { title: "first" }, WAIT);
  const frame = scene.server.relationFrame("h2a.relation_updated");
  frame.data.relation.consent_statement = signConsent(KeyPair.generate(), { agentId: AGENT_ID, userId: USER, grantedScopes: [],
    acknowledgedManifestVersion: 1, acknowledgedManifestHash: MANIFEST_HASH, seq: T0_MS, ts: T0_MS, revoked: true });
  await scene.agent.handleFrame(frame);
  assert.equal(await scene.agent.consents.newest(RELATION_ID), null);
});
