// The JSON API client. The token lives in this tab's sessionStorage and
// leaves it only in the Authorization header: never in a URL.

const KEY = 'uum.console.token';

export const session = {
  token: () => sessionStorage.getItem(KEY),
  set: (t) => sessionStorage.setItem(KEY, t),
  clear: () => sessionStorage.removeItem(KEY),
  scopes: [],
  can(scope) { return this.scopes.includes(scope); },
};

// APIError is a non-2xx answer: status, and the API's error object
// ({code, field, message}) when it sent one.
export class APIError extends Error {
  constructor(status, err) {
    super(err?.message || `HTTP ${status}`);
    this.status = status;
    this.code = err?.code || '';
    this.field = err?.field || '';
  }
}

let onUnauthorized = () => {};
export function whenUnauthorized(f) { onUnauthorized = f; }

// api calls path with the query's non-empty values (and body, if given,
// as JSON) and returns the decoded JSON, or throws an APIError.
export async function api(path, { method = 'GET', query = {}, body, token = session.token() } = {}) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(query)) {
    if (v !== '' && v !== null && v !== undefined) url.searchParams.set(k, v);
  }
  const headers = { Authorization: `Bearer ${token}`, Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(url, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: 'no-store',
    credentials: 'omit',
    redirect: 'error',
  });
  let answer = null;
  try { answer = await res.json(); } catch { /* not JSON: described by the status */ }
  if (!res.ok) {
    if (res.status === 401) onUnauthorized();
    throw new APIError(res.status, answer?.error);
  }
  return answer;
}

export const enc = encodeURIComponent;
