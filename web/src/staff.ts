// The staff page: the assignments, and recent submissions with their status and score
// (`GET /submissions` when the server has the submission queue, else the check revisions of everyone).

import './style.css';

import { api, ApiError, type RevisionMeta, type SuiteInfo, type WhoAmI } from './api';
import { $, banner, el, setupTheme, showError, signIn, timeAgo, timeFull, watchUnauthorized } from './ui';

interface Row {
  when: number;
  who: string;
  suite: string;
  status: string;
  score: number | null;
  max: number | null;
}

/** A submission of the queue, whatever its exact shape: the fields a table needs. */
function fromSubmission(s: Record<string, unknown>): Row {
  const num = (v: unknown) => (typeof v === 'number' ? v : null);
  const str = (v: unknown) => (typeof v === 'string' ? v : v === null || v === undefined ? '' : String(v));
  const when = num(s.created_at) ?? num(s.submitted_at) ?? num(s.finished_at) ?? 0;
  return {
    when: when > 1e12 ? Math.floor(when / 1000) : when,
    who: str(s.owner ?? s.student ?? s.user),
    suite: str(s.suite ?? s.checks ?? s.assignment),
    status: str(s.status ?? s.state),
    score: num(s.score),
    max: num(s.max_score),
  };
}

async function recent(): Promise<{ rows: Row[]; source: string }> {
  try {
    const subs = await api<unknown>('GET', '/submissions?limit=100');
    const list = Array.isArray(subs) ? subs : ((subs as { submissions?: unknown[] })?.submissions ?? []);
    return { rows: (list as Record<string, unknown>[]).map(fromSubmission), source: 'From the submission queue (GET /submissions).' };
  } catch (e) {
    if (!(e instanceof ApiError) || (e.status !== 404 && e.status !== 405)) throw e;
  }
  const revs = await api<RevisionMeta[]>('GET', '/revisions?scope=all&kind=check&limit=100');
  return {
    rows: revs.map((r) => ({ when: r.created_at, who: r.owner ?? '', suite: r.suite ?? '', status: r.status, score: r.score, max: r.max_score })),
    source: 'Checks run from the editor (their revisions), newest first.',
  };
}

async function load(): Promise<void> {
  banner(null);
  let suites: SuiteInfo[] = [];
  let rows: Row[] = [];
  try {
    suites = await api<SuiteInfo[]>('GET', '/suites');
    const r = await recent();
    rows = r.rows;
    $('recent-source').textContent = r.source;
  } catch (e) {
    showError(e);
    return;
  }
  const tbody = $('suites').querySelector('tbody')!;
  tbody.replaceChildren(
    ...suites.map((s) => {
      const mine = rows.filter((r) => r.suite === s.id);
      const passed = mine.filter((r) => r.status === 'passed').length;
      return el('tr', {}, el('td', {}, s.id), el('td', {}, s.name), el('td', {}, s.source), el('td', {}, String(mine.length)), el('td', {}, String(passed)));
    }),
  );
  if (!suites.length) tbody.append(el('tr', {}, el('td', { colspan: '5' }, 'No assignments yet: register one with POST /suites or the suites folder.')));
  const rbody = $('recent').querySelector('tbody')!;
  rbody.replaceChildren(
    ...rows.map((r) =>
      el(
        'tr',
        { class: r.status },
        el('td', {}, el('time', { datetime: new Date(r.when * 1000).toISOString(), title: timeFull(r.when) }, timeAgo(r.when))),
        el('td', {}, r.who),
        el('td', {}, r.suite),
        el('td', {}, r.status),
        el('td', {}, r.score !== null && r.max !== null ? `${r.score}/${r.max}` : ''),
      ),
    ),
  );
  if (!rows.length) rbody.append(el('tr', {}, el('td', { colspan: '5' }, 'Nothing submitted yet.')));
}

async function start(): Promise<void> {
  setupTheme();
  let me: WhoAmI = await signIn();
  watchUnauthorized((m) => {
    me = m;
    void load();
  });
  if (me.role === 'student') {
    banner('This page is for staff: sign out and sign in with a staff token.');
    return;
  }
  $('refresh').addEventListener('click', () => void load());
  await load();
  document.body.dataset.ready = 'true';
}

void start();
