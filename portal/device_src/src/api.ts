/** The portal's own API as this page calls it: same origin, the session cookie, and the
 * CSRF token the portal puts in `<meta name="csrf-token">` (Django's SessionAuthentication
 * checks it on every write). Errors keep the API's `{"error": {"code", "message"}}`. */

export class ApiFailure extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
  }
}

export function csrfToken(): string {
  return document.querySelector<HTMLMetaElement>('meta[name="csrf-token"]')?.content ?? "";
}

export async function api<T>(method: "GET" | "POST" | "DELETE", path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json", "X-CSRFToken": csrfToken() };
  const init: RequestInit = { method, credentials: "same-origin", headers };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (response.status === 204) return undefined as T;
  const data = (await response.json().catch(() => ({}))) as { error?: { code?: string; message?: string } };
  if (!response.ok) {
    throw new ApiFailure(response.status, data.error?.code ?? `HTTP_${response.status}`,
      data.error?.message ?? response.statusText);
  }
  return data as T;
}
