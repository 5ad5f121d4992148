/**
 * Event frames over the server's sockets (`/ws/events` for users, `/ws/agent` for agent
 * runtimes), resumed with `?since=` after a drop (sdk/hashee_sdk/events.py), and the
 * `GET /events?since=` polling fallback where no WebSocket can be had.
 *
 * Only a refused credential ends {@link listen}, with SocketRefused: a browser's WebSocket
 * does not show the handshake's status, so a socket that closes before it opens is followed
 * by one `GET /events` with the same credential, and a 401/403 there is the refusal.
 * Anything else reconnects after a jittered backoff. The server's close 4401 (a token that
 * ended) reconnects at once with a renewed token. `onCursor` is told the id of every frame
 * handled: persist it, and a restarted process resumes where it stopped.
 */
import { ApiError, SocketRefused } from "./errors.js";
import { pollEvents, type Credential, type EventFrame, type Transport } from "./rest.js";

export const RECONNECT_DELAYS_MS = [500, 1000, 2000, 5000, 10_000, 30_000];
export const POLL_INTERVAL_MS = 2000;
export const CLOSE_UNAUTHENTICATED = 4401;

/** The WebSocket constructor the listener uses (the standard one's shape). */
export type WebSocketConstructor = new (url: string) => WebSocket;

let webSocketFactory: () => Promise<WebSocketConstructor | undefined> = async () => globalThis.WebSocket;

/** Where sockets come from when the caller passes none (the Node entry sets `ws` on Node < 22). */
export function useWebSocket(factory: () => Promise<WebSocketConstructor | undefined>): void {
  webSocketFactory = factory;
}

export interface ListenOptions {
  readonly baseUrl: string;
  readonly path: "/ws/events" | "/ws/agent";
  readonly credential: Credential;
  /** For the refusal check and the polling fallback. */
  readonly transport: Transport;
  readonly onFrame: (frame: EventFrame) => Promise<void>;
  readonly since?: number | null;
  readonly onCursor?: (lastId: number) => Promise<void> | void;
  readonly onConnected?: (connected: boolean) => void;
  readonly signal: AbortSignal;
  readonly webSocket?: WebSocketConstructor | null;
}

/** `http(s)://host` + `/ws/…` → `ws(s)://host/ws/…?token=…&since=…` (no token for the session). */
export function socketUrl(baseUrl: string, path: string, token: string | null, since: number | null): string {
  const url = new URL(baseUrl.replace(/\/+$/, "") + path);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  if (token !== null) url.searchParams.set("token", token);
  if (since !== null) url.searchParams.set("since", String(since));
  return url.toString();
}

/** Seconds-scale backoff step for `failures` failures in a row, jittered down to half. */
export function reconnectDelay(failures: number): number {
  const step = RECONNECT_DELAYS_MS[Math.min(failures, RECONNECT_DELAYS_MS.length - 1)]!;
  return step * (0.5 + Math.random() / 2);
}

const isRecord = (value: unknown): value is Record<string, any> => typeof value === "object" && value !== null && !Array.isArray(value);

/** [type, data] of an event frame (sdk/hashee_sdk/events.py's frame_parts); a frame or data
 * that is not an object is read as an empty one: nothing in it is believed, both ends check
 * what they act on, and neither throws on a frame the server shaped otherwise. */
export function frameParts(frame: unknown): [unknown, Record<string, any>] {
  if (!isRecord(frame)) {
    console.warn("hashee: an event frame that is not an object was ignored");
    return [undefined, {}];
  }
  return [frame["type"], isRecord(frame["data"]) ? frame["data"] : {}];
}

function parseFrame(text: unknown): EventFrame | null {
  if (typeof text !== "string") return null;
  try {
    const frame = JSON.parse(text) as EventFrame;
    return typeof frame === "object" && frame !== null && Number.isSafeInteger(frame.id) && typeof frame.type === "string"
      ? frame : null; // e.g. {"type": "pong"}
  } catch {
    return null;
  }
}

const sleep = (ms: number, signal: AbortSignal): Promise<void> => new Promise((resolve) => {
  const timer = setTimeout(done, ms);
  signal.addEventListener("abort", done, { once: true });
  function done(): void {
    clearTimeout(timer);
    signal.removeEventListener("abort", done);
    resolve();
  }
});

/** Deliver every frame to `onFrame` in order until `signal` aborts. Raises SocketRefused. */
export async function listen(options: ListenOptions): Promise<void> {
  const Socket = options.webSocket === undefined ? await webSocketFactory() : options.webSocket;
  let last = options.since ?? null;
  const deliver = async (frame: EventFrame): Promise<void> => {
    last = Math.max(last ?? 0, frame.id);
    await options.onFrame(frame);
    await options.onCursor?.(last);
  };
  if (Socket === undefined || Socket === null) {
    await pollForever(options, () => last, deliver);
    return;
  }
  let failures = 0;
  let stale: string | null | undefined;
  while (!options.signal.aborted) {
    const secret = stale === undefined ? await options.credential.token() : await options.credential.renew(stale);
    stale = undefined;
    const outcome = await oneSocket(new Socket(socketUrl(options.baseUrl, options.path, secret, last)), options, deliver);
    options.onConnected?.(false);
    if (options.signal.aborted) return;
    if (outcome.opened) failures = 0;
    if (outcome.code === CLOSE_UNAUTHENTICATED && options.credential.renewable) {
      stale = secret;
      continue;
    }
    if (!outcome.opened) await checkRefused(options, last);
    await sleep(reconnectDelay(failures++), options.signal);
  }
}

function oneSocket(ws: WebSocket, options: ListenOptions, deliver: (frame: EventFrame) => Promise<void>):
Promise<{ opened: boolean; code: number }> {
  return new Promise((resolve) => {
    let opened = false;
    let queue = Promise.resolve(); // frames are handled one after the other, in order
    const abort = (): void => ws.close(1000);
    options.signal.addEventListener("abort", abort, { once: true });
    ws.addEventListener("open", () => {
      opened = true;
      options.onConnected?.(true);
    });
    ws.addEventListener("message", (event: MessageEvent) => {
      const frame = parseFrame(event.data);
      if (frame !== null) queue = queue.then(() => deliver(frame)).catch(() => undefined);
    });
    ws.addEventListener("close", (event: CloseEvent) => {
      options.signal.removeEventListener("abort", abort);
      void queue.then(() => resolve({ opened, code: event.code }));
    });
    ws.addEventListener("error", () => undefined); // a close follows
  });
}

/** A socket that never opened: is it the credential? (SocketRefused) */
async function checkRefused(options: ListenOptions, last: number | null): Promise<void> {
  try {
    await pollEvents(options.transport, last ?? 0, 1);
  } catch (error) {
    if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
      throw new SocketRefused(`${options.path}: HTTP ${error.status}`);
    }
  }
}

async function pollForever(options: ListenOptions, last: () => number | null,
  deliver: (frame: EventFrame) => Promise<void>): Promise<void> {
  let failures = 0;
  while (!options.signal.aborted) {
    try {
      let more = true;
      while (more && !options.signal.aborted) {
        const [frames, , hasMore] = await pollEvents(options.transport, last() ?? 0);
        for (const frame of frames) await deliver(frame);
        more = hasMore;
      }
      failures = 0;
      await sleep(POLL_INTERVAL_MS, options.signal);
    } catch (error) {
      if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
        throw new SocketRefused(`GET /events: HTTP ${error.status}`);
      }
      await sleep(reconnectDelay(failures++), options.signal);
    }
  }
}
