// Grant options on bob's device (SPEC §5.2 v1.2, issue 26): "Only this time", "until", a
// narrowed grant and the 90-day notice — decided by the device, from the consent statement it
// verified, whatever the server says (tests/sdk/test_grant_options.py is the Python side).
import { test } from "node:test";
import assert from "node:assert/strict";
import type { JsonObject } from "./canonical.js";
import { compileManifest, decide, type DecideContext } from "./contract.js";
import { ConsentUnverified } from "./errors.js";
import type { DeviceNotice } from "./device.js";
import { compileGrants } from "./grants.js";
import { SensitivityPolicy } from "./policy.js";
import { ALL_SCOPES, manifest, RELATION_ID } from "./testing/fakeServer.js";
import { relationSays } from "./testing/lying.js";
import { quietly } from "./testing/pool.js";
import { lies } from "./testing/shapes.js";
import { Scene, statuses } from "./testing/scene.js";

const DAY_MS = 24 * 3600 * 1000;
const DOCS = { type: "object", properties: { path: { type: "string", pattern: "^/home/bob/docs/" } }, required: ["path"] };
const WAIT = { timeoutMs: 3000, untilAnswered: true };

// --- decide(): the rule table ------------------------------------------------------------

const call = (tool: string, args: JsonObject): JsonObject => ({ subtype: "tool_call", call_id: "c1", tool_name: tool, arguments: args,
  permission_scope: tool === "notify" ? "notification:send" : "filesystem:read", timeout_ms: 100 });
const context = (options: JsonObject, extra: Partial<DecideContext> = {}): DecideContext => ({
  manifest: compileManifest(manifest()), granted: new Set(ALL_SCOPES), inGroup: false, policy: new SensitivityPolicy(),
  subject: { deviceId: "laptop", sessionId: "s", agentId: "a" }, nowMs: 1000, grants: compileGrants(options), ...extra,
});
const outcome = (c: JsonObject, ctx: DecideContext): string => {
  const d = decide(c, ctx);
  return d.outcome === "denied" || d.outcome === "error" ? `${d.outcome}: ${d.reason}` : d.outcome;
};

test("decide() ends a grant past its until, a once grant used, and an option it cannot read", () => {
  const notify = call("notify", { title: "hi" });
  const table: [string, JsonObject, Partial<DecideContext>, string][] = [
    ["always", {}, {}, "run"],
    ["until ahead", { "notification:send": { until: 1001 } }, {}, "run"],
    ["until reached", { "notification:send": { until: 1000 } }, {}, "denied: scope_not_granted"],
    ["once, not used", { "notification:send": { once: true } }, {}, "run"],
    ["once, used", { "notification:send": { once: true } }, { onceUsed: new Set(["notification:send"]) }, "denied: scope_not_granted"],
    ["once used on another scope", { "notification:send": { once: true } }, { onceUsed: new Set(["filesystem:read"]) }, "run"],
    ["once: false is no option of the contract", { "notification:send": { once: false } }, {}, "denied: scope_not_granted"],
    ["until as text", { "notification:send": { until: "tomorrow" } }, {}, "denied: scope_not_granted"],
    ["an unknown option", { "notification:send": { forever: true } }, {}, "denied: scope_not_granted"],
    ["an option that is not an object", { "notification:send": true }, {}, "denied: scope_not_granted"],
    ["another scope's option", { "filesystem:read": { until: 0 } }, {}, "run"],
    // ended by its options before anything the server says is looked at (as the Python device decides)
    ["used once, and the statement does not give it", {}, { onceUsed: new Set(["notification:send"]), unbacked: new Set(["notification:send"]) },
      "denied: scope_not_granted"],
    ["past until, and pending re-consent", { "notification:send": { until: 5 } }, { pending: new Set(["notification:send"]) },
      "denied: scope_not_granted"],
    ["the statement does not give it", {}, { unbacked: new Set(["notification:send"]) }, "denied: consent_unverified"],
  ];
  for (const [label, options, extra, expected] of table) assert.equal(outcome(notify, context(options, extra)), expected, label);
});

test("decide() holds a narrowed tool to its schema as well as the tool's own, with details under /arguments", () => {
  const options = { "filesystem:read": { arguments: { read_file: DOCS } } };
  assert.equal(outcome(call("read_file", { path: "/home/bob/docs/a.txt" }), context(options)), "prompt");
  const outside = decide(call("read_file", { path: "/etc/passwd" }), context(options));
  assert.deepEqual(outside, { outcome: "denied", reason: "scope_not_granted",
    details: [{ path: "/arguments/path", code: "PATTERN_MISMATCH", message: "does not satisfy pattern" }] });
  // the tool's own schema is checked first: an argument it refuses is still invalid, not "not granted"
  assert.equal(outcome(call("read_file", { path: 3 }), context(options)), "error: TOOL_INVALID_ARGUMENTS");
  const broken = { "filesystem:read": { arguments: { read_file: { type: "object", $ref: "https://evil.example/s.json" } } } };
  assert.equal(outcome(call("read_file", { path: "/home/bob/docs/a.txt" }), context(broken)), "denied: scope_not_granted");
});

