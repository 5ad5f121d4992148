import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { compileSchema, unsafePattern } from "./schema.js";

const closed = (properties: object, required: string[] = []) =>
  ({ type: "object", additionalProperties: false, properties, required });

test("it validates 2020-12 by interpreting the schema (no eval: the portal's CSP holds)", () => {
  const engine = dirname(fileURLToPath(import.meta.resolve("@cfworker/json-schema")));
  for (const file of readdirSync(engine).filter((f) => f.endsWith(".js"))) {
    assert.ok(!/new Function|\beval\(/.test(readFileSync(join(engine, file), "utf8")), file);
  }
  const v = compileSchema(closed({ n: { type: "integer", maximum: 3 } }, ["n"]), "/arguments")!;
  assert.equal(v.isValid({ n: 2 }), true);
  assert.equal(v.isValid({ n: 4 }), false);
  assert.deepEqual(v.details({ n: 41 }).map((d) => [d.path, d.code]), [["/arguments/n", "OUT_OF_RANGE"]]);
  assert.ok(!JSON.stringify(v.details({ n: 41 })).includes("41"));
  assert.deepEqual(v.details({ x: 1 }).map((d) => [d.path, d.code]), [
    ["/arguments/n", "REQUIRED"], ["/arguments/x", "UNKNOWN_FIELD"]]);
});

test("a remote or dangling $ref does not compile", () => {
  assert.equal(compileSchema({ $ref: "https://example.com/s.json" }, "/arguments"), null);
  assert.equal(compileSchema({ $ref: "#/$defs/missing" }, "/arguments"), null);
  const local = compileSchema({ $defs: { s: { type: "string" } }, ...closed({ a: { $ref: "#/$defs/s" } }) }, "/arguments")!;
  assert.equal(local.isValid({ a: 1 }), false);
  assert.equal(local.isValid({ a: "x" }), true);
});

test("patterns that backtrack without bound are refused, ordinary ones run", () => {
  for (const bad of ["^(a|a)*b$", "(a+)+$", "(\\w+\\s?)*$", "(a*){2,}", "(.)\\1", "(?=a)a", "(?<!a)b", "\\k<n>"]) {
    assert.notEqual(unsafePattern(bad), null, bad);
  }
  for (const good of ["^[a-z0-9_-]{1,64}$", "^(?:ab)+$", "^\\d{3}-\\d{4}$", "(ab|cd)?x", "^[(]+a$", ".{0,500}"]) {
    assert.equal(unsafePattern(good), null, good);
  }
  assert.equal(compileSchema(closed({ s: { type: "string", pattern: "^(a|a)*b$" } }), "/arguments"), null);
  const many = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`p${i}`, { type: "string", pattern: `^x${i}$` }]));
  assert.equal(compileSchema(closed(many), "/arguments"), null);
});
