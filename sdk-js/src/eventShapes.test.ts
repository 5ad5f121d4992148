// Every event frame the TypeScript SDK reads, rewritten by shape (src/testing/shapes.ts; the
// Python harness is the events part of tests/sdk_trust/test_lie_shapes.py): each place of each
// frame — a relation event and the signed consent statement in it, a device revoked, a user's
// reset, a call for bob's device, bob's answer for the agent — is dropped, nulled, zeroed,
// emptied, swapped for another party's or replayed from the frame the server sent before.
// Whatever the lie, neither the Device nor the Agent throws, nothing runs that the honest state
// would not, what bob withdrew (a scope, the relation, a device) stays withdrawn, and what is
// refused is told with a stable reason: on the device in its audit log (the activity bob reads),
// on the agent as the typed error its caller gets. One test per event; the lies run inside it.
import { test } from "node:test";
import assert from "node:assert/strict";
import type { ToolAnswer } from "./agent.js";
import { canonicalHash, type JsonObject } from "./canonical.js";
import { KeyPair } from "./crypto.js";
import { ApiError, ConsentUnverified, DENIAL_REASONS, NoRecipientKey, REFUSAL_REASONS, TOOL_ERROR_CODES } from "./errors.js";
import type { EventFrame } from "./rest.js";
import { AGENT_ID, ALL_SCOPES, listed, manifest, RELATION_ID, widenedPath } from "./testing/fakeServer.js";
import { relationSays, settleRelation } from "./testing/lying.js";
import { ed25519PublicJwk, generatePrivateJwk, jwkThumbprint, type PrivateJwk } from "./jose.js";
import { pool, quietly } from "./testing/pool.js";
import { type LieKind, lies, MISSING, type Pointer } from "./testing/shapes.js";
import { Scene } from "./testing/scene.js";

const STABLE = new Set<string>([...DENIAL_REASONS, ...REFUSAL_REASONS, ...TOOL_ERROR_CODES]);
const AT_ONCE = 8; // scenes in flight, while others wait on their fake server
// A call's timeout is no measure of whether an answer comes: under load the event loop can stall
// for seconds while other scenes run. Calls wait long; a call nothing will answer is ended by
// stopping the agent once the check is done (untilAnswered: null as soon as the device sent nothing).
const IN_FLIGHT_MS = 20_000;
const WAIT = { timeoutMs: IN_FLIGHT_MS, untilAnswered: true };
const AT = "2026-01-01T00:00:00Z";
const ALICE = generatePrivateJwk();
const MALLORY_IDENTITY = generatePrivateJwk();
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const json = (value: unknown): string => JSON.stringify(value ?? null);
type Settled = { a: ToolAnswer } | { e: unknown };
/** The lies that made bob's device drop the agent's call unanswered (see the report at the end). */
const dropped: string[] = [];

/** Bob's state reached honestly: the frame the server sends for it, the frame of the same kind
 * it sent before (what a replay serves), and what the case's check needs. */
interface Staged {
  readonly scene: Scene;
  readonly honest: EventFrame;
  readonly older: unknown;
  readonly answer?: Promise<Settled>;
  readonly sent?: number;
  readonly row?: any;
  readonly phone?: KeyPair;
}

interface EventCase {
  stage(): Promise<Staged>;
  /** Deliver `lied` (the lie `told`) to the side(s) that read it; what went wrong (empty: the SDK held). */
  check(staged: Staged, lied: unknown, told?: string): Promise<string[]>;
}

/** Hand `frame` to one side: whatever it is, it never throws (but `allowed`). */
async function deliver(side: { handleFrame(frame: EventFrame): Promise<unknown> }, name: string, frame: unknown,
  allowed?: new (...a: any[]) => Error): Promise<string[]> {
  try {
    await side.handleFrame(frame as EventFrame);
    return [];
  } catch (error) {
    if (allowed !== undefined && error instanceof allowed) return [];
    return [`the ${name} threw ${(error as Error).name}: ${(error as Error).message}`];
  }
}

