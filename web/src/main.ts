// The editor page: files in tabs, Run in a terminal over `/ws`, Check against an assignment,
// revisions kept on the server.

import '@xterm/xterm/css/xterm.css';
import './style.css';

import {
  api,
  ApiError,
  apiStream,
  upload,
  type EditorFile,
  type Language,
  type NewRevision,
  type Revision,
  type RevisionMeta,
  type SuiteInfo,
  type WhoAmI,
} from './api';
import { renderReport, type Report } from './checks';
import { Editor, validName } from './editor';
import { describeExit, Session, usage } from './session';
import { template } from './templates';
import { TerminalPanel } from './terminal';
import { $, $as, banner, delayedNote, el, setupTheme, showError, signIn, timeAgo, timeFull, watchUnauthorized } from './ui';

const DRAFT_KEY = 'corral.draft';
const SUITE_KEY = 'corral.suite';

let languages: Language[] = [];
let me: WhoAmI | null = null;
let busy = false;
let session: Session | null = null;
/** The files as last stored in a revision (to know whether a restore would lose work). */
let lastStored = '';

const editor = new Editor($('editor'), { run: () => void run(), check: () => void check(), save: () => void save() });
const term = new TerminalPanel($('terminal'));
const languageSelect = $as<HTMLSelectElement>('language');
const suiteSelect = $as<HTMLSelectElement>('suite');
const runButton = $as<HTMLButtonElement>('run');
const stopButton = $as<HTMLButtonElement>('stop');
const checkButton = $as<HTMLButtonElement>('check');
const saveButton = $as<HTMLButtonElement>('save');
const runStatus = $('run-status');
const ttyBox = $as<HTMLInputElement>('tty');
const TTY_KEY = 'corral.tty';
ttyBox.checked = localStorage.getItem(TTY_KEY) !== 'off';
ttyBox.addEventListener('change', () => localStorage.setItem(TTY_KEY, ttyBox.checked ? 'on' : 'off'));

setupTheme((dark) => {
  editor.setDark(dark);
  term.setDark(dark);
});

// ---- files ---------------------------------------------------------------------------------

function snapshot(files: EditorFile[] = editor.getFiles()): string {
  return JSON.stringify(files);
}

function currentLanguage(): Language | undefined {
  return languages.find((l) => l.id === languageSelect.value);
}

function renderTabs(): void {
  const tabs = $('tabs');
  const current = editor.currentPath();
  tabs.replaceChildren(
    ...editor.paths().map((p) => {
      const b = el('button', {
        class: 'tab',
        role: 'tab',
        type: 'button',
        'aria-selected': String(p === current),
        'aria-controls': 'editor',
        tabindex: p === current ? '0' : '-1',
        'data-path': p,
      }, p);
      b.addEventListener('click', () => editor.select(p));
      return b;
    }),
  );
  $as<HTMLButtonElement>('delete-file').disabled = editor.paths().length <= 1;
}

let draftTimer: number | undefined;
editor.onChange(() => {
  renderTabs();
  window.clearTimeout(draftTimer);
  draftTimer = window.setTimeout(saveDraft, 400);
});

function saveDraft(): void {
  try {
    localStorage.setItem(
      DRAFT_KEY,
      JSON.stringify({ language: languageSelect.value, files: editor.getFiles(), current: editor.currentPath() }),
    );
  } catch {
    /* full or private: the server's revisions still keep the work */
  }
}

function loadDraft(): { language: string; files: EditorFile[]; current?: string } | null {
  try {
    const d = JSON.parse(localStorage.getItem(DRAFT_KEY) ?? 'null');
    if (d && Array.isArray(d.files) && d.files.length) return d;
  } catch {
    /* a broken draft is ignored */
  }
  return null;
}

