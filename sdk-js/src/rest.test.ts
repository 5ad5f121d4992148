import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { WebSocketServer, type WebSocket as WsSocket } from "ws";
import { ApiError, SocketRefused } from "./errors.js";
import { listen } from "./events.js";
import { FetchTransport, callApi, type EventFrame } from "./rest.js";
import "./index.node.js"; // sockets from `ws` where Node has no global WebSocket

type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;

async function serve(handler: Handler): Promise<{ url: string; close: () => Promise<void>; server: ReturnType<typeof createServer> }> {
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => handler(req, body, res));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, server, close: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }) };
}

const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void => {
  res.writeHead(status, { "Content-Type": "application/json", ...headers });
  res.end(JSON.stringify(body));
};

test("a user key is sent as Bearer; errors come back typed with the SPEC §2 shape", async () => {
  const seen: (string | undefined)[] = [];
  const srv = await serve((req, _body, res) => {
    seen.push(req.headers.authorization);
    if (req.url === "/h2a/relations/x") return json(res, 429, { error: { code: "RATE_LIMITED", message: "slow", details: [] } }, { "Retry-After": "17" });
    json(res, 200, { ok: true });
  });
  try {
    const transport = new FetchTransport(srv.url, "hsk_secret");
    assert.deepEqual(await callApi(transport, "GET", "/agents"), { ok: true });
    const error = await callApi(transport, "GET", "/h2a/relations/x").catch((e: unknown) => e);
    assert.ok(error instanceof ApiError);
    assert.equal(error.code, "RATE_LIMITED");
    assert.equal(error.retryAfter, 17);
    assert.deepEqual(seen, ["Bearer hsk_secret", "Bearer hsk_secret"]);
  } finally {
    await srv.close();
  }
});

test("an agent key is exchanged for hat_ tokens, renewed once on a 401", async () => {
  let issued = 0;
  const srv = await serve((req, body, res) => {
    if (req.url === "/oauth/token") {
      const form = new URLSearchParams(body);
      assert.equal(form.get("subject_token"), "hak_key");
      return json(res, 200, { access_token: `hat_${++issued}`, token_type: "Bearer", expires_in: 600 });
    }
    if (req.headers.authorization === "Bearer hat_1") return json(res, 401, { error: { code: "NOT_AUTHENTICATED", message: "", details: [] } });
    json(res, 200, { auth: req.headers.authorization });
  });
  try {
    const transport = new FetchTransport(srv.url, "hak_key");
    assert.deepEqual(await callApi(transport, "GET", "/agents/a"), { auth: "Bearer hat_2" });
  } finally {
    await srv.close();
  }
});

test("session mode sends no Authorization and the caller's CSRF token on unsafe methods", async () => {
  const seen: [string | undefined, string | undefined][] = [];
  const srv = await serve((req, _body, res) => {
    seen.push([req.headers.authorization, req.headers["x-csrftoken"] as string | undefined]);
    json(res, 200, {});
  });
  try {
    const transport = new FetchTransport(srv.url, { session: true, csrfToken: () => "csrf1" });
    await callApi(transport, "GET", "/h2a/relations");
    await callApi(transport, "POST", "/keys/devices", { json: {} });
    assert.deepEqual(seen, [[undefined, undefined], [undefined, "csrf1"]]);
  } finally {
    await srv.close();
  }
});

test("the listener resumes with ?since= after a drop and hands frames over in order", async () => {
  const srv = await serve((_req, _b, res) => json(res, 200, { events: [], last_id: 0, has_more: false }));
  const wss = new WebSocketServer({ server: srv.server });
  const sinces: (string | null)[] = [];
  wss.on("connection", (ws: WsSocket, req: IncomingMessage) => {
    const url = new URL(req.url ?? "", "http://x");
    assert.equal(url.searchParams.get("token"), "hsk_k");
    sinces.push(url.searchParams.get("since"));
    const from = Number(url.searchParams.get("since") ?? 0);
    ws.send(JSON.stringify({ id: from + 1, type: "t", data: {} }));
    ws.send(JSON.stringify({ type: "pong" }));
    if (from === 0) setTimeout(() => ws.terminate(), 20); // a drop
  });
  const got: number[] = [];
  const cursors: number[] = [];
  const controller = new AbortController();
  const transport = new FetchTransport(srv.url, "hsk_k");
  const done = listen({
    baseUrl: srv.url, path: "/ws/events", credential: transport.credential, transport, since: null, signal: controller.signal,
    onFrame: async (frame: EventFrame) => {
      got.push(frame.id);
      if (got.length === 2) controller.abort();
    },
    onCursor: (last) => void cursors.push(last),
  });
  await done;
  wss.close();
  await srv.close();
  assert.deepEqual(got, [1, 2]);
  assert.deepEqual(sinces, [null, "1"]);
  assert.deepEqual(cursors.slice(0, 1), [1]);
});

test("a socket whose credential the server refuses ends listening with SocketRefused", async () => {
  const srv = await serve((_req, _b, res) => json(res, 401, { error: { code: "NOT_AUTHENTICATED", message: "", details: [] } }));
  srv.server.on("upgrade", (_req, socket) => socket.end("HTTP/1.1 401 Unauthorized\r\n\r\n"));
  const transport = new FetchTransport(srv.url, "hsk_bad");
  try {
    await assert.rejects(listen({
      baseUrl: srv.url, path: "/ws/events", credential: transport.credential, transport, signal: new AbortController().signal,
      onFrame: async () => {},
    }), SocketRefused);
  } finally {
    await srv.close();
  }
});