/** The agent refuses before sealing anything, with `refusal` (what its caller is told). */
async function agentRefuses(scene: Scene, tool: string, args: JsonObject, refusal: new (...a: any[]) => Error): Promise<string[]> {
  const sent = scene.server.messages.length;
  try {
    const answer = await scene.agent.callTool(RELATION_ID, tool, args, { timeoutMs: 300 });
    return [`the agent's ${tool} was answered ${answer.status}`];
  } catch (error) {
    if (!(error instanceof refusal)) return [`the agent's ${tool} ended with ${(error as Error).name}, not ${refusal.name}`];
    return scene.server.messages.length === sent ? [] : [`the agent sealed ${tool}`];
  }
}

/** A call signed by the agent's own key, straight to bob's device (the agent's own check set
 * aside): the device refuses it too, says why in its audit log, and runs nothing. */
async function deviceRefuses(scene: Scene, tool: string, args: JsonObject): Promise<string[]> {
  const ranBefore = scene.ran.length;
  const toldBefore = (await scene.refusals()).length;
  const call = { subtype: "tool_call", call_id: `forged-${tool}`, tool_name: tool, arguments: args,
    permission_scope: tool === "notify" ? "notification:send" : "location:read", timeout_ms: 100, manifest_version: 1,
    manifest_hash: canonicalHash(manifest()), reply_key: KeyPair.generate().public.asApi().x25519_public, expires_at: scene.nowMs + 30_000 };
  let response: JsonObject | null;
  try {
    response = await scene.device.handleFrame(scene.forgeCall(call, scene.agent.keys));
  } catch (error) {
    return [`the device threw ${(error as Error).name} on ${tool}`];
  }
  const wrong: string[] = [];
  if (scene.ran.length > ranBefore) wrong.push(`the device ran ${json(scene.ran.slice(ranBefore))}`);
  if (response !== null && (response["status"] === "ok" || !STABLE.has(String(response["reason"])))) {
    wrong.push(`the device answered ${response["status"]} ${response["reason"]}`);
  }
  const told = (await scene.refusals()).slice(toldBefore);
  if (told.length === 0 || told.some((r) => r === null || !STABLE.has(r))) wrong.push(`the device's audit says ${json(told)}`);
  return wrong;
}

/** The statement the frame carries, when it is neither the one bob signed last nor the one before. */
function forgedStatement(lied: unknown, staged: Staged): boolean {
  const served = (lied as any)?.data?.relation?.consent_statement;
  const signed = (frame: unknown): string => json((frame as any)?.data?.relation?.consent_statement);
  return served !== null && served !== undefined && json(served) !== signed(staged.honest) && json(served) !== signed(staged.older);
}

/** Both sides read a relation event; bob's newest signed statement is what each still believes,
 * a statement bob did not sign is reported on his device, and `tool` is refused on both sides. */
async function relationEventHolds(staged: Staged, lied: unknown, tool: string, args: JsonObject): Promise<string[]> {
  const { scene } = staged;
  const agentBelieved = json(await scene.agent.consents.newest(RELATION_ID));
  const deviceBelieved = json(await scene.device.views.consents.newest(RELATION_ID));
  const toldBefore = (await scene.refusals()).length;
  const wrong = [...await deliver(scene.agent, "agent", lied), ...await deliver(scene.device, "device", lied)];
  if (json(await scene.agent.consents.newest(RELATION_ID)) !== agentBelieved) wrong.push("the agent believes another statement");
  if (json(await scene.device.views.consents.newest(RELATION_ID)) !== deviceBelieved) wrong.push("the device believes another statement");
  if (forgedStatement(lied, staged) && !(await scene.refusals()).slice(toldBefore).includes("consent_unverified")) {
    wrong.push("the device did not tell bob of a statement he did not sign");
  }
  wrong.push(...await agentRefuses(scene, tool, args, ConsentUnverified));
  // and the server, having lied in the event, grants everything again and serves no statement
  scene.userSide.lie(`/h2a/relations/${RELATION_ID}`, relationSays({ status: "active", granted_scopes: ALL_SCOPES, consent_statement: null }));
  (scene.device as any).cachedViews.clear();
  wrong.push(...await deviceRefuses(scene, tool, args));
  return wrong;
}