/** Keyboard use of a tab list: arrows, Home, End move the selection (the WAI-ARIA pattern). */
function arrowKeys(list: HTMLElement, activate: (b: HTMLElement) => void): void {
  list.addEventListener('keydown', (ev) => {
    const tabs = Array.from(list.querySelectorAll<HTMLElement>('[role=tab]'));
    const i = tabs.indexOf(document.activeElement as HTMLElement);
    if (i < 0) return;
    let j = i;
    if (ev.key === 'ArrowRight' || ev.key === 'ArrowDown') j = (i + 1) % tabs.length;
    else if (ev.key === 'ArrowLeft' || ev.key === 'ArrowUp') j = (i - 1 + tabs.length) % tabs.length;
    else if (ev.key === 'Home') j = 0;
    else if (ev.key === 'End') j = tabs.length - 1;
    else return;
    ev.preventDefault();
    activate(tabs[j]);
    list.querySelectorAll<HTMLElement>('[role=tab]')[j]?.focus();
  });
}

arrowKeys($('tabs'), (b) => editor.select(b.dataset.path ?? ''));

/** Asks for a name in a dialog; null when cancelled. */
function askName(title: string, initial: string, check: (name: string) => string | null): Promise<string | null> {
  const dialog = $as<HTMLDialogElement>('ask');
  const input = $as<HTMLInputElement>('ask-input');
  const err = $('ask-error');
  $('ask-title').textContent = title;
  input.value = initial;
  err.hidden = true;
  return new Promise((resolve) => {
    const form = $as<HTMLFormElement>('ask-form');
    const done = (v: string | null) => {
      form.removeEventListener('submit', submit);
      $('ask-cancel').removeEventListener('click', cancel);
      dialog.removeEventListener('cancel', cancel);
      if (dialog.open) dialog.close();
      resolve(v);
    };
    const submit = (ev: Event) => {
      ev.preventDefault();
      const name = input.value.trim();
      const problem = check(name);
      if (problem) {
        err.textContent = problem;
        err.hidden = false;
        input.focus();
        return;
      }
      done(name);
    };
    const cancel = (ev: Event) => {
      ev.preventDefault();
      done(null);
    };
    form.addEventListener('submit', submit);
    $('ask-cancel').addEventListener('click', cancel);
    dialog.addEventListener('cancel', cancel);
    dialog.showModal();
    input.focus();
    input.select();
  });
}

function nameProblem(name: string, except?: string): string | null {
  const p = validName(name);
  if (p) return p;
  if (name !== except && editor.has(name)) return `There is already a file named ${name}.`;
  const clash = editor.paths().find((x) => x !== except && (x.startsWith(name + '/') || name.startsWith(x + '/')));
  if (clash) return `${name} would be both a file and a folder (${clash}).`;
  return null;
}

$('add-file').addEventListener('click', async () => {
  const name = await askName('New file', '', (n) => nameProblem(n));
  if (name) {
    editor.add(name);
    editor.focus();
  }
});

$('rename-file').addEventListener('click', async () => {
  const from = editor.currentPath();
  const name = await askName(`Rename ${from}`, from, (n) => nameProblem(n, from));
  if (name && name !== from) editor.rename(from, name);
  editor.focus();
});

$('delete-file').addEventListener('click', async () => {
  const path = editor.currentPath();
  if (editor.paths().length <= 1) return;
  const answer = await askName(`Delete ${path}? Type its name to confirm`, '', (n) =>
    n === path ? null : `Type ${path} to delete it, or Cancel.`,
  );
  if (answer === path) editor.remove(path);
  editor.focus();
});

// ---- languages and assignments -------------------------------------------------------------

async function loadLanguages(preferred: string): Promise<void> {
  try {
    languages = await api<Language[]>('GET', '/languages');
  } catch (e) {
    showError(e);
    return;
  }
  languageSelect.replaceChildren(
    ...languages.map((l) => {
      const o = el('option', { value: l.id }, l.available ? l.name : `${l.name} (unavailable)`);
      if (!l.available) {
        o.disabled = true;
        o.title = l.reason ?? 'not installed on the server';
      }
      return o;
    }),
  );
  const pick = languages.find((l) => l.id === preferred && l.available) ?? languages.find((l) => l.available);
  if (pick) languageSelect.value = pick.id;
  languageSelect.disabled = false;
}