test("a folder chosen on the portal's page holds against .. on the device (the schema the page makes)", () => {
  // portal/grant_choices.py: a prefix, and never a ".." segment (tests/portal/test_grant_choices.py pins the same schema)
  const folder = { type: "object", required: ["path"], properties: { path: { type: "string", pattern: "^/home/bob/docs/",
    not: { pattern: "(^|[/\\\\])\\.\\.([/\\\\]|$)" } } } };
  const options = { "filesystem:read": { arguments: { read_file: folder } } };
  const table: [string, string][] = [["/home/bob/docs/a.txt", "prompt"], ["/home/bob/docs/.notes/a..b", "prompt"],
    ["/home/bob/docs/../../etc/passwd", "denied: scope_not_granted"], ["/home/bob/docs/a/../../x", "denied: scope_not_granted"],
    ["/home/bob/docs\\..\\secret", "denied: scope_not_granted"], ["/home/bob/docs/..", "denied: scope_not_granted"]];
  for (const [path, expected] of table) assert.equal(outcome(call("read_file", { path }), context(options)), expected, path);
});

// --- bob's device against the fake server ------------------------------------------------

/** Bob's device has looked once, then signs consent to every scope with `options`. */
async function granted(options: JsonObject, setup?: (scene: Scene) => void): Promise<Scene> {
  const scene = await Scene.create(setup);
  assert.notEqual(await scene.call("notify", { title: "first look" }, WAIT), null);
  await scene.device.reconsent(RELATION_ID, ALL_SCOPES, { grantOptions: options });
  return scene;
}

test("the statement bob's device signs carries the grant options it sends", async () => {
  const options = { "location:read": { until: 1_790_000_000_000 }, "filesystem:read": { once: true, arguments: { read_file: DOCS } } };
  const scene = await granted(options);
  assert.deepEqual(scene.server.consentStatement.statement.grant_options, options);
  assert.deepEqual(scene.server.grantOptions, options);
});

test("Only this time: the first call is answered, the scope is withdrawn with a signed PATCH, the next is not granted", async () => {
  const scene = await granted({ "notification:send": { once: true } });
  const first = await scene.call("notify", { title: "once" }, WAIT);
  assert.deepEqual(statuses(first), [["ok", null]]);
  assert.deepEqual(scene.server.granted, ["filesystem:read", "location:read"]);
  const statement = scene.server.consentStatement.statement;
  assert.deepEqual([statement.granted_scopes, statement.grant_options], [["filesystem:read", "location:read"], {}]);
  assert.equal(statement.acknowledged_manifest_version, 1);
  const second = await scene.call("notify", { title: "again" }, WAIT);
  assert.deepEqual(statuses(second), [["denied", "scope_not_granted"]]);
  assert.equal(scene.ran.filter(([name]) => name === "notify").length, 2); // the first look's call and the once
  // refused without asking bob: he is told, in words (as the Python device tells it)
  assert.deepEqual(scene.notices.map((n) => [n.kind, n.reason, n.text]), [["call_refused", "scope_not_granted",
    "Refused Notes helper's notify: you have not granted notification:send (or not for this call)."]]);
});

test("a once grant used stays used when the withdrawal fails, after a restart, whatever the server says", async () => {
  const notices: DeviceNotice[] = [];
  const scene = await granted({ "notification:send": { once: true } });
  scene.device = scene.startDevice(undefined, undefined, (n) => notices.push(n));
  scene.server.refusePatch = "VERSION_CONFLICT";
  await quietly(async () => assert.deepEqual(statuses(await scene.call("notify", { title: "once" }, WAIT)), [["ok", null]]));
  assert.ok(scene.server.granted.includes("notification:send")); // the server still grants it
  const told = (await scene.device.audit.entries()).filter((e) => e.status === "withdraw_failed");
  assert.deepEqual(told.map((e) => [e.scope, e.reason]), [["notification:send", "VERSION_CONFLICT"]]);
  assert.deepEqual(notices.map((n) => [n.kind, n.scope]), [["once_not_withdrawn", "notification:send"]]);
  assert.match(notices[0]!.text, /only this time and has been used/);
  // a restarted device, and a server that drops the option: still used
  scene.userSide.lie(`/h2a/relations/${RELATION_ID}`, relationSays({ grant_options: {} }));
  scene.device = scene.startDevice();
  const again = await quietly(() => scene.call("notify", { title: "again" }, WAIT));
  assert.deepEqual(statuses(again), [["denied", "scope_not_granted"]]);
  // the next consent bob signs leaves it out, though the page asked for every scope
  scene.server.refusePatch = null;
  await scene.device.reconsent(RELATION_ID, ALL_SCOPES);
  assert.deepEqual(scene.server.granted, ["filesystem:read", "location:read"]);
});

