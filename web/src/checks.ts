// Check results: ✓ passed, ✗ failed, – skipped, with expected vs actual for visible checks.

import { el } from './ui';

interface Observation {
  type: string;
  value: unknown;
  match?: string;
}

interface ScriptEntry {
  expected?: Observation | null;
  actual?: Observation | null;
}

export interface CheckResult {
  dependencies: string[];
  description: string;
  result: boolean | null;
  script: ScriptEntry[];
  points?: number;
  max_points?: number;
  hidden?: boolean;
  message?: string;
  error?: string;
}

export interface Report {
  suite?: string;
  results: Record<string, CheckResult>;
  score?: number;
  max_score?: number;
  passed?: boolean;
  /** The check ids in the suite's order (`?format=json`). */
  order?: string[];
}

export function totals(r: Report): { score: number; max: number; passed: number; failed: number; skipped: number } {
  const rs = Object.values(r.results);
  return {
    score: r.score ?? rs.reduce((a, c) => a + (c.points ?? (c.result ? 1 : 0)), 0),
    max: r.max_score ?? rs.reduce((a, c) => a + (c.max_points ?? 1), 0),
    passed: rs.filter((c) => c.result === true).length,
    failed: rs.filter((c) => c.result === false).length,
    skipped: rs.filter((c) => c.result === null).length,
  };
}

function show(v: unknown): string {
  if (typeof v === 'string') return v;
  return JSON.stringify(v, null, 1);
}

/** The step that failed: the last one whose actual differs from its expectation. */
function mismatch(script: ScriptEntry[]): ScriptEntry | null {
  for (let i = script.length - 1; i >= 0; i--) {
    const s = script[i];
    if (!s.expected || !s.actual) continue;
    if (s.expected.type !== s.actual.type || show(s.expected.value) !== show(s.actual.value)) return s;
  }
  return null;
}

function fmt(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toFixed(2);
}

export function renderReport(list: HTMLElement, summary: HTMLElement, r: Report): void {
  list.replaceChildren();
  const ids = Object.keys(r.results);
  const ordered = r.order?.filter((id) => id in r.results) ?? [];
  for (const id of [...ordered, ...ids.filter((i) => !ordered.includes(i))]) {
    const c = r.results[id];
    const state = c.result === true ? 'pass' : c.result === false ? 'fail' : 'skip';
    const icon = { pass: '✓', fail: '✗', skip: '–' }[state];
    const word = { pass: 'passed', fail: 'failed', skip: 'skipped' }[state];
    const points =
      c.max_points !== undefined && c.max_points > 0 ? el('span', { class: 'points' }, `${fmt(c.points ?? 0)}/${fmt(c.max_points)}`) : null;
    const li = el(
      'li',
      { class: `check ${state}`, 'data-check': id },
      el(
        'div',
        { class: 'check-head' },
        el('span', { class: 'icon', 'aria-hidden': 'true' }, icon),
        el('span', { class: 'sr-only' }, `${word}: `),
        el('span', { class: 'desc' }, c.description || id),
        c.hidden ? el('span', { class: 'tag' }, 'hidden') : null,
        points,
      ),
    );
    if (c.error) li.append(el('p', { class: 'message error' }, `Could not be judged: ${c.error}`));
    if (c.result === false && c.hidden && !c.script.length) {
      li.append(el('p', { class: 'message' }, 'A hidden check: its details are not shown.'));
    } else if (c.result !== true) {
      const m = c.result === false ? mismatch(c.script) : null;
      if (c.message) li.append(el('p', { class: 'message' }, c.message));
      if (m && m.expected && m.actual) {
        li.append(
          el(
            'dl',
            { class: 'diff' },
            el('dt', {}, `expected (${m.expected.type}${m.expected.match ? `, ${m.expected.match}` : ''})`),
            el('dd', {}, el('pre', {}, show(m.expected.value))),
            el('dt', {}, `actual (${m.actual.type})`),
            el('dd', {}, el('pre', {}, show(m.actual.value))),
          ),
        );
      }
    }
    list.append(li);
  }
  const t = totals(r);
  summary.textContent =
    `Score ${fmt(t.score)}/${fmt(t.max)} — ${t.passed} passed, ${t.failed} failed` + (t.skipped ? `, ${t.skipped} skipped` : '') + '.';
  summary.className = `summary ${t.failed || t.skipped ? 'fail' : 'pass'}`;
}