languageSelect.addEventListener('change', () => {
  const lang = currentLanguage();
  if (!lang) return;
  if (!editor.has(lang.source)) {
    // A fresh start (one untouched template) is replaced; otherwise the new file is added.
    const files = editor.getFiles();
    const untouched = files.length === 1 && Object.values(templateMap()).includes(files[0].content);
    if (untouched) editor.setFiles([{ path: lang.source, content: template(lang.id) }]);
    else editor.add(lang.source, template(lang.id));
  } else {
    editor.select(lang.source);
  }
  saveDraft();
});

function templateMap(): Record<string, string> {
  const m: Record<string, string> = {};
  for (const l of languages) m[l.id] = template(l.id);
  m[''] = '';
  return m;
}

async function loadSuites(): Promise<void> {
  let suites: SuiteInfo[];
  try {
    suites = await api<SuiteInfo[]>('GET', '/suites');
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) showError(e);
    return;
  }
  const saved = localStorage.getItem(SUITE_KEY) ?? '';
  suiteSelect.replaceChildren(
    el('option', { value: '' }, suites.length ? '(pick one)' : '(none yet)'),
    ...suites.map((s) => el('option', { value: s.id }, s.name === s.id ? s.id : `${s.name} (${s.id})`)),
  );
  if (suites.some((s) => s.id === saved)) suiteSelect.value = saved;
}

suiteSelect.addEventListener('change', () => localStorage.setItem(SUITE_KEY, suiteSelect.value));

// ---- panels --------------------------------------------------------------------------------

type PanelName = 'terminal' | 'checks' | 'history';

function setPanel(name: PanelName): void {
  for (const p of ['terminal', 'checks', 'history'] as PanelName[]) {
    const tab = $(`tab-${p}`);
    tab.setAttribute('aria-selected', String(p === name));
    tab.tabIndex = p === name ? 0 : -1;
    $(`panel-${p}`).hidden = p !== name;
  }
  if (name === 'terminal') term.resize();
  if (name === 'history') void loadHistory();
}

for (const p of ['terminal', 'checks', 'history'] as PanelName[]) {
  $(`tab-${p}`).addEventListener('click', () => setPanel(p));
}
arrowKeys($('tab-terminal').parentElement!, (b) => setPanel(b.id.replace('tab-', '') as PanelName));

// ---- busy state ----------------------------------------------------------------------------

function setBusy(b: boolean, running = false): void {
  busy = b;
  runButton.disabled = b;
  checkButton.disabled = b;
  saveButton.disabled = b;
  stopButton.hidden = !running;
  document.body.classList.toggle('busy', b);
  $('panel-terminal').setAttribute('aria-busy', String(running));
}

function status(text: string, kind: '' | 'ok' | 'warn' | 'error' | 'waiting' = ''): void {
  runStatus.textContent = text;
  runStatus.className = `run-status ${kind}`;
}

// ---- Run -----------------------------------------------------------------------------------

/** The user pressed Stop during the current run (its kill is reported as such, not a crash). */
let stopPressed = false;

