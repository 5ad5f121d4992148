/**
 * The four standard device tools (SPEC §12.1) on the browser's Web APIs. Each runs after
 * the SDK's chain and the user's "Allow"; the browser's own permission prompt comes after.
 * A refusal by the browser (its prompt declined, no access) throws PlatformRefused, which
 * the device answers `denied: user_refused`, as the Python SDK's PlatformRefused.
 */

import { PlatformRefused } from "@hashee/sdk";

export type ToolHandler = (args: Readonly<Record<string, unknown>>) => Promise<Record<string, unknown>>;
export type ToolHandlers = Readonly<Record<string, ToolHandler>>;

export { PlatformRefused };

export const MAX_FILE_BYTES = 1024 * 1024;
const APPROXIMATE_ACCURACY_M = 1000;

/** Asks the person to pick a file, `hint` being the path the agent named; null: cancelled. */
export type PickFile = (hint: string) => Promise<File | null>;

/** The tools this browser has: a tool whose Web API is missing has no handler, so the SDK
 * answers its calls `error: TOOL_UNAVAILABLE` (SPEC §12.1), as for any tool it does not know. */
export function browserTools(pickFile: PickFile): ToolHandlers {
  const all: Record<string, ToolHandler> = {
    read_file: async (args) => fileResult(await pickOrRefuse(pickFile, String(args["path"] ?? ""))),
    send_notification: async (args) => {
      await notificationPermission();
      const body = typeof args["body"] === "string" ? args["body"] : "";
      new Notification(String(args["title"]), { body });
      return { shown: true };
    },
    read_clipboard: async () => {
      try {
        return { text: await navigator.clipboard.readText() };
      } catch (error) {
        throw refusedOr(error);
      }
    },
    get_location: async (args) => location(args["accuracy"] === "precise"),
  };
  const has: Record<string, boolean> = {
    read_file: "File" in globalThis,
    send_notification: "Notification" in globalThis,
    read_clipboard: typeof navigator.clipboard?.readText === "function",
    get_location: "geolocation" in navigator,
  };
  return Object.fromEntries(Object.entries(all).filter(([name]) => has[name]));
}

async function pickOrRefuse(pickFile: PickFile, hint: string): Promise<File> {
  const file = await pickFile(hint);
  if (file === null) throw new PlatformRefused("no file was picked");
  return file;
}

export async function fileResult(file: File): Promise<Record<string, unknown>> {
  if (file.size > MAX_FILE_BYTES) throw new Error(`${file.name} is larger than ${MAX_FILE_BYTES} bytes`);
  const bytes = new Uint8Array(await file.arrayBuffer());
  const base = { name: file.name, size: bytes.length };
  try {
    const text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
    return { ...base, media_type: file.type || "text/plain", text };
  } catch {
    return { ...base, media_type: file.type || "application/octet-stream", base64: toBase64(bytes) };
  }
}

function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

async function notificationPermission(): Promise<void> {
  const permission = Notification.permission === "default" ? await Notification.requestPermission()
    : Notification.permission;
  if (permission !== "granted") throw new PlatformRefused("notifications are not allowed for this site");
}

function refusedOr(error: unknown): Error {
  if (error instanceof DOMException && (error.name === "NotAllowedError" || error.name === "SecurityError")) {
    return new PlatformRefused(error.message);
  }
  return error instanceof Error ? error : new Error(String(error));
}

function location(precise: boolean): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    navigator.geolocation.getCurrentPosition((position) => {
      const { latitude, longitude, accuracy } = position.coords;
      resolve(precise ? { latitude, longitude, accuracy_m: accuracy } : {
        latitude: Math.round(latitude * 100) / 100, longitude: Math.round(longitude * 100) / 100,
        accuracy_m: Math.max(APPROXIMATE_ACCURACY_M, Math.round(accuracy)),
      });
    }, (error) => {
      reject(error.code === error.PERMISSION_DENIED ? new PlatformRefused(error.message) : new Error(error.message));
    }, { enableHighAccuracy: precise, timeout: 20_000, maximumAge: precise ? 0 : 600_000 });
  });
}
