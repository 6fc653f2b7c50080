// The HTTP API, with the token from localStorage and errors people can act on.

const TOKEN_KEY = 'corral.token';

export function getToken(): string {
  try {
    return localStorage.getItem(TOKEN_KEY) ?? '';
  } catch {
    return '';
  }
}

export function setToken(token: string | null): void {
  try {
    if (token) localStorage.setItem(TOKEN_KEY, token);
    else localStorage.removeItem(TOKEN_KEY);
  } catch {
    /* private mode: the token lives for this page only */
  }
}

/** What went wrong, with the status, the server's code and (429, 503) when to try again. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    readonly retryAfter: number | null = null,
  ) {
    super(message);
  }
  get unauthorized(): boolean {
    return this.status === 401;
  }
}

type Listener = (e: ApiError) => void;
const unauthorizedListeners: Listener[] = [];

/** Called whenever the server refuses the token (401): the page asks for a new one. */
export function onUnauthorized(f: Listener): void {
  unauthorizedListeners.push(f);
}

export function explain(status: number, code: string, message: string, retryAfter: number | null): string {
  const wait = retryAfter ? ` Try again in ${retryAfter} s.` : ' Try again in a moment.';
  switch (status) {
    case 401:
      return `Your token was not accepted: it is unknown, revoked or expired. Sign in with a valid token. (${message})`;
    case 403:
      return `Not allowed with this token: ${message}`;
    case 429:
      return code === 'rate_limited'
        ? `Too many requests for this token.${wait}`
        : `All of your sandboxes are busy.${wait}`;
    case 503:
      return `The server is busy right now (overloaded).${wait}`;
    case 413:
      return `Too large: ${message}`;
    default:
      return message || `The server answered ${status}.`;
  }
}

export function reportUnauthorized(e: ApiError): void {
  for (const f of unauthorizedListeners) f(e);
}

/** Calls the API. `body`: a FormData, or a value sent as JSON. */
export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {};
  const token = getToken();
  if (token) headers['Authorization'] = `Bearer ${token}`;
  let payload: BodyInit | undefined;
  if (body instanceof FormData) {
    payload = body;
  } else if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    payload = JSON.stringify(body);
  }
  let r: Response;
  try {
    r = await fetch(path, { method, headers, body: payload, cache: 'no-store' });
  } catch {
    throw new ApiError('Cannot reach the server: check your connection, then try again.', 0, 'network');
  }
  const text = await r.text();
  const data = parseOrNull(text);
  if (!r.ok) throw refusal(r, data, text);
  return data as T;
}

function parseOrNull(text: string): unknown {
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return null;
  }
}

/** The error of a request the server refused (its JSON error body, or its text). */
function refusal(r: Response, data: unknown, text: string): ApiError {
  const d = (data ?? {}) as { error?: string; message?: string };
  const ra = r.headers.get('Retry-After');
  const retryAfter = ra && /^\d+$/.test(ra) ? Number(ra) : null;
  const code = d.error ?? `http_${r.status}`;
  const err = new ApiError(explain(r.status, code, d.message ?? text.slice(0, 200), retryAfter), r.status, code, retryAfter);
  if (r.status === 401) reportUnauthorized(err);
  return err;
}

/**
 * Calls an API that answers its progress as it goes (`Accept: application/x-ndjson`): `onLine`
 * gets each line's JSON as it arrives. A refusal throws as `api` does.
 */
export async function apiStream(method: string, path: string, body: unknown, onLine: (line: Record<string, unknown>) => void): Promise<void> {
  const headers: Record<string, string> = { 'Content-Type': 'application/json', Accept: 'application/x-ndjson' };
  const token = getToken();
  if (token) headers['Authorization'] = `Bearer ${token}`;
  let r: Response;
  try {
    r = await fetch(path, { method, headers, body: JSON.stringify(body), cache: 'no-store' });
  } catch {
    throw new ApiError('Cannot reach the server: check your connection, then try again.', 0, 'network');
  }
  if (!r.ok || !r.body) {
    const text = await r.text();
    throw refusal(r, parseOrNull(text), text);
  }
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    let chunk: ReadableStreamReadResult<string>;
    try {
      chunk = await reader.read();
    } catch {
      throw new ApiError('The connection to the server was lost before the answer came: try again.', 0, 'network');
    }
    if (chunk.done) break;
    buf += chunk.value;
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (line) onLine(JSON.parse(line) as Record<string, unknown>);
    }
  }
}

export interface Language {
  id: string;
  name: string;
  source: string;
  compile: string | null;
  run: string;
  available: boolean;
  reason?: string;
}

export interface WhoAmI {
  id: string;
  role: 'admin' | 'staff' | 'student';
}

export interface SuiteInfo {
  id: string;
  name: string;
  source: string;
}

export interface EditorFile {
  path: string;
  content: string;
}

/** The editor's files as one upload. */
export async function upload(files: EditorFile[]): Promise<string> {
  const form = new FormData();
  for (const f of files) {
    form.append('files', new Blob([f.content], { type: 'application/octet-stream' }), f.path);
  }
  const r = await api<{ id: string; files: string[] }>('POST', '/upload', form);
  return r.id;
}

export interface RevisionMeta {
  id: string;
  owner?: string;
  created_at: number;
  kind: 'run' | 'check' | 'save';
  language: string;
  status: string;
  suite: string | null;
  score: number | null;
  max_score: number | null;
  summary: string;
  files_count: number;
}

export interface Revision extends RevisionMeta {
  files: EditorFile[];
}

/** What the editor keeps of a Run or a Save (a Check's is kept by `POST /check` itself). */
export interface NewRevision {
  kind: 'run' | 'save';
  language: string;
  status: string;
  suite?: string | null;
  score?: number | null;
  max_score?: number | null;
  summary?: string;
  files: EditorFile[];
}

/** A WebSocket URL on this server, with the token (browsers cannot set headers on WebSockets). */
export function wsUrl(path: string): string {
  const u = new URL(path, location.href);
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  const token = getToken();
  if (token) u.searchParams.set('token', token);
  return u.toString();
}
