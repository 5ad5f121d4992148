/** The Node build of the entry point: everything of ./index.ts, with the real fileStore, and
 * sockets from the `ws` package where Node has no global WebSocket (Node < 22). */
import { useWebSocket, type WebSocketConstructor } from "./events.js";

useWebSocket(async () => {
  if (globalThis.WebSocket !== undefined) return globalThis.WebSocket;
  try {
    return (await import("ws")).WebSocket as unknown as WebSocketConstructor;
  } catch {
    return undefined; // no `ws` installed: the listener polls GET /events instead
  }
});

export * from "./index.js";
export { fileStore } from "./node/fileStore.js";