async function run(): Promise<void> {
  if (busy) return;
  stopPressed = false;
  const lang = currentLanguage();
  if (!lang) return banner('The list of languages has not loaded yet.');
  if (!lang.available) return banner(`${lang.name} is not available on this server: ${lang.reason ?? ''}`);
  if (!editor.has(lang.source)) {
    return banner(
      `${lang.name} programs run from ${lang.source}: add a file with that name (+ File), or rename yours (Rename). ` +
        `The commands are: ${[lang.compile, lang.run].filter(Boolean).join(' then ')}.`,
    );
  }
  banner(null);
  setPanel('terminal');
  setBusy(true);
  term.reset();
  status('Uploading your files…');
  const files = editor.getFiles();
  let outcome = 'error';
  let summary = '';
  let keep = true;
  // What the status said before a `queued` message, said again at `started`. The note waits
  // 400 ms: most queue waits are a few milliseconds.
  let beforeQueue = '';
  const queuedNote = delayedNote(() => {
    beforeQueue = runStatus.textContent ?? '';
    status('⏳ The server is busy: your program starts as soon as a sandbox is free (Stop cancels it).', 'waiting');
  });
  try {
    const id = await upload(files);
    session = new Session({
      stdout: (d) => term.stdout(d),
      stderr: (d) => term.stderr(d),
      waiting: () => {
        status('⌨ The program is waiting for input: type in the terminal and press Enter (Ctrl-D ends the input).', 'waiting');
        document.body.classList.add('waiting');
        term.focus();
      },
      queued: () => queuedNote.arm(),
      started: () => {
        queuedNote.cancel();
        if (queuedNote.shown) status(beforeQueue);
      },
    });
    const s = session;
    await s.open();
    setBusy(true, true);
    const tty = ttyBox.checked;
    // Resizes reach the program only while it runs on a terminal.
    let ttyRunning = false;
    term.attach(
      {
        stdin: (d, eof) => {
          s.stdin(d, eof);
          document.body.classList.remove('waiting');
          status('Running…');
        },
        signal: (n) => s.signal(n),
        resize: (cols, rows) => {
          if (ttyRunning) s.resize(cols, rows);
        },
      },
      tty ? 'tty' : 'pipe',
    );
    term.focus();
    let sandbox: { homedir: string } | { id: string } = { homedir: id };
    if (lang.compile) {
      status('Compiling…');
      term.command(lang.compile);
      const c = await s.run(lang.compile, sandbox, lang.id);
      if (c.status !== 'ok') {
        const d = describeExit(c);
        const text = c.status === 'nonzero_exit' ? `compilation failed (exit status ${c.exit_code})` : `compilation ${d.text}`;
        term.info(text, 'error');
        status(`✗ ${text}. Fix the errors shown above, then Run again.`, 'error');
        outcome = 'compile_error';
        summary = text;
        // Nothing follows a failed compile: its sandbox goes back to the server's pool now
        // instead of waiting out its time (a token holds only a few).
        if (c.sandbox) void api('DELETE', `/sandboxes/${c.sandbox}`).catch(() => undefined);
      } else if (!c.sandbox) {
        throw new Error('The server did not keep the sandbox after compiling; Run again.');
      } else {
        sandbox = { id: c.sandbox };
      }
    }
    if (outcome !== 'compile_error') {
      status('Running…');
      term.command(lang.run);
      ttyRunning = tty;
      // The last step: the server keeps no sandbox after it (each Run starts from the files).
      const e = await s.run(lang.run, { ...sandbox, keep: false }, lang.id, tty ? term.size() : undefined);
      ttyRunning = false;
      const d = describeExit(e, stopPressed);
      term.info(`${d.text} · ${usage(e)}`, d.kind);
      status(`${d.kind === 'ok' ? '✓' : d.kind === 'warn' ? '!' : '✗'} ${d.text} · ${usage(e)}`, d.kind);
      outcome = e.status;
      summary = d.text;
    }
  } catch (e) {
    showError(e);
    const text = e instanceof Error ? e.message : String(e);
    term.info(text, 'error');
    status(`✗ ${text}`, 'error');
    summary = text;
    // Not run at all: no revision (the server refused, or is busy).
    if (e instanceof ApiError && (e.status === 401 || e.status === 429 || e.status === 503)) keep = false;
  } finally {
    session?.close();
    session = null;
    term.attach(null);
    document.body.classList.remove('waiting');
    setBusy(false);
  }
  if (keep) await storeRevision({ kind: 'run', language: lang.id, status: outcome, summary, files });
}

stopButton.addEventListener('click', () => {
  stopPressed = true;
  session?.kill();
  term.focus();
});

// ---- Check ---------------------------------------------------------------------------------

