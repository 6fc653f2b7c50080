// What the editor and the staff page share: the error banner, the theme, signing in.

import { api, ApiError, getToken, onUnauthorized, setToken, type WhoAmI } from './api';

export function $(id: string): HTMLElement {
  const el = document.getElementById(id);
  if (!el) throw new Error(`#${id} is missing`);
  return el;
}

export function $as<T extends HTMLElement>(id: string): T {
  return $(id) as T;
}

let bannerTimer: number | undefined;

/** A message at the top of the page (role=alert). `retryAfter` counts down. */
export function banner(text: string | null, kind: 'error' | 'info' = 'error', retryAfter: number | null = null): void {
  const el = $('banner');
  window.clearInterval(bannerTimer);
  if (!text) {
    el.hidden = true;
    el.textContent = '';
    return;
  }
  el.hidden = false;
  el.className = `banner ${kind}`;
  el.textContent = text;
  if (retryAfter && retryAfter > 0) {
    let left = retryAfter;
    bannerTimer = window.setInterval(() => {
      left -= 1;
      if (left <= 0) {
        window.clearInterval(bannerTimer);
        el.textContent = `${text.replace(/ Try again in \d+ s\./, '')} You can try again now.`;
      } else {
        el.textContent = text.replace(/Try again in \d+ s\./, `Try again in ${left} s.`);
      }
    }, 1000);
  }
}

export function showError(e: unknown): void {
  if (e instanceof ApiError) banner(e.message, 'error', e.retryAfter);
  else banner(e instanceof Error ? e.message : String(e));
}

// Theme: the system's preference until the user picks one.
const THEME_KEY = 'corral.theme';
type ThemeListener = (dark: boolean) => void;
const themeListeners: ThemeListener[] = [];

export function isDark(): boolean {
  const saved = localStorage.getItem(THEME_KEY);
  if (saved) return saved === 'dark';
  return window.matchMedia?.('(prefers-color-scheme: dark)').matches ?? false;
}

export function applyTheme(dark: boolean): void {
  document.documentElement.dataset.theme = dark ? 'dark' : 'light';
  const b = document.getElementById('theme');
  if (b) {
    b.setAttribute('aria-pressed', String(dark));
    const l = b.querySelector('.label');
    if (l) l.textContent = dark ? 'Light' : 'Dark';
    b.setAttribute('aria-label', dark ? 'Switch to the light theme' : 'Switch to the dark theme');
  }
  for (const f of themeListeners) f(dark);
}

export function setupTheme(onChange?: ThemeListener): void {
  if (onChange) themeListeners.push(onChange);
  applyTheme(isDark());
  document.getElementById('theme')?.addEventListener('click', () => {
    const dark = !isDark();
    localStorage.setItem(THEME_KEY, dark ? 'dark' : 'light');
    applyTheme(dark);
  });
}

/**
 * Makes sure the page has a working token: asks `/whoami` with the stored one (a server run with
 * `--dev-no-auth` needs none), and otherwise shows the sign-in dialog until one works.
 */
let signingIn = false;

export async function signIn(reason?: string): Promise<WhoAmI> {
  signingIn = true;
  try {
    return await signInLoop(reason);
  } finally {
    signingIn = false;
  }
}

async function signInLoop(reason?: string): Promise<WhoAmI> {
  for (;;) {
    if (!reason) {
      try {
        const me = await api<WhoAmI>('GET', '/whoami');
        showWho(me);
        return me;
      } catch (e) {
        if (!(e instanceof ApiError) || e.status !== 401) {
          // Not a token problem (overload, network): say so, and try again shortly.
          showError(e);
          await new Promise((r) => setTimeout(r, ((e as ApiError).retryAfter ?? 3) * 1000));
          continue;
        }
        reason = getToken() ? e.message : '';
        setToken(null);
      }
    }
    const token = await askToken(reason);
    setToken(token);
    reason = undefined;
  }
}

let asking: Promise<string> | null = null;

function askToken(reason: string): Promise<string> {
  if (asking) return asking;
  const dialog = $as<HTMLDialogElement>('login');
  const err = $('login-error');
  const input = $as<HTMLInputElement>('token');
  err.hidden = !reason;
  err.textContent = reason;
  input.value = '';
  asking = new Promise((resolve) => {
    const form = $as<HTMLFormElement>('login-form');
    const submit = (ev: Event) => {
      ev.preventDefault();
      const t = input.value.trim();
      if (!t) return;
      form.removeEventListener('submit', submit);
      dialog.close();
      asking = null;
      resolve(t);
    };
    form.addEventListener('submit', submit);
    // Escape must not leave the page without a token.
    dialog.addEventListener('cancel', (ev) => ev.preventDefault());
    if (!dialog.open) dialog.showModal();
    input.focus();
  });
  return asking;
}

function showWho(me: WhoAmI): void {
  const who = document.getElementById('who');
  if (who) who.textContent = `${me.role} ${me.id}`;
  const out = document.getElementById('logout');
  if (out) {
    out.hidden = !getToken();
    out.onclick = () => {
      setToken(null);
      location.reload();
    };
  }
}

/** On any 401 later on (revoked or expired token): ask again, then carry on. */
export function watchUnauthorized(then: (me: WhoAmI) => void): void {
  onUnauthorized((e) => {
    if (signingIn) return;
    setToken(null);
    void signIn(e.message).then((me) => {
      banner('Signed in again. Repeat what you were doing.', 'info');
      then(me);
    });
  });
}

export function timeAgo(unix: number): string {
  const d = new Date(unix * 1000);
  const s = Math.max(0, Math.round(Date.now() / 1000 - unix));
  const rel = s < 60 ? `${s} s ago` : s < 3600 ? `${Math.floor(s / 60)} min ago` : s < 86400 ? `${Math.floor(s / 3600)} h ago` : d.toLocaleDateString();
  return rel;
}

export function timeFull(unix: number): string {
  return new Date(unix * 1000).toLocaleString();
}

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string> = {},
  ...children: (Node | string | null | undefined)[]
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(typeof c === 'string' ? document.createTextNode(c) : c);
  }
  return e;
}

/** Shows a waiting note only if it is still due `ms` after `arm`: a queue wait of a few
 * milliseconds is not worth a flash of "the server is busy". */
export function delayedNote(show: () => void, ms = 400): { arm(): void; cancel(): void; readonly shown: boolean } {
  let timer: ReturnType<typeof setTimeout> | null = null;
  let shown = false;
  return {
    arm() {
      if (timer === null && !shown) {
        timer = setTimeout(() => {
          timer = null;
          shown = true;
          show();
        }, ms);
      }
    },
    cancel() {
      if (timer !== null) clearTimeout(timer);
      timer = null;
    },
    get shown() {
      return shown;
    },
  };
}