test("two calls of a once grant at the same time: one runs, the other is not granted", async () => {
  const scene = await granted({ "notification:send": { once: true } });
  const view = await scene.device.relation(RELATION_ID, true);
  const [a, b] = [scene.toolCall("notify", "c-a", { title: "a" }), scene.toolCall("notify", "c-b", { title: "b" })];
  const answers = await Promise.all([scene.device.answer(view, a), scene.device.answer(view, b)]);
  assert.deepEqual(answers.map((r) => [r["status"], r["reason"] ?? null]).sort(), [["denied", "scope_not_granted"], ["ok", null]]);
  assert.equal(scene.ran.filter(([name]) => name === "notify").length, 2); // the first look's call and one of these
});

test("until: the device refuses from its own clock, even when the server keeps the grant and drops the option", async () => {
  const scene = await Scene.create();
  assert.notEqual(await scene.call("notify", { title: "first look" }, WAIT), null);
  await scene.device.reconsent(RELATION_ID, ALL_SCOPES, { grantOptions: { "location:read": { until: scene.nowMs + 60_000 } } });
  assert.deepEqual(statuses(await scene.call("locate", {}, WAIT)), [["ok", null]]);
  scene.nowMs += 61_000;
  scene.server.now = () => 0; // a server whose clock says the grant lives, and which drops the option
  scene.userSide.lie(`/h2a/relations/${RELATION_ID}`, relationSays({ grant_options: {} }));
  (scene.device as any).cachedViews.clear();
  const late = await quietly(() => scene.call("locate", {}, WAIT));
  assert.deepEqual(statuses(late), [["denied", "scope_not_granted"]]);
  assert.ok((await scene.refusals()).includes("consent_unverified"), "bob is told the server's grant_options are not what he signed");
});

test("the agent refuses before sending a scope past the until bob signed (the device stays the judge of once and arguments)", async () => {
  const scene = await Scene.create();
  assert.notEqual(await scene.call("notify", { title: "first look" }, WAIT), null);
  const relation = await scene.device.reconsent(RELATION_ID, ALL_SCOPES, { grantOptions: { "location:read": { until: scene.nowMs + 1000 } } });
  await scene.agent.handleFrame({ id: 1, type: "h2a.relation_updated", created_at: "", data: { relation } });
  scene.nowMs += 1000;
  const sent = scene.server.messages.length;
  await assert.rejects(scene.agent.callTool(RELATION_ID, "locate", {}), ConsentUnverified);
  assert.equal(scene.server.messages.length, sent);
  assert.deepEqual(statuses(await scene.call("notify", { title: "still fine" }, WAIT)), [["ok", null]]);
});

test("a narrowed read_file answers inside the folder and refuses outside it, with details", async () => {
  const scene = await granted({ "filesystem:read": { arguments: { read_file: DOCS } } });
  assert.deepEqual(statuses(await scene.call("read_file", { path: "/home/bob/docs/plan.txt" }, WAIT)), [["ok", null]]);
  const outside = await scene.call("read_file", { path: "/etc/passwd" }, WAIT);
  assert.deepEqual(outside, { status: "denied", reason: "scope_not_granted",
    details: [{ path: "/arguments/path", code: "PATTERN_MISMATCH", message: "does not satisfy pattern" }] });
  assert.deepEqual(scene.ran.filter(([name]) => name === "read_file"), [["read_file", { path: "/home/bob/docs/plan.txt" }]]);
  assert.equal(scene.asked.at(-1)?.toolName, "read_file");
  assert.deepEqual(scene.asked.at(-1)?.grantOption, { arguments: { read_file: DOCS } });
});

