// The staff page: the assignments (each with its gradebook as CSV), the checks run from the
// editor (everyone's check revisions), and the submission queue (`GET /submissions`, by pages).

import './style.css';

import { api, ApiError, getToken, type RevisionMeta, type SuiteInfo, type WhoAmI } from './api';
import { $, $as, banner, el, setupTheme, showError, signIn, timeAgo, timeFull, watchUnauthorized } from './ui';

interface Row {
  when: number;
  who: string;
  suite: string;
  status: string;
  score: number | null;
  max: number | null;
}

/** A submission of the queue (`GET /submissions`). */
interface Submission {
  id: string;
  owner: string;
  owner_name: string | null;
  suite: string | null;
  language: string | null;
  status: string;
  verdict: string | null;
  score: number | null;
  max_score: number | null;
  created_at: number;
  regrade_of?: string;
}

interface SubmissionPage {
  submissions: Submission[];
  next_cursor?: string;
}

/** Checks run from the editor: everyone's check revisions, newest first. */
async function editorChecks(): Promise<Row[]> {
  const revs = await api<RevisionMeta[]>('GET', '/revisions?scope=all&kind=check&limit=100');
  return revs.map((r) => ({ when: r.created_at, who: r.owner ?? '', suite: r.suite ?? '', status: r.status, score: r.score, max: r.max_score }));
}

function scoreText(score: number | null, max: number | null): string {
  return score !== null && max !== null ? `${score}/${max}` : '';
}

function when(unix: number): HTMLElement {
  return el('time', { datetime: new Date(unix * 1000).toISOString(), title: timeFull(unix) }, timeAgo(unix));
}

/** Saves the suite's gradebook as CSV (`GET /suites/{id}/gradebook?format=csv`). */
async function downloadGradebook(suite: string): Promise<void> {
  const r = await fetch(`/suites/${encodeURIComponent(suite)}/gradebook?format=csv`, {
    headers: { Authorization: `Bearer ${getToken()}` },
    cache: 'no-store',
  });
  if (!r.ok) {
    let message = `HTTP ${r.status}`;
    try {
      message = ((await r.json()) as { message?: string }).message ?? message;
    } catch {
      // Not JSON: the status says enough.
    }
    throw new ApiError(message, r.status, `http_${r.status}`);
  }
  const url = URL.createObjectURL(await r.blob());
  const a = el('a', { href: url, download: `gradebook-${suite}.csv` });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

let nextCursor: string | undefined;

/** Appends a page of the queue's submissions (the first page replaces the table's rows), of the
 * assignment the filter names (all when none). */
async function loadQueue(first: boolean): Promise<void> {
  const suite = $as<HTMLSelectElement>('queue-suite').value;
  let path = '/submissions?limit=50';
  if (suite) path += `&suite=${encodeURIComponent(suite)}`;
  if (!first && nextCursor) path += `&cursor=${encodeURIComponent(nextCursor)}`;
  const page = await api<SubmissionPage>('GET', path);
  nextCursor = page.next_cursor;
  const tbody = $('queue').querySelector('tbody')!;
  const rows = page.submissions.map((s) =>
    el(
      'tr',
      { class: s.status },
      el('td', {}, when(Math.floor(s.created_at / 1000))),
      el('td', { title: s.owner }, s.owner_name || s.owner),
      el('td', {}, s.suite ?? s.language ?? 'a command'),
      el('td', {}, (s.verdict ? `${s.status}: ${s.verdict.replace(/_/g, ' ')}` : s.status) + (s.regrade_of ? ' (regrade)' : '')),
      el('td', {}, scoreText(s.score, s.max_score)),
      el('td', {}, el('code', {}, s.id)),
    ),
  );
  if (first) tbody.replaceChildren(...rows);
  else tbody.append(...rows);
  if (first && !rows.length) tbody.append(el('tr', {}, el('td', { colspan: '6' }, 'No submissions in the queue yet.')));
  $('more').hidden = !nextCursor;
}

/** After a fix to an assignment: every student's latest submission of it judged again
 * (`POST /suites/{id}/regrade`), once staff confirm. */
async function regradeSuite(suite: string, button: HTMLButtonElement): Promise<void> {
  if (!window.confirm(`Regrade every student's latest submission of ${suite} with the assignment as it is now?`)) return;
  button.disabled = true;
  try {
    const r = await api<{ submissions: { id?: string; regrade_of: string; message?: string }[] }>('POST', `/suites/${encodeURIComponent(suite)}/regrade`);
    const queued = r.submissions.filter((x) => x.id).length;
    const refused = r.submissions.filter((x) => !x.id);
    const why = refused.length ? ` ${refused.length} not: ${refused[0].message ?? ''}` : '';
    banner(`${suite}: ${queued} regrade${queued === 1 ? '' : 's'} queued.${why}`, 'info');
    await loadQueue(true);
  } catch (e) {
    showError(e);
  } finally {
    button.disabled = false;
  }
}

async function load(): Promise<void> {
  banner(null);
  let suites: SuiteInfo[] = [];
  let rows: Row[] = [];
  try {
    suites = await api<SuiteInfo[]>('GET', '/suites');
    rows = await editorChecks();
    await loadQueue(true);
  } catch (e) {
    showError(e);
    return;
  }
  const tbody = $('suites').querySelector('tbody')!;
  tbody.replaceChildren(
    ...suites.map((s) => {
      const mine = rows.filter((r) => r.suite === s.id);
      const passed = mine.filter((r) => r.status === 'passed').length;
      const book = el('button', { type: 'button', 'aria-label': `Download the gradebook of ${s.id} (CSV)` }, 'CSV');
      book.addEventListener('click', () => void downloadGradebook(s.id).catch(showError));
      const again = el('button', { type: 'button', 'aria-label': `Regrade every student's latest submission of ${s.id}` }, 'Regrade');
      again.addEventListener('click', () => void regradeSuite(s.id, again));
      return el('tr', {}, el('td', {}, s.id), el('td', {}, s.name), el('td', {}, s.source), el('td', {}, String(mine.length)), el('td', {}, String(passed)), el('td', {}, book, ' ', again));
    }),
  );
  if (!suites.length) tbody.append(el('tr', {}, el('td', { colspan: '6' }, 'No assignments yet: register one with POST /suites or the suites folder.')));
  const filter = $as<HTMLSelectElement>('queue-suite');
  const chosen = filter.value;
  filter.replaceChildren(el('option', { value: '' }, 'All'), ...suites.map((s) => el('option', { value: s.id }, s.id)));
  filter.value = suites.some((s) => s.id === chosen) ? chosen : '';
  const rbody = $('recent').querySelector('tbody')!;
  rbody.replaceChildren(
    ...rows.map((r) =>
      el('tr', { class: r.status }, el('td', {}, when(r.when)), el('td', {}, r.who), el('td', {}, r.suite), el('td', {}, r.status), el('td', {}, scoreText(r.score, r.max))),
    ),
  );
  if (!rows.length) rbody.append(el('tr', {}, el('td', { colspan: '5' }, 'Nothing checked from the editor yet.')));
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
  $('queue-suite').addEventListener('change', () => void loadQueue(true).catch(showError));
  const more = $as<HTMLButtonElement>('more');
  more.addEventListener('click', () => {
    // One page at a time: a second click while one loads would append the same page twice.
    more.disabled = true;
    void loadQueue(false)
      .catch(showError)
      .finally(() => (more.disabled = false));
  });
  await load();
  document.body.dataset.ready = 'true';
}

void start();
