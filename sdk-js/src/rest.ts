/**
 * The SDK's view of the REST API (sdk/hashee_sdk/rest.py and credentials.py): a small
 * transport over `fetch`, the SPEC §2 error shape as {@link ApiError}, messages, polling,
 * and the credentials a request carries. Nothing here logs a payload or a secret.
 *
 * Credentials:
 * * a string — `hsk_…` (a user), `hat_…` (a short-lived agent token): `Authorization: Bearer`;
 *   `hak_…` (an agent key) is exchanged for `hat_` tokens at `POST /oauth/token` (SPEC §10.3),
 *   renewed at 80 % of their lifetime and when the server refuses one;
 * * `{ session: true, csrfToken }` — the browser's logged-in session: `credentials:
 *   "same-origin"` and `X-CSRFToken` on every unsafe method (the caller reads the token from
 *   the page; it may be a function, read at each request).
 */
import { ENVELOPE_CONTENT_TYPE } from "./wire.js";
import { ApiError, TokenExchangeRefused, TransportFailed } from "./errors.js";
import type { JsonObject } from "./canonical.js";

export const SEND_ATTEMPTS = 3;
export const RETRY_DELAY_MS = 500;
export const GRANT_TYPE = "urn:ietf:params:oauth:grant-type:token-exchange";
export const AGENT_KEY_TOKEN_TYPE = "urn:hashee:params:oauth:token-type:agent-key";
export const RENEW_AT = 0.8;

export interface HttpResponse {
  readonly status: number;
  readonly body: unknown;
  /** Lower-case names. */
  readonly headers: Readonly<Record<string, string>>;
}

export interface RequestOptions {
  readonly json?: unknown;
  readonly headers?: Readonly<Record<string, string>>;
}

/** One authenticated HTTP exchange with the server; paths start with `/`. */
export interface Transport {
  request(method: string, path: string, options?: RequestOptions): Promise<HttpResponse>;
}

export interface SessionCredential {
  readonly session: true;
  readonly csrfToken: string | (() => string);
}

/** What authenticates requests and sockets: a secret, renewable or not, or the session. */
export interface Credential {
  readonly renewable: boolean;
  /** null: the browser's session (cookies), no bearer token. */
  token(): Promise<string | null>;
  renew(stale: string | null): Promise<string | null>;
  readonly session?: SessionCredential;
}

export type CredentialInput = string | Credential | SessionCredential;

type FetchLike = typeof fetch;

/** A credential from what the caller gave: `hak_` keys are exchanged for `hat_` tokens. */
export function credentialOf(value: CredentialInput, baseUrl: string, fetchImpl?: FetchLike): Credential {
  if (typeof value === "string") {
    return value.startsWith("hak_") ? TokenSource.exchanging(baseUrl, value, fetchImpl) : staticCredential(value);
  }
  if ("session" in value && value.session === true && !("renewable" in value)) {
    return { renewable: false, session: value, token: async () => null, renew: async () => null };
  }
  return value as Credential;
}

function staticCredential(secret: string): Credential {
  return { renewable: false, token: async () => secret, renew: async () => secret };
}

export interface AccessToken {
  readonly value: string;
  readonly expiresInS: number;
}

/** The current token of `provider`, renewed at {@link RENEW_AT} of its lifetime and when the
 * server refuses it; concurrent callers share one renewal. */
export class TokenSource implements Credential {
  readonly renewable = true;
  renewals = 0;
  private current: AccessToken | null = null;
  private renewAfter = 0;
  private pending: Promise<void> | null = null;

  constructor(private readonly provider: () => Promise<AccessToken>, private readonly now: () => number = Date.now) {}

  /** Tokens exchanged for `agentKey` at `baseUrl`'s `POST /oauth/token` (RFC 8693). */
  static exchanging(baseUrl: string, agentKey: string, fetchImpl?: FetchLike, scope?: string): TokenSource {
    const source = new TokenSource(() => exchangeAgentKey(baseUrl, agentKey, fetchImpl, scope));
    source.agentKey = agentKey;
    return source;
  }

  /** The long-lived key behind the tokens, when this process holds it (publishing keys needs it). */
  agentKey: string | null = null;

  async token(): Promise<string> {
    if (this.current === null || this.now() >= this.renewAfter) await this.fetch();
    return this.current!.value;
  }

  async renew(stale: string | null): Promise<string> {
    if (this.current === null || this.current.value === stale) {
      this.current = null;
      await this.fetch();
    }
    return this.current!.value;
  }

  private fetch(): Promise<void> {
    this.pending ??= (async () => {
      try {
        const fresh = await this.provider();
        this.renewals++;
        this.current = fresh;
        this.renewAfter = this.now() + fresh.expiresInS * 1000 * RENEW_AT;
      } finally {
        this.pending = null;
      }
    })();
    return this.pending;
  }
}

/** `POST /oauth/token`: the agent key for a `hat_` token. Raises TokenExchangeRefused. */
export async function exchangeAgentKey(baseUrl: string, agentKey: string, fetchImpl: FetchLike = fetch,
  scope?: string): Promise<AccessToken> {
  const form = new URLSearchParams({ grant_type: GRANT_TYPE, subject_token: agentKey, subject_token_type: AGENT_KEY_TOKEN_TYPE });
  if (scope) form.set("scope", scope);
  let response: Response;
  try {
    response = await fetchImpl(`${baseUrl.replace(/\/+$/, "")}/oauth/token`, {
      method: "POST", body: form, headers: { "Content-Type": "application/x-www-form-urlencoded" },
    });
  } catch (error) {
    throw new TransportFailed(`POST /oauth/token: ${(error as Error).name}`);
  }
  const body = (await response.json().catch(() => null)) as Record<string, unknown> | null;
  if (!response.ok || typeof body?.["access_token"] !== "string") {
    throw new TokenExchangeRefused(typeof body?.["error"] === "string" ? body["error"] : `HTTP ${response.status}`);
  }
  const expires = Number(body["expires_in"]);
  return { value: body["access_token"], expiresInS: Number.isFinite(expires) && expires > 0 ? expires : 60 };
}

