/**
 * A server that lies (SPEC §9's threat model; tests/sdk_trust/lying.py in TypeScript): a
 * transport between the SDK and a server — the fake one or a real one — that rewrites what
 * the server answers to a GET.
 */
import { canonicalHash } from "../canonical.js";
import type { HttpResponse, RequestOptions, Transport } from "../rest.js";

export type Rewrite = (body: any) => any;

export class LyingTransport implements Transport {
  readonly rules: [string, Rewrite][] = [];
  /** The latest honest answer to each GET path (before any rule rewrote it). */
  readonly heard = new Map<string, unknown>();

  constructor(readonly inner: Transport) {}

  /** The answer to a GET of a path ending with `pathSuffix` is rewritten (a copy: change it freely). */
  lie(pathSuffix: string, rewrite: Rewrite): void {
    this.rules.push([pathSuffix, rewrite]);
  }

  async request(method: string, path: string, options?: RequestOptions): Promise<HttpResponse> {
    const response = await this.inner.request(method, path, options);
    let body = response.body;
    if (method === "GET" && response.status >= 200 && response.status < 300) this.heard.set(path, JSON.parse(JSON.stringify(body ?? null)));
    for (const [suffix, rewrite] of this.rules) {
      if (method === "GET" && path.split("?")[0]!.endsWith(suffix) && response.status >= 200 && response.status < 300) {
        const changed = rewrite(JSON.parse(JSON.stringify(body)));
        body = changed === undefined ? body : changed;
      }
    }
    return { ...response, body };
  }
}

/** A fetch that rewrites a real server's answers the same way (for the browser or Node's fetch). */
export function lyingFetch(inner: typeof fetch, rules: [string, Rewrite][]): typeof fetch {
  return async (input, init) => {
    const response = await inner(input, init);
    const url = new URL(typeof input === "string" ? input : input instanceof URL ? input.href : input.url);
    const method = (init?.method ?? "GET").toUpperCase();
    const matching = rules.filter(([suffix]) => url.pathname.endsWith(suffix));
    if (method !== "GET" || matching.length === 0 || !response.ok) return response;
    let body = await response.json();
    for (const [, rewrite] of matching) body = rewrite(body) ?? body;
    return new Response(JSON.stringify(body), { status: response.status, headers: response.headers });
  };
}

/** The key directory lists one more runtime key for the agent. */
export const addAgentKey = (keys: object): Rewrite => (body) => {
  body.agent.keys.push({ ...keys });
  return body;
};

/** The key directory lists one more device for the user. */
export const addDevice = (device: object): Rewrite => (body) => {
  body.user.devices.push({ ...device });
  return body;
};

/** `GET /agents/{id}` serves a changed manifest, its hash recomputed to match. */
export const serveManifest = (change: (manifest: any) => void): Rewrite => (body) => {
  change(body.capability_manifest);
  body.capability_manifest_hash = canonicalHash(body.capability_manifest);
  return body;
};

/** `GET /h2a/relations/{id}` hides a pending re-consent. */
export const settleRelation: Rewrite = (body) => ({ ...body, status: "active", pending_scopes: [] });

/** `GET /h2a/relations/{id}` says what the test wants. */
export const relationSays = (fields: object): Rewrite => (body) => ({ ...body, ...fields });
