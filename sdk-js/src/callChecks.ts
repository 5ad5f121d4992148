/**
 * The checks a user's device makes of a tool call before its chain (docs/wire-spec.md §4 step
 * 2; sdk/hashee_sdk/client.py's call_refusal), and the deadline its prompt and handler run under.
 */
import { isJsonObject, type JsonObject } from "./canonical.js";
import { largeOrderX25519Async } from "./crypto.js";
import { checkedX25519, publicKeyBytes } from "./wire.js";

/** How far past `signed_at + timeout_ms` a call may say it expires. */
export const EXPIRY_SLACK_MS = 60_000;
export const MAX_FUTURE_SKEW_MS = 300_000;
export const MAX_TIMEOUT_MS = 300_000;

/** Why a verified call is dropped before the chain (wire-spec §4 step 2), if it is.
 * `replyKeyUsable`: whether its reply key is an X25519 key of large order (checked here when
 * not given; the device checks it on the platform's X25519 first, see {@link replyKeyUsable}). */
export function callRefusal(call: JsonObject, signedAtMs: number, nowMs: number,
  replyKeyUsable: boolean = replyKeyUsableSync(call)): "call_malformed" | "call_expired" | null {
  if (!wellFormed(call) || !replyKeyUsable) return "call_malformed";
  const expiresAt = call["expires_at"] as number;
  if (nowMs > expiresAt || signedAtMs > nowMs + MAX_FUTURE_SKEW_MS) return "call_expired";
  if (expiresAt > signedAtMs + (call["timeout_ms"] as number) + EXPIRY_SLACK_MS) return "call_expired";
  return null;
}

function wellFormed(call: JsonObject): boolean {
  const { call_id: callId, timeout_ms: timeoutMs } = call;
  if (call["subtype"] !== "tool_call" || typeof callId !== "string" || callId.length === 0 || callId.length > 128) return false;
  if (!Number.isSafeInteger(timeoutMs) || (timeoutMs as number) <= 0 || (timeoutMs as number) > MAX_TIMEOUT_MS) return false;
  if (!Number.isSafeInteger(call["expires_at"]) || !Number.isSafeInteger(call["manifest_version"])) return false;
  return typeof call["manifest_hash"] === "string" && isJsonObject(call["arguments"]);
}

function replyKeyUsableSync(call: JsonObject): boolean {
  try {
    checkedX25519(publicKeyBytes(call["reply_key"]));
    return true;
  } catch {
    return false;
  }
}

/** Whether a call's reply key is an X25519 key of large order, on the platform's X25519 where
 * it has one (noble's takes a millisecond: a tenth of the budget before the prompt). */
export async function replyKeyUsable(call: JsonObject): Promise<boolean> {
  let raw: Uint8Array;
  try {
    raw = publicKeyBytes(call["reply_key"]);
  } catch {
    return false;
  }
  return largeOrderX25519Async(raw);
}

/** Thrown by {@link withDeadline} when the time ran out. */
export class DeadlinePassed extends Error {}

/** `work`'s value, or DeadlinePassed after `ms` (then `onTimeout` runs). */
export function withDeadline<T>(work: Promise<T>, ms: number, onTimeout?: () => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      onTimeout?.();
      reject(new DeadlinePassed());
    }, Math.max(0, Math.min(ms, 2 ** 31 - 1)));
    work.then((value) => {
      clearTimeout(timer);
      resolve(value);
    }, (error: unknown) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}