const UNSAFE = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/** The default transport: `fetch` against `baseUrl`. A 401 with a renewable credential renews
 * its token and sends the request once more (a 401 did nothing on the server). */
export class FetchTransport implements Transport {
  readonly baseUrl: string;
  readonly credential: Credential;
  private readonly fetchImpl: FetchLike;

  constructor(baseUrl: string, credential: CredentialInput, options: { fetch?: FetchLike; timeoutMs?: number } = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.fetchImpl = options.fetch ?? ((...args) => fetch(...args));
    this.credential = credentialOf(credential, this.baseUrl, this.fetchImpl);
    this.timeoutMs = options.timeoutMs ?? 15_000;
  }

  private readonly timeoutMs: number;

  async request(method: string, path: string, options: RequestOptions = {}): Promise<HttpResponse> {
    const secret = await this.credential.token();
    const response = await this.send(method, path, options, secret);
    if (response.status === 401 && this.credential.renewable) {
      return this.send(method, path, options, await this.credential.renew(secret));
    }
    return response;
  }

  private async send(method: string, path: string, options: RequestOptions, secret: string | null): Promise<HttpResponse> {
    const headers: Record<string, string> = { Accept: "application/json", ...(options.headers ?? {}) };
    const init: RequestInit = { method, headers, signal: AbortSignal.timeout(this.timeoutMs) };
    if (options.json !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(options.json);
    }
    const session = this.credential.session;
    if (session !== undefined) {
      init.credentials = "same-origin";
      if (UNSAFE.has(method)) headers["X-CSRFToken"] = typeof session.csrfToken === "function" ? session.csrfToken() : session.csrfToken;
    } else if (secret !== null) {
      headers["Authorization"] = `Bearer ${secret}`;
    }
    let response: Response;
    try {
      response = await this.fetchImpl(this.baseUrl + path, init);
    } catch (error) {
      throw new TransportFailed(`${method} ${path.split("?")[0]}: ${(error as Error).name}`);
    }
    const text = await response.text();
    let body: unknown = null;
    if (text && (response.headers.get("content-type") ?? "").includes("json")) {
      try {
        body = JSON.parse(text);
      } catch {
        body = null;
      }
    }
    const lower: Record<string, string> = {};
    response.headers.forEach((value, name) => {
      lower[name.toLowerCase()] = value;
    });
    return { status: response.status, body, headers: lower };
  }
}

/** The typed error of a non-2xx answer. */
export function errorFor(response: HttpResponse): ApiError {
  const outer = response.body as { error?: unknown } | null;
  const error = (typeof outer?.error === "object" && outer.error !== null ? outer.error : {}) as Record<string, unknown>;
  return new ApiError(response.status, String(error["code"] ?? "HTTP_ERROR"), String(error["message"] ?? ""),
    Array.isArray(error["details"]) ? error["details"] : [], response.headers);
}

/** The JSON body of a 2xx answer; raises ApiError otherwise. */
export async function callApi<T = any>(transport: Transport, method: string, path: string, options: RequestOptions = {}): Promise<T> {
  const response = await transport.request(method, path, options);
  if (response.status < 200 || response.status >= 300) throw errorFor(response);
  return response.body as T;
}

const randomHex = (): string => Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");

/** POST one message; network failures and 503s are retried under one Idempotency-Key, so a
 * retry never stores the message twice. Raises ApiError (429 with `retryAfter`). */
export async function sendMessage(transport: Transport, relationId: string, msgSubtype: string, payload: JsonObject,
  sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms))): Promise<Record<string, unknown>> {
  const json = { msg_subtype: msgSubtype, content_type: ENVELOPE_CONTENT_TYPE, payload };
  const headers = { "Idempotency-Key": `sdk-${randomHex()}` };
  for (let attempt = 1; ; attempt++) {
    try {
      return await callApi(transport, "POST", `/h2a/relations/${relationId}/messages`, { json, headers });
    } catch (error) {
      const retryable = error instanceof TransportFailed
        || (error instanceof ApiError && (error.status === 503 || error.code === "IDEMPOTENCY_KEY_IN_USE"));
      if (attempt >= SEND_ATTEMPTS || !retryable) throw error;
    }
    await sleep(RETRY_DELAY_MS * attempt);
  }
}

export interface EventFrame {
  readonly id: number;
  readonly type: string;
  readonly created_at?: string;
  readonly data: any;
}

/** `GET /events?since=`: [frames, lastId, hasMore]. */
export async function pollEvents(transport: Transport, since: number, limit = 100): Promise<[EventFrame[], number, boolean]> {
  const body = await callApi<{ events: EventFrame[]; last_id: number; has_more: boolean }>(
    transport, "GET", `/events?since=${Math.trunc(since)}&limit=${Math.trunc(limit)}`);
  return [body.events ?? [], Number(body.last_id ?? since), Boolean(body.has_more)];
}
