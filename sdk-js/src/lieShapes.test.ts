// Every answer the TypeScript SDK trusts, rewritten by shape (src/testing/shapes.ts; the
// Python harness is tests/sdk_trust/test_lie_shapes.py): each place of each GET answer is
// dropped, nulled, zeroed, emptied, swapped for another party's or replayed from before the
// state changed. Whatever the lie, the device never runs what the honest server's state would
// not, never throws, and says why with a stable reason; the agent never seals a call to a key
// bob's devices did not vouch for. One test per case, side and path; the lies run inside it.
import { test } from "node:test";
import assert from "node:assert/strict";
import type { JsonObject } from "./canonical.js";
import { DENIAL_REASONS, REFUSAL_REASONS, SdkError, TOOL_ERROR_CODES } from "./errors.js";
import type { ToolAnswer } from "./agent.js";
import { ALL_SCOPES, RELATION_ID, widenedPath } from "./testing/fakeServer.js";
import { type LieKind, lies, MISSING, type Pointer } from "./testing/shapes.js";
import { pool, quietly } from "./testing/pool.js";
import { Scene } from "./testing/scene.js";

const STABLE = new Set<string>([...DENIAL_REASONS, ...REFUSAL_REASONS, ...TOOL_ERROR_CODES]);
const PASSWD = ["/etc/passwd", "/etc/shadow"];
const AT_ONCE = 8; // scenes in flight, while others wait on their fake server
const WAIT = { timeoutMs: 3000, untilAnswered: true }; // an answer late under load is still an answer
type Side = "user" | "agent";
type Heard = Record<Side, Map<string, unknown>>;

/** A state the honest server reaches after bob's device first looked (a notify call), the
 * call the agent then makes, and whether the honest server's state lets it run. */
interface Case {
  change(scene: Scene): Promise<JsonObject | null>; // the manifest the agent calls under, if new
  tool: string;
  args: JsonObject;
  runs: boolean;
}

const CASES: Record<string, Case> = {
  pending_reconsent: { tool: "read_file", args: { path: PASSWD }, runs: false, change: async (scene) => {
    scene.server.publish(widenedPath(), ["filesystem:read"]);
    return widenedPath();
  } },
  // Signed on bob's device (SPEC §9.6): a revocation or withdrawal given on the web carries no
  // signature, and a server that hides it cannot be caught — the device never saw it.
  revoked: { tool: "notify", args: { title: "after revoke" }, runs: false, change: async (scene) => {
    await scene.device.revoke(RELATION_ID);
    return null;
  } },
  withdrawn_scope: { tool: "locate", args: {}, runs: false, change: async (scene) => {
    await scene.device.reconsent(RELATION_ID, scene.server.granted.filter((s) => s !== "location:read"));
    return null;
  } },
  allowed: { tool: "notify", args: { title: "fine" }, runs: true, change: async () => null },
  // Grant options (SPEC §5.2 v1.2): the device enforces the statement's, whatever the relation's grant_options say.
  narrowed_grant: { tool: "read_file", args: { path: "/etc/passwd" }, runs: false, change: async (scene) => {
    await scene.device.reconsent(RELATION_ID, ALL_SCOPES, { grantOptions: { "filesystem:read": { arguments: { read_file: {
      type: "object", properties: { path: { type: "string", pattern: "^/home/bob/docs/" } }, required: ["path"] } } } } });
    return null;
  } },
  once_used: { tool: "locate", args: {}, runs: false, change: async (scene) => {
    await scene.device.reconsent(RELATION_ID, ALL_SCOPES, { grantOptions: { "location:read": { once: true } } });
    scene.server.refusePatch = "VERSION_CONFLICT"; // not withdrawn on the server: it keeps granting it
    await quietly(() => scene.call("locate", {}, WAIT));
    return null;
  } },
};

const snapshot = (scene: Scene): Heard => ({ user: new Map(scene.userSide.heard), agent: new Map(scene.agentSide.heard) });

/** Bob's device looks once (honest), then the server's state changes; what was heard before. */
async function stage(kase: Case): Promise<[Scene, Heard]> {
  const scene = await Scene.create();
  assert.notEqual(await scene.call("notify", { title: "first look" }, WAIT), null);
  const older = snapshot(scene);
  const manifest = await kase.change(scene);
  if (manifest !== null) scene.agent = scene.runtime(manifest);
  return [scene, older];
}