async function check(): Promise<void> {
  if (busy) return;
  const suite = suiteSelect.value;
  if (!suite) {
    banner('Pick an assignment to check against first.');
    suiteSelect.focus();
    return;
  }
  banner(null);
  setPanel('checks');
  setBusy(true);
  const summaryEl = $('check-summary');
  const list = $('check-results');
  list.replaceChildren();
  summaryEl.className = 'summary';
  summaryEl.textContent = `Checking against ${suite}…`;
  $('panel-checks').setAttribute('aria-busy', 'true');
  const files = editor.getFiles();
  try {
    const id = await upload(files);
    // The server keeps the check in the history itself, with its own report's score. Its
    // progress comes as it goes: a class checking at once waits for free graders.
    const got: { report?: Report & { revision?: RevisionMeta }; failure?: ApiError } = {};
    let checks = 0;
    // While it waits: how many go first, and for how long it has waited.
    let ahead: number | null = null;
    let waited = 0;
    const sayQueued = () => {
      const first = ahead === null ? 'other checks are running' : ahead === 0 ? 'yours is next' : `${ahead} ${ahead === 1 ? 'check' : 'checks'} ahead of yours`;
      summaryEl.textContent = `⏳ Waiting for a free grader: ${first}${waited ? ` (${waited} s)` : ''}.`;
    };
    const queuedNote = delayedNote(sayQueued);
    try {
      await apiStream('POST', '/check?format=json', { checks: suite, sandbox: { homedir: id }, revision: { language: languageSelect.value } }, (e) => {
        switch (e.event) {
          case 'queued':
            ahead = typeof e.ahead === 'number' ? e.ahead : null;
            if (queuedNote.shown) sayQueued();
            else queuedNote.arm();
            break;
          case 'heartbeat':
            waited = Math.round(Number(e.elapsed_ms) / 1000);
            if (queuedNote.shown) sayQueued();
            break;
          case 'started':
            queuedNote.cancel();
            checks = Array.isArray(e.checks) ? e.checks.length : 0;
            summaryEl.textContent = `Checking against ${suite}: 0 of ${checks} checks done…`;
            break;
          case 'check':
            summaryEl.textContent = `Checking against ${suite}: ${Number(e.done)} of ${checks} checks done…`;
            break;
          case 'report':
            got.report = e.report as Report & { revision?: RevisionMeta };
            break;
          case 'error':
            got.failure = new ApiError(String(e.message), 0, String(e.error));
            break;
        }
      });
    } finally {
      queuedNote.cancel();
    }
    if (got.failure) throw got.failure;
    const report = got.report;
    if (!report) throw new ApiError('The server ended the check without its report: try again.', 0, 'network');
    renderReport(list, summaryEl, report);
    if (report.revision) {
      lastStored = snapshot(files);
      if (!$('panel-history').hidden) void loadHistory();
    }
  } catch (e) {
    showError(e);
    summaryEl.textContent = e instanceof Error ? e.message : String(e);
    summaryEl.className = 'summary fail';
  } finally {
    $('panel-checks').setAttribute('aria-busy', 'false');
    setBusy(false);
  }
}

// ---- revisions -----------------------------------------------------------------------------

async function storeRevision(r: NewRevision): Promise<RevisionMeta | null> {
  try {
    const m = await api<RevisionMeta>('POST', '/revisions', r);
    lastStored = snapshot(r.files);
    if (!$('panel-history').hidden) void loadHistory();
    return m;
  } catch (e) {
    showError(e);
    return null;
  }
}

async function save(): Promise<void> {
  if (busy) return;
  const files = editor.getFiles();
  const m = await storeRevision({ kind: 'save', language: languageSelect.value, status: 'saved', summary: 'saved', files });
  if (m) banner(`Saved (${timeFull(m.created_at)}).`, 'info');
}

const KIND_LABEL: Record<string, string> = { run: 'Run', check: 'Check', save: 'Save' };

function revisionStatus(r: RevisionMeta): string {
  if (r.kind === 'check') {
    const score = r.score !== null && r.max_score !== null ? ` ${r.score}/${r.max_score}` : '';
    return `${r.suite ?? ''}${score} ${r.status}`;
  }
  if (r.kind === 'save') return 'saved';
  return r.summary || r.status;
}

