import { test } from "node:test";
import assert from "node:assert/strict";
import { PublicKeys } from "./crypto.js";
import { deviceVerificationCode } from "./deviceCode.js";
import { loadVectors } from "./testing/vectors.js";

const vectors = loadVectors();
const keysOf = (name: "bob_laptop" | "bob_phone"): PublicKeys => PublicKeys.fromApi(vectors.keys[name]);

test("the device verification code is the one the Python SDK shows", () => {
  // pinned in tests/sdk/test_statements.py too
  assert.equal(deviceVerificationCode(keysOf("bob_laptop"), "laptop"), "8299 9442 9093");
  assert.equal(deviceVerificationCode(keysOf("bob_phone"), "phone"), "4298 4282 1038");
});

test("the device verification code names both keys and the device", () => {
  const laptop = keysOf("bob_laptop");
  const phone = keysOf("bob_phone");
  const code = deviceVerificationCode(laptop, "laptop");
  assert.notEqual(deviceVerificationCode(PublicKeys.fromRaw(phone.x25519, laptop.ed25519), "laptop"), code);
  assert.notEqual(deviceVerificationCode(laptop, "phone"), code);
});