/** Nothing cached: every answer the call needs is read (and lied about) anew. */
function forget(scene: Scene): void {
  (scene.device as any).cachedViews.clear();
  scene.device.keydir.forget();
  scene.agent.keydir.forget();
  scene.userSide.heard.clear();
  scene.agentSide.heard.clear();
}

/** Outcome of the call, or the error that escaped: an agent's refusal before sending is
 * its typed SdkError (null here); anything else thrown is a crash. */
async function callOnce(scene: Scene, kase: Case): Promise<ToolAnswer | null> {
  const sent = scene.server.messages.length;
  try {
    return await scene.call(kase.tool, kase.args, WAIT);
  } catch (error) {
    if (error instanceof SdkError && scene.server.messages.length === sent) return null;
    throw error;
  }
}

/** What is wrong with one lie's run (empty: the SDK held). */
async function tell(name: string, side: Side, path: string, pointer: Pointer, kind: LieKind): Promise<string[]> {
  const kase = CASES[name]!;
  const [scene, older] = await stage(kase);
  const ranBefore = scene.ran.length;
  const sealedBefore = scene.server.messages.length;
  (side === "user" ? scene.userSide : scene.agentSide).lie(path, (body) => {
    const lie = lies(body, older[side].get(path) ?? MISSING).find((l) => l.is(pointer, kind));
    return lie === undefined ? body : lie.apply(body); // this answer has no such place (another read of the path)
  });
  forget(scene);
  let result: ToolAnswer | null;
  try {
    result = await callOnce(scene, kase);
  } catch (error) {
    return [`threw ${(error as Error).name}: ${(error as Error).message}`];
  }
  const wrong: string[] = [];
  const ran = scene.ran.slice(ranBefore);
  if (!kase.runs && ran.length > 0) wrong.push(`ran ${JSON.stringify(ran)}`);
  if (kase.runs && ran.length > 1) wrong.push(`ran ${ran.length} times`);
  if (result !== null && result.status !== "ok" && !STABLE.has(result.reason)) wrong.push(`answered ${result.reason}`);
  const refusals = await scene.refusals();
  const unstable = refusals.filter((r) => r === null || !STABLE.has(r));
  if (unstable.length > 0) wrong.push(`audited ${JSON.stringify(unstable)}`);
  if ((result === null || result.status !== "ok") && refusals.length === 0 && result === null
      && scene.server.messages.length !== sealedBefore) wrong.push("stopped without saying why");
  for (const message of scene.server.messages.slice(sealedBefore)) {
    if (message.msg_subtype !== "artifact_tool_call") continue;
    const recipients = message.payload.copies.map((c: any) => c.recipient_key_id);
    if (recipients.some((k: string) => k !== scene.device.keys.keyId)) wrong.push(`sealed to ${recipients}`);
  }
  return wrong;
}

/** The GET answers each side reads for the case's call as the honest server gives them, and as before the change. */
async function honestAnswers(kase: Case): Promise<[Heard, Heard]> {
  const [scene, older] = await stage(kase);
  forget(scene);
  await callOnce(scene, kase);
  return [snapshot(scene), older];
}

let told = 0;
for (const [name, kase] of Object.entries(CASES)) {
  const [honest, older] = await honestAnswers(kase);
  for (const side of ["user", "agent"] as const) {
    for (const [path, body] of honest[side]) {
      const shapes = lies(body, older[side].get(path) ?? MISSING);
      test(`${name}: ${side} reads ${path}: ${shapes.length} lies never run what the honest state would not`, async () => {
        const found = await quietly(() => pool(shapes.map((lie) => async () => (await tell(name, side, path, lie.pointer, lie.kind))
          .map((w) => `${lie}: ${w}`)), AT_ONCE));
        told += shapes.length;
        assert.deepEqual(found.flat(), []);
      });
    }
  }
}

test("the lies told cover every answer both sides read", () => {
  assert.ok(told > 0);
  console.log(`# lies told: ${told}`);
});