/** A notify call the agent makes while the test holds the frames; the index of its first message. */
async function callInFlight(scene: Scene, title: string): Promise<[Promise<Settled>, number]> {
  const sent = scene.server.messages.length;
  const answer = scene.agent.callTool(RELATION_ID, "notify", { title }, { timeoutMs: IN_FLIGHT_MS }).then((a) => ({ a }), (e: unknown) => ({ e }));
  while (scene.server.messages.length === sent) await sleep(2);
  return [answer, sent];
}

const withoutLocation = ALL_SCOPES.filter((s) => s !== "location:read");

const CASES: Record<string, EventCase> = {
  // bob withdrew location:read on his laptop, signed; the honest event carries his statement
  "h2a.relation_updated after bob's signed withdrawal": {
    async stage() {
      const scene = await Scene.create();
      await scene.call("notify", { title: "first look" }, WAIT);
      await scene.device.reconsent(RELATION_ID, ALL_SCOPES);
      const older = scene.server.relationFrame("h2a.relation_updated");
      await scene.agent.handleFrame(older);
      await scene.device.reconsent(RELATION_ID, withoutLocation);
      const honest = scene.server.relationFrame("h2a.relation_updated");
      await scene.agent.handleFrame(honest);
      await scene.device.handleFrame(honest);
      return { scene, honest, older };
    },
    check: (staged, lied) => relationEventHolds(staged, lied, "locate", {}),
  },
  // bob revoked the relation on his laptop, signed
  "h2a.relation_revoked after bob's signed revocation": {
    async stage() {
      const scene = await Scene.create();
      await scene.call("notify", { title: "first look" }, WAIT);
      await scene.device.reconsent(RELATION_ID, ALL_SCOPES);
      const older = scene.server.relationFrame("h2a.relation_updated");
      await scene.agent.handleFrame(older);
      await scene.device.revoke(RELATION_ID);
      const honest = scene.server.relationFrame("h2a.relation_revoked");
      await scene.agent.handleFrame(honest);
      await scene.device.handleFrame(honest);
      return { scene, honest, older };
    },
    check: (staged, lied) => relationEventHolds(staged, lied, "notify", { title: "after the revocation" }),
  },
  // bob revoked his stolen phone; both sides saw it go. The server lists it again, and a
  // device the thief approved with it: whatever the event said, neither is trusted again.
  "keys.device_revoked of bob's stolen phone": {
    async stage() {
      const scene = await Scene.create();
      const phone = KeyPair.generate();
      scene.server.publishDevice("phone", phone, scene.device.keys);
      assert.equal((await scene.call("notify", { title: "to both" }, WAIT))?.status, "ok");
      const row = scene.server.devices.pop();
      const older: EventFrame = { id: 1, type: "keys.device_approved", created_at: AT, data: { relation_id: RELATION_ID, device: row } };
      const honest: EventFrame = { id: 2, type: "keys.device_revoked", created_at: AT, data: { relation_id: RELATION_ID, device: row } };
      await scene.agent.handleFrame(honest);
      await scene.device.handleFrame(honest);
      assert.equal((await scene.call("notify", { title: "laptop only" }, WAIT))?.status, "ok");
      await scene.device.keydir.trustedUserDevices(RELATION_ID); // bob's laptop saw it go too
      return { scene, honest, older, row, phone };
    },
    async check(staged, lied) {
      const { scene } = staged;
      scene.server.devices.push(staged.row);
      scene.server.publishDevice("thief", KeyPair.generate(), staged.phone!);
      const wrong = [...await deliver(scene.agent, "agent", lied), ...await deliver(scene.device, "device", lied)];
      scene.agent.keydir.forget();
      scene.device.keydir.forget();
      const laptop = scene.device.keys.keyId;
      const sent = scene.server.messages.length;
      const answer = await scene.call("notify", { title: "still laptop only" }, WAIT);
      if (answer?.status !== "ok") wrong.push(`notify was answered ${json(answer)}`);
      for (const message of scene.server.messages.slice(sent).filter((m) => m.msg_subtype === "artifact_tool_call")) {
        const to = message.payload.copies.map((c: any) => c.recipient_key_id);
        if (json(to) !== json([laptop])) wrong.push(`the agent sealed to ${json(to)}`);
      }
      const trusted = [...(await scene.device.keydir.trustedUserDevices(RELATION_ID)).keys()];
      if (json(trusted) !== json([laptop])) wrong.push(`bob's laptop trusts ${json(trusted)}`);
      return wrong;
    },
  },
  // bob started again from a new root (his tablet): every earlier device is revoked, and the
  // agent seals to nothing until its owner accepts the new root. The server then lists the
  // laptop again as if no reset had happened: whatever the event said, it stays revoked.
  "keys.device_reset to a new root": {
    async stage() {
      const scene = await Scene.create();
      assert.equal((await scene.call("notify", { title: "first look" }, WAIT))?.status, "ok");
      const row = scene.server.devices[0];
      const older: EventFrame = { id: 1, type: "keys.device_published", created_at: AT, data: { relation_id: RELATION_ID, device: row } };
      scene.server.devices = [];
      scene.server.publishDevice("tablet", KeyPair.generate());
      const honest: EventFrame = { id: 2, type: "keys.device_reset", created_at: AT,
        data: { device: scene.server.devices[0], revoked_key_ids: [scene.device.keys.keyId], relation_id: RELATION_ID } };
      await scene.agent.handleFrame(honest);
      assert.deepEqual(await agentRefuses(scene, "notify", { title: "after the reset" }, NoRecipientKey), []);
      return { scene, honest, older, row };
    },
    async check(staged, lied) {
      const { scene } = staged;
      scene.server.devices.unshift(staged.row);
      const wrong = [...await deliver(scene.agent, "agent", lied), ...await deliver(scene.device, "device", lied)];
      scene.agent.keydir.forget();
      wrong.push(...await agentRefuses(scene, "notify", { title: "to the old root" }, NoRecipientKey));
      return wrong;
    },
  },
  // alice published a breaking version (read_file's path widened to lists): the event says
  // filesystem:read needs bob's consent again, and the server then hides it in the relation
  "h2a.reauth_required after a breaking change the server then hides": {
    async stage() {
      const scene = await Scene.create();
      assert.equal((await scene.call("read_file", { path: "notes.txt" }, WAIT))?.status, "ok"); // an open medium window
      const older: EventFrame = { id: 1, type: "agent.manifest_updated", created_at: AT, data: { agent_id: AGENT_ID, new_manifest_version: 1,
        new_manifest_hash: canonicalHash(manifest()) } };
      scene.server.publish(widenedPath(), ["filesystem:read"]);
      const honest: EventFrame = { id: 2, type: "h2a.reauth_required", created_at: AT, data: { agent_id: AGENT_ID, new_manifest_version: 2,
        new_manifest_hash: canonicalHash(widenedPath()), scopes_requiring_reauth: ["filesystem:read"] } };
      await scene.agent.handleFrame(honest);
      await scene.device.handleFrame(honest);
      return { scene, honest, older };
    },
    async check(staged, lied) {
      const { scene } = staged;
      const [ranBefore, askedBefore] = [scene.ran.length, scene.asked.length];
      const wrong = [...await deliver(scene.agent, "agent", lied), ...await deliver(scene.device, "device", lied)];
      scene.userSide.lie(`/h2a/relations/${RELATION_ID}`, settleRelation);
      const answer = await scene.call("read_file", { path: ["/etc/passwd", "/etc/shadow"] } as any, { agent: scene.runtime(widenedPath()), ...WAIT });
      if (answer === null || answer.status === "ok" || !STABLE.has(answer.reason)) wrong.push(`read_file was answered ${json(answer)}`);
      if (scene.ran.length > ranBefore || scene.asked.length > askedBefore) wrong.push("the widened read_file ran or was asked");
      return wrong;
    },
  },
  // the server reset alice's identity (no rotation signature): bob's device refuses her calls
  // until he accepts a new safety number, whatever the event says
  "agent.identity_changed after a reset on the server": {
    async stage() {
      const scene = await Scene.create((s) => s.server.giveIdentity(ALICE));
      assert.equal((await scene.call("notify", { title: "pins alice" }, WAIT))?.status, "ok");
      const older: EventFrame = { id: 1, type: "keys.agent_key_published", created_at: AT, data: { agent_id: AGENT_ID, key: scene.server.agentKeys[0] } };
      scene.server.giveIdentity(MALLORY_IDENTITY);
      const kid = (jwk: PrivateJwk): string => jwkThumbprint(ed25519PublicJwk({ kty: "OKP", crv: "Ed25519", x: jwk.x }));
      const honest: EventFrame = { id: 2, type: "agent.identity_changed", created_at: AT,
        data: { agent_id: AGENT_ID, kid: kid(MALLORY_IDENTITY), previous_kid: kid(ALICE), reset: true } };
      await scene.device.handleFrame(honest);
      return { scene, honest, older };
    },
    async check(staged, lied) {
      const { scene } = staged;
      const [ranBefore, toldBefore] = [scene.ran.length, (await scene.refusals()).length];
      const wrong = [...await deliver(scene.agent, "agent", lied), ...await deliver(scene.device, "device", lied)];
      scene.device.keydir.forget(); // and the cache expired meanwhile: only what the device pinned decides
      (scene.device as any).cachedViews.clear();
      const answer = await scene.call("notify", { title: "under mallory's identity" }, WAIT);
      if (answer !== null) wrong.push(`notify was answered ${json(answer)}`);
      if (scene.ran.length > ranBefore) wrong.push(`the device ran ${json(scene.ran.slice(ranBefore))}`);
      const told = (await scene.refusals()).slice(toldBefore);
      if (json(told) !== json(["identity_changed"])) wrong.push(`the device's audit says ${json(told)}`);
      return wrong;
    },
  },
  // the server lists a runtime key of its own for alice's agent and says it was published
  "keys.agent_key_published of a key the server slipped in": {
    async stage() {
      const scene = await Scene.create();
      assert.equal((await scene.call("notify", { title: "pins the agent's key" }, WAIT))?.status, "ok");
      const mallory = KeyPair.generate();
      const row = { ...mallory.public.asApi(), key_id: mallory.keyId, created_at: AT };
      const older: EventFrame = { id: 1, type: "keys.agent_key_published", created_at: AT, data: { agent_id: AGENT_ID, key: scene.server.agentKeys[0] } };
      scene.server.agentKeys.push(row);
      const honest: EventFrame = { id: 2, type: "keys.agent_key_published", created_at: AT, data: { agent_id: AGENT_ID, key: row } };
      await scene.device.handleFrame(honest);
      return { scene, honest, older, phone: mallory };
    },
    async check(staged, lied) {
      const { scene } = staged;
      const [ranBefore, toldBefore] = [scene.ran.length, (await scene.refusals()).length];
      const wrong = [...await deliver(scene.agent, "agent", lied), ...await deliver(scene.device, "device", lied)];
      const forged = scene.forgeCall(scene.toolCall("notify", "call_mallory", { title: "from mallory" }), staged.phone!);
      const response = await scene.device.handleFrame(forged).catch((error: Error) => error);
      if (response !== null) wrong.push(`the device answered mallory's call: ${json(response)}`);
      if (scene.ran.length > ranBefore) wrong.push(`the device ran ${json(scene.ran.slice(ranBefore))}`);
      const told = (await scene.refusals()).slice(toldBefore);
      // Refused before any prompt: a key the directory lists for this agent (no identity) as an
      // unpinned runtime's (told so, with a denial only its reply key reads), any other as untrusted.
      if (!["untrusted_sender", "runtime_key_unpinned"].some((reason) => json(told) === json([reason]))) {
        wrong.push(`the device's audit says ${json(told)}`);
      }
      return wrong;
    },
  },
  // the server lists a device "approved by bob's laptop" whose approval it signed itself
  "keys.device_approved of a device nobody bob trusts approved": {
    async stage() {
      const scene = await Scene.create();
      assert.equal((await scene.call("notify", { title: "pins the laptop" }, WAIT))?.status, "ok");
      const older: EventFrame = { id: 1, type: "keys.device_published", created_at: AT, data: { relation_id: RELATION_ID, device: scene.server.devices[0] } };
      const evil = KeyPair.generate();
      scene.server.devices.push({ ...listed("tablet", evil, evil), approved_by_key_id: scene.device.keys.keyId });
      const honest: EventFrame = { id: 2, type: "keys.device_approved", created_at: AT, data: { relation_id: RELATION_ID, device: scene.server.devices[1] } };
      return { scene, honest, older };
    },
    async check(staged, lied) {
      const { scene } = staged;
      const wrong = [...await deliver(scene.agent, "agent", lied), ...await deliver(scene.device, "device", lied)];
      scene.agent.keydir.forget();
      scene.device.keydir.forget();
      const sent = scene.server.messages.length;
      const answer = await scene.call("notify", { title: "to the laptop only" }, WAIT);
      if (answer?.status !== "ok") wrong.push(`notify was answered ${json(answer)}`);
      const to = scene.server.messages[sent]?.payload?.copies?.map((c: any) => c.recipient_key_id);
      if (json(to) !== json([scene.device.keys.keyId])) wrong.push(`the agent sealed to ${json(to)}`);
      const trusted = [...(await scene.device.keydir.trustedUserDevices(RELATION_ID)).keys()];
      if (json(trusted) !== json([scene.device.keys.keyId])) wrong.push(`bob's laptop trusts ${json(trusted)}`);
      return wrong;
    },
  },
  // bob's device answered the agent's call: the agent's caller gets that answer, whatever the
  // server did to the frame before delivering it honestly
  "message.new with bob's answer, to the agent": {
    async stage() {
      const scene = await Scene.create();
      assert.equal((await scene.call("notify", { title: "first look" }, WAIT))?.status, "ok");
      const older = scene.server.frame(1);
      const [answer, sent] = await callInFlight(scene, "answer me");
      await scene.device.handleFrame(scene.server.frame(sent));
      return { scene, honest: scene.server.frame(sent + 1), older, answer, sent };
    },
    async check(staged, lied) {
      const { scene } = staged;
      const ranBefore = scene.ran.length;
      const wrong = [...await deliver(scene.agent, "agent", lied), ...await deliver(scene.device, "device", lied)];
      wrong.push(...await deliver(scene.agent, "agent", staged.honest));
      const outcome = await staged.answer!;
      if (!("a" in outcome) || json(outcome.a) !== json({ status: "ok", result: { shown: true } })) {
        wrong.push(`the agent's caller got ${"a" in outcome ? json(outcome.a) : (outcome.e as Error).name}`);
      }
      if (scene.ran.length > ranBefore) wrong.push(`the device ran ${json(scene.ran.slice(ranBefore))}`);
      return wrong;
    },
  },
  // the agent's call for bob's device: it runs once, with the agent's arguments, and what the
  // device refused on the way is in its audit with a stable reason
  "message.new with the agent's call, to bob's device": {
    async stage() {
      const scene = await Scene.create();
      assert.equal((await scene.call("notify", { title: "first look" }, WAIT))?.status, "ok");
      const older = scene.server.frame(0);
      const [answer, sent] = await callInFlight(scene, "run me once");
      return { scene, honest: scene.server.frame(sent), older, answer, sent };
    },
    async check(staged, lied, lie = "the honest frame") {
      const { scene } = staged;
      const ranBefore = scene.ran.length;
      const toldBefore = (await scene.refusals()).length;
      // The device reads the relation's keys for the frame's relation_id; a server that will not
      // list them (404) is an ApiError its listener logs before the next frame: nothing runs.
      const wrong = await deliver(scene.device, "device", lied, ApiError);
      wrong.push(...await deliver(scene.device, "device", staged.honest));
      const answered = scene.server.messages.findIndex((m, i) => i > staged.sent! && m.msg_subtype === "artifact_response");
      if (answered >= 0) wrong.push(...await deliver(scene.agent, "agent", scene.server.frame(answered)));
      else await scene.agent.stop(); // nothing will answer: the call ends now, as its timeout would end it
      const outcome = await staged.answer!;
      const ran = scene.ran.slice(ranBefore);
      if (ran.length === 0) { // a lie that hides the true call that follows it wins over the truth
        dropped.push(lie);
        wrong.push(`the honest call never ran (the agent's caller got ${"e" in outcome ? (outcome.e as Error).name : json(outcome)})`);
      } else {
        if (json(ran) !== json([["notify", { title: "run me once" }]])) wrong.push(`the device ran ${json(ran)}`);
        if (!("a" in outcome) || outcome.a.status !== "ok") wrong.push(`the agent's caller got ${"a" in outcome ? json(outcome.a) : (outcome.e as Error).name}`);
      }
      const told = (await scene.refusals()).slice(toldBefore);
      if (told.some((r) => r === null || !STABLE.has(r))) wrong.push(`the device's audit says ${json(told)}`);
      return wrong;
    },
  },
};