test("every shape of lie about the relation's grant_options changes nothing the device enforces, and bob is told", async () => {
  const options = { "filesystem:read": { arguments: { read_file: DOCS } }, "notification:send": { once: true } };
  const honest = await granted(options);
  const body = (await honest.device.transport.request("GET", `/h2a/relations/${RELATION_ID}`)).body as JsonObject;
  const shapes = lies(body, { ...body, grant_options: {} }).filter((l) => l.pointer[0] === "grant_options");
  assert.ok(shapes.length >= 8, `${shapes.length} lies`);
  for (const lie of shapes) {
    const scene = await granted(options);
    scene.userSide.lie(`/h2a/relations/${RELATION_ID}`, (b) => {
      try {
        return lie.apply(b);
      } catch {
        return b; // an answer without that place (the once grant withdrawn meanwhile)
      }
    });
    (scene.device as any).cachedViews.clear();
    const outside = await quietly(() => scene.call("read_file", { path: "/etc/passwd" }, WAIT));
    assert.deepEqual(statuses(outside), [["denied", "scope_not_granted"]], `${lie}`);
    await quietly(() => scene.call("notify", { title: "once" }, WAIT));
    const again = await quietly(() => scene.call("notify", { title: "twice" }, WAIT));
    assert.deepEqual(statuses(again), [["denied", "scope_not_granted"]], `${lie}`);
    assert.ok(scene.ran.every(([name, args]) => name !== "read_file" || (args as any).path.startsWith("/home/bob/docs/")), `${lie}`);
    assert.ok((await scene.refusals()).includes("consent_unverified"), `${lie}: bob is told`);
  }
});

test("without a statement the server's grant_options apply: they can only narrow", async () => {
  const scene = await Scene.create();
  scene.server.grantOptions = { "filesystem:read": { arguments: { read_file: DOCS } } };
  const outside = await scene.call("read_file", { path: "/etc/passwd" }, WAIT);
  assert.deepEqual(statuses(outside), [["denied", "scope_not_granted"]]);
});

test("a once grant given without a statement (the web, not a device) is used once, then withdrawn with the device's signature", async () => {
  const scene = await Scene.create();
  scene.server.grantOptions = { "notification:send": { once: true } };
  assert.deepEqual(statuses(await scene.call("notify", { title: "once" }, WAIT)), [["ok", null]]);
  assert.deepEqual(scene.server.consentStatement.statement.granted_scopes, ["filesystem:read", "location:read"]);
  assert.deepEqual(statuses(await scene.call("notify", { title: "twice" }, WAIT)), [["denied", "scope_not_granted"]]);
  scene.userSide.lie(`/h2a/relations/${RELATION_ID}`, relationSays({ granted_scopes: ALL_SCOPES, consent_statement: null, grant_options: {} }));
  (scene.device as any).cachedViews.clear();
  assert.deepEqual(statuses(await quietly(() => scene.call("notify", { title: "thrice" }, WAIT))), [["denied", "scope_not_granted"]]);
  assert.equal(scene.ran.length, 1);
});

// --- the 90-day notice -------------------------------------------------------------------

test("a high-sensitivity grant unused for 90 days is reported, a used one is not, and withdraw takes it away signed", async () => {
  const scene = await granted({});
  assert.deepEqual(await scene.device.unusedGrants({ now: scene.nowMs + 89 * DAY_MS }), []);
  const late = await scene.device.unusedGrants({ now: scene.nowMs + 90 * DAY_MS });
  assert.deepEqual(late.map((g) => [g.relationId, g.scope, g.since]), [[RELATION_ID, "location:read", scene.nowMs]]);
  assert.deepEqual(scene.notices.map((n) => [n.kind, n.scope]), [["unused_grant", "location:read"]]);
  assert.match(scene.notices[0]!.text, /has not used location:read for 90 days/);
  scene.nowMs += 60 * DAY_MS;
  assert.deepEqual(statuses(await scene.call("locate", {}, WAIT)), [["ok", null]]);
  assert.deepEqual(await scene.device.unusedGrants({ now: scene.nowMs + 89 * DAY_MS }), []);
  assert.equal((await scene.device.unusedGrants({ days: 30, now: scene.nowMs + 30 * DAY_MS })).length, 1);
  scene.nowMs += 10 * DAY_MS;
  assert.equal((await scene.device.unusedGrants({ days: 30, now: scene.nowMs + 29 * DAY_MS })).length, 1);
  await scene.device.keepGrant(RELATION_ID, "location:read"); // bob keeps it: the days count from now again
  assert.deepEqual(await scene.device.unusedGrants({ days: 30, now: scene.nowMs + 29 * DAY_MS }), []);
  await scene.device.withdraw(RELATION_ID, "location:read");
  assert.deepEqual(scene.server.granted, ["filesystem:read", "notification:send"]);
  assert.deepEqual(scene.server.consentStatement.statement.granted_scopes, ["filesystem:read", "notification:send"]);
  assert.deepEqual(await scene.device.unusedGrants({ now: scene.nowMs + 365 * DAY_MS }), []);
});