async function loadHistory(): Promise<void> {
  const list = $('history');
  let revs: RevisionMeta[];
  try {
    revs = await api<RevisionMeta[]>('GET', '/revisions?limit=100');
  } catch (e) {
    showError(e);
    return;
  }
  if (!revs.length) {
    list.replaceChildren(el('li', { class: 'empty' }, 'No revisions yet: Run, Check or Save to keep one.'));
    return;
  }
  list.replaceChildren(
    ...revs.map((r) => {
      const good = r.status === 'ok' || r.status === 'passed' || r.status === 'saved';
      const b = el('button', { type: 'button', class: 'restore', 'aria-label': `Restore the ${KIND_LABEL[r.kind] ?? r.kind} revision of ${timeFull(r.created_at)}` }, 'Restore');
      b.addEventListener('click', () => void restore(r.id));
      return el(
        'li',
        { class: `revision ${r.kind} ${good ? 'good' : 'bad'}`, 'data-revision': r.id },
        el('time', { datetime: new Date(r.created_at * 1000).toISOString(), title: timeFull(r.created_at) }, timeAgo(r.created_at)),
        el('span', { class: 'kind' }, KIND_LABEL[r.kind] ?? r.kind),
        el('span', { class: 'rev-status' }, revisionStatus(r)),
        el('span', { class: 'files' }, `${r.files_count} file${r.files_count === 1 ? '' : 's'} · ${r.language}`),
        b,
      );
    }),
  );
}

async function restore(id: string): Promise<void> {
  if (busy) return;
  try {
    const rev = await api<Revision>('GET', `/revisions/${encodeURIComponent(id)}`);
    // Nothing is lost by a restore: unsaved work becomes a revision first.
    if (snapshot() !== lastStored) {
      await storeRevision({ kind: 'save', language: languageSelect.value, status: 'saved', summary: 'before a restore', files: editor.getFiles() });
    }
    if (languages.some((l) => l.id === rev.language)) languageSelect.value = rev.language;
    editor.setFiles(rev.files);
    lastStored = snapshot(rev.files);
    saveDraft();
    banner(`Restored the ${KIND_LABEL[rev.kind] ?? rev.kind} revision of ${timeFull(rev.created_at)}.`, 'info');
    void loadHistory();
    editor.focus();
  } catch (e) {
    showError(e);
  }
}

$('history-refresh').addEventListener('click', () => void loadHistory());

// ---- keyboard ------------------------------------------------------------------------------

runButton.addEventListener('click', () => void run());
checkButton.addEventListener('click', () => void check());
saveButton.addEventListener('click', () => void save());

// Captured before the editor and the terminal see them, so the shortcuts work everywhere.
window.addEventListener(
  'keydown',
  (ev) => {
    if (document.querySelector('dialog[open]')) return;
    const mod = ev.ctrlKey || ev.metaKey;
    if (!mod) return;
    if (ev.key === 'Enter') {
      ev.preventDefault();
      ev.stopPropagation();
      if (ev.shiftKey) void check();
      else void run();
    } else if (ev.key === 's' || ev.key === 'S') {
      ev.preventDefault();
      ev.stopPropagation();
      void save();
    }
  },
  { capture: true },
);

// ---- start ---------------------------------------------------------------------------------

async function start(): Promise<void> {
  const draft = loadDraft();
  editor.setFiles(draft?.files ?? [{ path: 'main.c', content: template('c') }], draft?.current);
  const languagesLoaded = loadLanguages(draft?.language ?? 'c');
  me = await signIn();
  $('staff-link').hidden = !(me.role === 'staff' || me.role === 'admin');
  watchUnauthorized((m) => {
    me = m;
  });
  await Promise.all([languagesLoaded, loadSuites()]);
  const revs = await api<RevisionMeta[]>('GET', '/revisions?limit=1').catch(() => []);
  if (revs.length) {
    const last = await api<Revision>('GET', `/revisions/${revs[0].id}`).catch(() => null);
    if (last) lastStored = snapshot(last.files);
  }
  document.body.dataset.ready = 'true';
  editor.focus();
}

void start();