/** What is wrong with one lie told to a fresh scene (empty: the SDK held). */
async function tell(kase: EventCase, pointer: Pointer, kind: LieKind): Promise<string[]> {
  const staged = await kase.stage();
  const lie = lies(staged.honest, staged.older).find((l) => l.is(pointer, kind));
  if (lie === undefined) return ["this scene's frame has no such place"];
  return checked(kase, staged, lie.apply(staged.honest), String(lie));
}

async function checked(kase: EventCase, staged: Staged, lied: unknown, lie?: string): Promise<string[]> {
  try {
    return await kase.check(staged, lied, lie);
  } finally {
    await staged.scene.agent.stop(); // a call nothing answers ends now
  }
}

// Every case is staged (and checked with its honest frame) before any test runs: a pool of lies
// running beside the staging would stall it.
const staging: [string, EventCase, Staged, string[]][] = [];
for (const [name, kase] of Object.entries(CASES)) {
  const staged = await quietly(() => kase.stage());
  staging.push([name, kase, staged, await quietly(() => checked(kase, staged, staged.honest))]);
}

let told = 0;
for (const [name, kase, staged, honestly] of staging) {
  const shapes = lies(staged.honest, staged.older ?? MISSING);
  test(`${name}: the honest frame passes the checks every lie must pass`, () => {
    assert.deepEqual(honestly, []);
  });
  test(`${name}: ${shapes.length} lies in the frame never give back what bob withdrew, nor throw`, async () => {
    const found = await quietly(() => pool(shapes.map((lie) => async () => (await tell(kase, lie.pointer, lie.kind))
      .map((w) => `${lie}: ${w}`)), AT_ONCE));
    told += shapes.length;
    assert.deepEqual(found.flat(), []);
  });
}

test("the lies told cover every event both sides read", () => {
  assert.ok(told > 0);
  // A copy of a call that does not open, delivered before the true one under its message id,
  // must not make the device take the true one for delivered already (the id is remembered
  // only once a copy opened): no lie loses the call.
  console.log(`# event lies told: ${told}`);
  assert.deepEqual(dropped, []);
});
