// End-to-end tests of the browser editor in a real browser: Playwright (playwright-core) driving
// Debian's Chromium, headless, against a real `corral serve` on loopback.
//
//   CORRAL_URL=http://127.0.0.1:PORT CORRAL_TOKEN=<student> CORRAL_STAFF_TOKEN=<staff> node tests/e2e.mjs
//
// The server must serve the suites `greet` and `gshello` (crates/cli/tests/web_e2e.rs starts one that does, and
// runs this script). Screenshots go to $CORRAL_E2E_OUT (default target/web-e2e); with
// CORRAL_E2E_DOCS=DIR a few are also written there (docs/img). Nothing here waits a fixed time:
// every step waits for an event (a message on the page), with generous timeouts.

import { chromium } from 'playwright-core';
import { mkdirSync, mkdtempSync, rmSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const BASE = process.env.CORRAL_URL;
const TOKEN = process.env.CORRAL_TOKEN;
const STAFF = process.env.CORRAL_STAFF_TOKEN;
if (!BASE || !TOKEN || !STAFF) {
  console.error('e2e: set CORRAL_URL, CORRAL_TOKEN (student) and CORRAL_STAFF_TOKEN');
  process.exit(2);
}
const OUT = resolve(process.env.CORRAL_E2E_OUT ?? join(import.meta.dirname, '../../target/web-e2e'));
const DOCS = process.env.CORRAL_E2E_DOCS ? resolve(process.env.CORRAL_E2E_DOCS) : null;
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const LONG = 90_000; // a run or a check on a busy machine
mkdirSync(OUT, { recursive: true });
if (DOCS) mkdirSync(DOCS, { recursive: true });

const GREET = `#include <stdio.h>
#include <string.h>

int main(void)
{
    char name[100];
    printf("What is your name? ");
    if (fgets(name, sizeof name, stdin) == NULL)
    {
        return 1;
    }
    name[strcspn(name, "\\n")] = '\\0';
    printf("hello, %s\\n", name);
    return 0;
}
`;

const ERRORS = `#include <stdio.h>

int main(void)
{
    char line[100];
    if (fgets(line, sizeof line, stdin) == NULL)
    {
        return 1;
    }
    printf("read %s", line);
    fprintf(stderr, "something went wrong\\n");
    return 3;
}
`;

const LOOP = `int main(void)
{
    volatile unsigned long n = 0;
    while (1)
    {
        n++;
    }
}
`;

const SLEEPER = `#include <stdio.h>
#include <unistd.h>

int main(void)
{
    printf("ready\\n");
    fflush(stdout);
    for (;;)
    {
        pause();
    }
}
`;

// Playwright starts Chromium with a fresh, empty --user-data-dir of its own (in TMPDIR, removed on
// close); it refuses one in `args`. TMPDIR is pointed at a folder of ours, removed at the end too.
const userData = mkdtempSync(join(tmpdir(), 'corral-e2e-chromium-'));
const browser = await chromium.launch({
  env: { ...process.env, TMPDIR: userData },
  executablePath: CHROMIUM,
  headless: true,
  args: [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
});

let passed = 0;
let failed = 0;
const problems = [];

/** Fails the page on anything that left loopback, CSP violations and uncaught errors. */
function watch(page, name) {
  const origin = new URL(BASE).origin;
  page.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith(origin) && !u.startsWith('data:') && !u.startsWith('blob:') && !u.startsWith(origin.replace('http', 'ws'))) {
      problems.push(`${name}: a request outside the server: ${u}`);
    }
  });
  page.on('console', (m) => {
    const t = m.text();
    if (/Content Security Policy|Refused to/i.test(t)) problems.push(`${name}: CSP: ${t}`);
  });
  page.on('pageerror', (e) => problems.push(`${name}: uncaught: ${e.message}`));
}

async function newPage(viewport = { width: 1280, height: 800 }, token = TOKEN, name = 'page') {
  const ctx = await browser.newContext({ viewport, baseURL: BASE });
  const page = await ctx.newPage();
  page.setDefaultTimeout(30_000);
  watch(page, name);
  if (token !== null) await signIn(page, token);
  return page;
}

async function signIn(page, token, path = '/') {
  await page.goto(path);
  const dialog = page.getByRole('dialog', { name: /sign in/i });
  await dialog.waitFor();
  await page.getByLabel(/token/i).fill(token);
  await page.getByLabel(/token/i).press('Enter');
  await page.locator('body[data-ready=true]').waitFor();
}

async function shot(page, name, docs = false) {
  const file = join(OUT, `${name}.png`);
  await page.screenshot({ path: file });
  if (docs && DOCS) copyFileSync(file, join(DOCS, `${name}.png`));
}

/** What the terminal shows (xterm's rows), spaces normalised. */
async function terminalText(page) {
  return (await page.locator('#terminal .xterm-rows').innerText()).replace(/\u00a0/g, ' ');
}

async function waitTerminal(page, text, timeout = LONG) {
  await page.waitForFunction(
    (t) => (document.querySelector('#terminal .xterm-rows')?.textContent ?? '').replace(/\u00a0/g, ' ').includes(t),
    text,
    { timeout },
  );
}

async function waitStatus(page, re, timeout = LONG) {
  await page.waitForFunction(
    ([src, flags]) => new RegExp(src, flags).test(document.getElementById('run-status')?.textContent ?? ''),
    [re.source, re.flags],
    { timeout },
  );
  return page.locator('#run-status').innerText();
}

/** Replaces the current file's text (insertText: what a paste does, without auto-indent). */
async function setCode(page, code) {
  await page.locator('.cm-content').click();
  await page.keyboard.press('Control+A');
  await page.keyboard.press('Delete');
  await page.keyboard.insertText(code);
}

async function editorText(page) {
  return page.evaluate(() =>
    Array.from(document.querySelectorAll('.cm-content .cm-line'))
      .map((l) => l.textContent)
      .join('\n'),
  );
}

function assert(cond, msg) {
  if (!cond) throw new Error(`assertion failed: ${msg}`);
}

async function test(name, page, f) {
  const started = Date.now();
  try {
    await f();
    passed++;
    console.log(`ok   ${name} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e.stack ?? e}`);
    if (page) {
      try {
        await page.screenshot({ path: join(OUT, `FAILED-${name.replace(/\W+/g, '_')}.png`) });
        console.log(`     terminal: ${JSON.stringify(await terminalText(page).catch(() => ''))}`);
        console.log(`     status: ${JSON.stringify(await page.locator('#run-status').innerText().catch(() => ''))}`);
      } catch {
        /* the page is gone */
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------

const page = await newPage(undefined, null, 'editor');

await test('an invalid token is refused with a clear message, a valid one signs in', page, async () => {
  await page.goto('/');
  await page.getByRole('dialog', { name: /sign in/i }).waitFor();
  await page.getByLabel(/token/i).fill('corral_not_a_real_token');
  await page.getByLabel(/token/i).press('Enter');
  const err = page.locator('#login-error');
  await err.waitFor({ state: 'visible' });
  assert(/not accepted/i.test(await err.innerText()), `login error: ${await err.innerText()}`);
  await shot(page, 'login-refused');
  await page.getByLabel(/token/i).fill(TOKEN);
  await page.getByLabel(/token/i).press('Enter');
  await page.locator('body[data-ready=true]').waitFor();
  assert((await page.locator('#who').innerText()).startsWith('student'), 'signed in as a student');
  // The language menu comes from /languages; C is there and chosen.
  assert((await page.locator('#language').inputValue()) === 'c', 'C is the default language');
  const names = await page.locator('#language option').allInnerTexts();
  for (const l of ['C', 'C++', 'Python 3', 'Java']) assert(names.some((n) => n.startsWith(l)), `${l} in ${names}`);
});

await test('every control has a label and Run/Check are reachable by keyboard', page, async () => {
  const unlabelled = await page.evaluate(() => {
    const bad = [];
    for (const e of document.querySelectorAll('button, select, input, [role=tab]')) {
      if (e.closest('dialog:not([open])') || e.closest('[hidden]')) continue;
      const id = e.id;
      const label =
        e.getAttribute('aria-label') ||
        (id && document.querySelector(`label[for="${id}"]`)?.textContent) ||
        e.textContent?.trim();
      if (!label) bad.push(e.outerHTML.slice(0, 80));
    }
    return bad;
  });
  assert(unlabelled.length === 0, `unlabelled controls: ${unlabelled.join(', ')}`);
  // Tabbing from the top reaches Run, then Check, each a focusable button.
  await page.locator('#language').focus();
  const order = [];
  for (let i = 0; i < 8; i++) {
    await page.keyboard.press('Tab');
    order.push(await page.evaluate(() => document.activeElement?.id ?? ''));
  }
  assert(order.includes('run') && order.includes('check'), `tab order: ${order}`);
  assert(order.indexOf('run') < order.indexOf('check'), `Run before Check: ${order}`);
});

await test('tabs: add, rename and delete a file (with name checks)', page, async () => {
  await page.getByRole('button', { name: 'Add a file' }).click();
  const dlg = page.locator('#ask');
  await dlg.waitFor({ state: 'visible' });
  await page.locator('#ask-input').fill('../escape.txt');
  await page.locator('#ask-input').press('Enter');
  await page.locator('#ask-error').waitFor({ state: 'visible' });
  assert(/not allowed/.test(await page.locator('#ask-error').innerText()), 'a ".." name is refused');
  await page.locator('#ask-input').fill('notes.txt');
  await page.locator('#ask-input').press('Enter');
  await page.getByRole('tab', { name: 'notes.txt' }).waitFor();
  assert((await page.getByRole('tab', { name: 'notes.txt' }).getAttribute('aria-selected')) === 'true', 'the new file is selected');
  await page.keyboard.insertText('some notes');
  await page.getByRole('button', { name: 'Rename this file' }).click();
  await page.locator('#ask-input').fill('docs/README.txt');
  await page.locator('#ask-input').press('Enter');
  await page.getByRole('tab', { name: 'docs/README.txt' }).waitFor();
  assert((await page.getByRole('tab', { name: 'notes.txt' }).count()) === 0, 'renamed');
  assert((await editorText(page)) === 'some notes', 'the content survives a rename');
  await page.getByRole('tab', { name: 'main.c' }).click();
  await page.getByRole('tab', { name: 'docs/README.txt' }).click();
  await page.getByRole('button', { name: 'Delete this file' }).click();
  await page.locator('#ask-input').fill('docs/README.txt');
  await page.locator('#ask-input').press('Enter');
  await page.getByRole('tab', { name: 'docs/README.txt' }).waitFor({ state: 'detached' });
  assert((await page.getByRole('tab').filter({ hasText: 'main.c' }).count()) === 1, 'main.c is left');
});

await test('Run: a C program that reads a name, answered at its prompt, greets', page, async () => {
  await page.getByRole('tab', { name: 'main.c' }).click();
  await setCode(page, GREET);
  // Keyboard only: Ctrl+Enter runs from the editor.
  await page.keyboard.press('Control+Enter');
  await waitTerminal(page, '$ gcc');
  await waitStatus(page, /waiting for input/i);
  await waitTerminal(page, 'What is your name?');
  const t = await terminalText(page);
  assert(t.includes('$ ./main'), `the run command is shown: ${t}`);
  // The terminal has the focus: type the answer.
  await page.keyboard.type('David');
  await page.keyboard.press('Enter');
  const status = await waitStatus(page, /exited with status 0/);
  await waitTerminal(page, 'hello, David');
  assert(/time .* s .*memory .*(KiB|MiB|B)/.test(status), `time and memory are shown: ${status}`);
  await shot(page, 'editor-run', true);
});

await test('Run without a terminal: stderr in red, typed input echoed by the editor', page, async () => {
  await page.getByLabel('Run in a terminal').uncheck();
  await setCode(page, ERRORS);
  await page.keyboard.press('Control+Enter');
  await waitStatus(page, /waiting for input/i);
  await page.keyboard.type('abc');
  await page.keyboard.press('Backspace');
  await page.keyboard.press('Enter');
  const status = await waitStatus(page, /exited with status 3/);
  assert(/!/.test(status), status);
  await waitTerminal(page, 'read ab');
  const red = await page.locator('#terminal .xterm-rows span[class*="xterm-fg-1"]').allInnerTexts();
  assert(red.join('').includes('something went wrong'), `stderr is red: ${red}`);
  assert(!red.join('').includes('read ab'), 'stdout is not');
  await page.getByLabel('Run in a terminal').check();
});

await test('Run: a compile error is shown in red and nothing runs', page, async () => {
  await setCode(page, 'int main(void) { return x; }\n');
  await page.getByRole('button', { name: /Run/ }).click();
  await waitStatus(page, /compilation failed/, LONG);
  const t = await terminalText(page);
  assert(/.x. undeclared/.test(t), `the compiler's message: ${t}`);
  assert(!t.includes('$ ./main'), 'the program does not run');
  // stderr is drawn in red: xterm gives the cells a color class.
  const red = await page.locator('#terminal .xterm-rows span[class*="xterm-fg-1"]').count();
  assert(red > 0, 'stderr is red');
});

await test('Run: an infinite loop is stopped by its limit, with a clear message', page, async () => {
  await setCode(page, LOOP);
  await page.getByRole('button', { name: /Run/ }).click();
  const status = await waitStatus(page, /stopped:/, 120_000);
  assert(/CPU time limit of \S+ exceeded|wall time limit/.test(status), `the limit is named: ${status}`);
  await waitTerminal(page, 'stopped:');
  await shot(page, 'editor-limit');
});

await test('Run: Ctrl-C in the terminal interrupts the program (SIGINT)', page, async () => {
  await setCode(page, SLEEPER);
  await page.keyboard.press('Control+Enter');
  await waitTerminal(page, 'ready');
  await page.locator('#terminal').click();
  await page.keyboard.press('Control+C');
  const status = await waitStatus(page, /interrupted/);
  assert(/SIGINT/.test(status), status);
  await waitTerminal(page, '^C');
});

await test('Run keeps no sandbox on the server once it ended (a compile error included)', page, async () => {
  // The runs above: a compile and its run, a compile error, a limit, an interrupt. Each Run's
  // last step asks the server to keep no sandbox, and a failed compile deletes its own, so none
  // waits out its time holding a place of the token's few.
  const held = async () => {
    const r = await fetch(`${BASE}/metrics`, { headers: { Authorization: `Bearer ${STAFF}` } });
    const m = /^corral_held_sandboxes (\d+)$/m.exec(await r.text());
    return m ? Number(m[1]) : NaN;
  };
  // The compile error's delete goes out without being waited for: give it until the deadline.
  const deadline = Date.now() + 10_000;
  let n = await held();
  while (n !== 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    n = await held();
  }
  assert(n === 0, `kept sandboxes after the editor's runs: ${n}`);
});

await test('other languages: Python (no compile step), Java, Ruby and Go, picked from the menu', page, async () => {
  await page.locator('#language').selectOption('python');
  await page.getByRole('tab', { name: 'main.py' }).waitFor();
  await setCode(page, 'name = input("Name: ")\nprint(f"hi, {name}")\n');
  await page.keyboard.press('Control+Enter');
  await waitStatus(page, /waiting for input/i);
  await waitTerminal(page, 'Name: ');
  assert(!(await terminalText(page)).includes('$ gcc'), 'nothing is compiled');
  await page.keyboard.type('Guido');
  await page.keyboard.press('Enter');
  await waitStatus(page, /exited with status 0/);
  await waitTerminal(page, 'hi, Guido');
  await page.locator('#language').selectOption('java');
  await page.getByRole('tab', { name: 'Main.java' }).waitFor();
  await page.keyboard.press('Control+Enter');
  await waitStatus(page, /exited with status 0/, 180_000);
  await waitTerminal(page, '$ javac Main.java');
  await waitTerminal(page, 'hello, world');
  // Rust: its toolchain lives outside /usr (rustup); the language's paths and environment apply.
  const rust = await page.locator('#language option[value=rust]');
  if ((await rust.count()) === 1 && !(await rust.isDisabled())) {
    await page.locator('#language').selectOption('rust');
    await page.getByRole('tab', { name: 'main.rs' }).waitFor();
    await page.keyboard.press('Control+Enter');
    await waitStatus(page, /exited with status 0/, 180_000);
    await waitTerminal(page, '$ rustc');
    await waitTerminal(page, 'hello, world');
  } else {
    console.log('     note: Rust is not available on this server (optional); its run was not tried');
  }
  // Two of the seed's other languages: Ruby (a prompt answered in the terminal) and Go (compiled).
  await page.locator('#language').selectOption('ruby');
  await page.getByRole('tab', { name: 'main.rb' }).waitFor();
  await setCode(page, 'print "Name: "\nname = gets.chomp\nputs "hi, #{name}"\n');
  await page.keyboard.press('Control+Enter');
  await waitStatus(page, /waiting for input/i);
  await waitTerminal(page, 'Name: ');
  await page.keyboard.type('Matz');
  await page.keyboard.press('Enter');
  await waitStatus(page, /exited with status 0/);
  await waitTerminal(page, 'hi, Matz');
  await page.locator('#language').selectOption('go');
  await page.getByRole('tab', { name: 'main.go' }).waitFor();
  await page.keyboard.press('Control+Enter');
  await waitStatus(page, /exited with status 0/, 180_000);
  await waitTerminal(page, '$ go build');
  await waitTerminal(page, 'hello, world');
  // Back to C: its file is still there.
  await page.locator('#language').selectOption('c');
  assert((await page.getByRole('tab', { name: 'main.c' }).getAttribute('aria-selected')) === 'true', 'main.c is selected');
});

await test('Check: results with one failing check, expected vs actual, points and total', page, async () => {
  await setCode(page, GREET);
  await page.locator('#suite').selectOption('greet');
  // Every text the summary shows on the way (the checks' progress streams in).
  await page.evaluate(() => {
    const el = document.getElementById('check-summary');
    window.summaries = [];
    // From the records: lines read in one go set the text several times before an observer runs.
    new MutationObserver((records) => {
      for (const r of records) for (const n of r.addedNodes) window.summaries.push(n.textContent);
    }).observe(el, { childList: true, subtree: true });
  });
  // Keyboard only: Ctrl+Shift+Enter checks.
  await page.locator('.cm-content').click();
  await page.keyboard.press('Control+Shift+Enter');
  await page.waitForFunction(() => /Score/.test(document.getElementById('check-summary')?.textContent ?? ''), null, { timeout: LONG });
  const seen = await page.evaluate(() => window.summaries);
  for (const done of [0, 1, 5]) {
    assert(seen.includes(`Checking against greet: ${done} of 5 checks done…`), `progress ${done} of 5 was shown: ${JSON.stringify(seen)}`);
  }
  const summary = await page.locator('#check-summary').innerText();
  assert(summary.includes('Score 5/6'), `score: ${summary}`);
  assert(summary.includes('4 passed, 1 failed'), summary);
  const order = await page.locator('#check-results li .desc').allInnerTexts();
  assert(order[0] === 'main.c exists' && order[1] === 'main.c compiles', `the suite's order: ${order}`);
  const fails = page.locator('#check-results li.fail');
  assert((await fails.count()) === 1, 'exactly one check fails');
  const fail = await fails.innerText();
  assert(fail.includes('greets with an exclamation mark'), fail);
  assert(/expected/.test(fail) && fail.includes('hello, Grace!') && fail.includes('actual'), `expected vs actual: ${fail}`);
  const pass = await page.locator('#check-results li.pass').allInnerTexts();
  assert(pass.some((p) => p.includes('greets David by name') && p.includes('2/2')), `points: ${pass}`);
  assert(pass.some((p) => p.includes('hidden')), 'the hidden check is listed, marked hidden');
  await shot(page, 'editor-check', true);
});

await test('Check: a compile error fails one check and skips those that depend on it', page, async () => {
  await setCode(page, 'int main(void) { return x; }\n');
  await page.getByRole('button', { name: /Check/ }).click();
  await page.waitForFunction(() => /Score 1\/6/.test(document.getElementById('check-summary')?.textContent ?? ''), null, { timeout: LONG });
  assert((await page.locator('#check-summary').innerText()).includes('1 passed, 1 failed, 3 skipped'), 'the counts');
  const skipped = page.locator('#check-results li.skip');
  assert((await skipped.count()) === 3, 'three skipped');
  const text = await skipped.first().innerText();
  assert(text.includes('–') && /can't check until/.test(text), `a skipped check says why: ${text}`);
  const failed = await page.locator('#check-results li.fail').innerText();
  assert(failed.includes('main.c compiles') && /undeclared/.test(failed), `the compiler's message: ${failed}`);
});

await test('History: revisions of runs, checks and saves; restoring an older one', page, async () => {
  await setCode(page, '// scratch work\n');
  await page.keyboard.press('Control+S');
  await page.locator('#banner').filter({ hasText: 'Saved' }).waitFor();
  await page.getByRole('tab', { name: 'History' }).click();
  await page.locator('#history li.revision').first().waitFor();
  const items = await page.locator('#history li.revision').allInnerTexts();
  assert(items.length >= 7, `revisions: ${items.length}`);
  assert(/Save/.test(items[0]), `newest first, the save: ${items[0]}`);
  assert(items.some((i) => /Check/.test(i) && i.includes('greet 5/6 failed')), `the check: ${items}`);
  assert(items.some((i) => /Run/.test(i) && /CPU time limit|stopped/.test(i)), `the limit run: ${items}`);
  await shot(page, 'editor-history', true);
  // Restore the infinite loop's revision (a run stopped by its limit).
  const loopRev = page.locator('#history li.revision').filter({ hasText: /stopped/ }).first();
  await loopRev.getByRole('button', { name: /Restore/ }).click();
  await page.locator('#banner').filter({ hasText: 'Restored' }).waitFor();
  const text = await editorText(page);
  assert(text.includes('while (1)') && text.includes('n++'), `restored: ${text}`);
  // The scratch work is not lost: it was saved before.
  const after = await page.locator('#history li.revision').allInnerTexts();
  assert(after.length >= items.length, 'nothing removed');
});

await test('Run: Stop ends the program and says so (not "killed by signal SIGKILL")', page, async () => {
  await setCode(page, SLEEPER);
  await page.keyboard.press('Control+Enter');
  await waitTerminal(page, 'ready');
  await page.locator('#stop').click();
  const status = await waitStatus(page, /stopped \(you pressed Stop\)/);
  assert(!/SIGKILL/.test(status), status);
});

await test('errors: 429 and 503 are explained, with when to try again', page, async () => {
  await page.getByRole('tab', { name: 'Terminal' }).click();
  await page.route('**/upload', (r) =>
    r.fulfill({ status: 429, headers: { 'Retry-After': '7', 'Content-Type': 'application/json' }, body: '{"error":"rate_limited","message":"too many requests"}' }),
  );
  await page.getByRole('button', { name: /Run/ }).click();
  await page.locator('#banner').filter({ hasText: 'Too many requests' }).waitFor();
  assert(/Try again in \d+ s/.test(await page.locator('#banner').innerText()), 'Retry-After is shown');
  await page.unroute('**/upload');
  await page.route('**/upload', (r) =>
    r.fulfill({ status: 503, headers: { 'Retry-After': '3', 'Content-Type': 'application/json' }, body: '{"error":"overloaded","message":"busy"}' }),
  );
  await page.getByRole('button', { name: /Run/ }).click();
  await page.locator('#banner').filter({ hasText: 'busy right now' }).waitFor();
  await page.unroute('**/upload');
  assert(!(await page.locator('#run').isDisabled()), 'Run is usable again');
});

await test('Check: a grading that fails after it started says why', page, async () => {
  const isCheck = (url) => url.pathname === '/check';
  await page.route(isCheck, (r) =>
    r.fulfill({
      status: 200,
      headers: { 'Content-Type': 'application/x-ndjson' },
      body: '{"event":"started","checks":["a","b"]}\n{"event":"check","done":1,"of":2,"id":"a","result":true}\n{"event":"error","error":"invalid","message":"the suite broke half-way"}\n',
    }),
  );
  await page.getByRole('button', { name: /Check/ }).click();
  await page.locator('#check-summary').filter({ hasText: 'the suite broke half-way' }).waitFor();
  await page.unroute(isCheck);
  assert(!(await page.locator('#check').isDisabled()), 'Check is usable again');
});

await test('a revoked or expired token (401) asks to sign in again', page, async () => {
  await page.evaluate(() => localStorage.setItem('corral.token', 'corral_expired_token'));
  await page.getByRole('button', { name: 'Save' }).click();
  const dialog = page.getByRole('dialog', { name: /sign in/i });
  await dialog.waitFor();
  assert(/not accepted/.test(await page.locator('#login-error').innerText()), 'the reason is shown');
  await page.getByLabel(/token/i).fill(TOKEN);
  await page.getByLabel(/token/i).press('Enter');
  await page.locator('#banner').filter({ hasText: 'Signed in again' }).waitFor();
});

await test('dark theme', page, async () => {
  await page.getByRole('button', { name: /dark theme/i }).click();
  assert((await page.evaluate(() => document.documentElement.dataset.theme)) === 'dark', 'dark');
  await page.getByRole('tab', { name: 'Terminal' }).click();
  await setCode(page, GREET);
  await page.keyboard.press('Control+Enter');
  await waitStatus(page, /waiting for input/i);
  await page.keyboard.type('Grace Hopper');
  await page.keyboard.press('Enter');
  await waitStatus(page, /exited with status 0/);
  await shot(page, 'editor-dark', true);
  await page.getByRole('button', { name: /light theme/i }).click();
});

await test('Check with a Gradescope autograder: each of its tests is a row with points and output; a hidden one is left out', page, async () => {
  await setCode(page, GREET);
  await page.locator('#suite').selectOption('gshello');
  await page.getByRole('button', { name: /Check/ }).click();
  await page.waitForFunction(() => /Score 3\/4/.test(document.getElementById('check-summary')?.textContent ?? ''), null, { timeout: LONG });
  const row = (id) => page.locator(`#check-results li[data-check="${id}"]`);
  const cls = async (id) => (await row(id).getAttribute('class')) ?? '';
  const parent = await row('autograder').innerText();
  assert(parent.includes("the course's Gradescope autograder") && parent.includes('autograder score: 3/4'), `the autograder's row: ${parent}`);
  const greets = await row('autograder/1').innerText();
  assert((await cls('autograder/1')).includes('pass') && greets.includes('greets Ada') && greets.includes('2/2'), `a passing test: ${greets}`);
  const exclaims = await row('autograder/2').innerText();
  assert(
    (await cls('autograder/2')).includes('fail') && exclaims.includes('0/1') && exclaims.includes('no exclamation mark'),
    `a failing test with its output: ${exclaims}`,
  );
  // A `hidden` test is never shown to students, as on Gradescope; its point still counts (3/4).
  assert((await row('autograder/3').count()) === 0, 'a hidden test is shown to a student');
  const all = await page.locator('#check-results').innerText();
  assert(!all.includes('secret test') && !all.includes('staff only'), `a hidden test's name or output shown: ${all}`);
  await shot(page, 'editor-check-gradescope');
});

const phone = await newPage({ width: 390, height: 844 }, TOKEN, 'phone');
await test('a phone-sized screen: one column, no sideways scrolling, Run works', phone, async () => {
  const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert(overflow <= 1, `sideways overflow of ${overflow}px`);
  const run = await phone.locator('#run').boundingBox();
  assert(run && run.x >= 0 && run.x + run.width <= 390, 'Run is on screen');
  // A fresh browser (no draft): type the greeting and run it by touch.
  await setCode(phone, GREET);
  await phone.locator('#run').tap().catch(() => phone.locator('#run').click());
  await waitStatus(phone, /waiting for input/i);
  await phone.keyboard.type('Ada');
  await phone.keyboard.press('Enter');
  await waitStatus(phone, /exited with status 0/);
  await shot(phone, 'editor-phone', true);
});

const staff = await newPage(undefined, null, 'staff');
await test('staff page: assignments, the queue, the editor\'s checks, a gradebook as CSV', staff, async () => {
  // A student's submission to the queue, judged before the page loads.
  const headers = { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' };
  const sub = await (await fetch(`${BASE}/submissions`, { method: 'POST', headers, body: JSON.stringify({ language: 'python', source_code: 'print(6 * 7)\n', expected_output: '42\n' }) })).json();
  const judged = await (await fetch(`${BASE}/submissions/${sub.id}?wait=true&timeout=25`, { headers })).json();
  assert(judged.verdict === 'accepted', `the queued submission: ${JSON.stringify(judged)}`);
  const graded = await (await fetch(`${BASE}/submissions`, { method: 'POST', headers, body: JSON.stringify({ suite: 'greet', files: [{ path: 'main.c', content: GREET }] }) })).json();
  const gradedDone = await (await fetch(`${BASE}/submissions/${graded.id}?wait=true&timeout=25`, { headers })).json();
  assert(gradedDone.status === 'done', `the greet submission: ${JSON.stringify(gradedDone)}`);
  await signIn(staff, STAFF, '/staff.html');
  await staff.locator('#suites tbody tr').filter({ hasText: 'greet' }).waitFor();
  const queue = await staff.locator('#queue tbody tr').allInnerTexts();
  assert(queue.some((r) => r.includes(sub.id) && r.includes('python') && r.includes('accepted') && r.includes('1/1')), `queue: ${queue}`);
  const rows = await staff.locator('#recent tbody tr').allInnerTexts();
  assert(rows.some((r) => r.includes('greet') && r.includes('failed') && r.includes('5/6')), `recent: ${rows}`);
  const [download] = await Promise.all([
    staff.waitForEvent('download'),
    staff.getByRole('button', { name: 'Download the gradebook of greet (CSV)' }).click(),
  ]);
  assert(download.suggestedFilename() === 'gradebook-greet.csv', download.suggestedFilename());
  const csv = await (await import('node:fs/promises')).readFile(await download.path(), 'utf8');
  // Then a column per report row (its points, or pass / fail / skip), as `corral grade`'s.
  assert(csv.startsWith('student,owner,submission,score,max_score,percent,verdict,status,submitted_at,finished_at,'), `gradebook: ${csv}`);
  assert(csv.split('\n')[0].split(',').includes('greets'), `a column per check: ${csv}`);
  assert(csv.includes(graded.id), `the greet submission is in its gradebook: ${csv}`);
  // The queue of one assignment, then that assignment regraded (after staff confirm).
  await staff.getByRole('combobox', { name: 'Submissions of' }).selectOption('greet');
  // The python submission is not greet's: it goes; greet's stays.
  await staff.locator('#queue tbody tr').filter({ hasText: sub.id }).waitFor({ state: 'detached' });
  const greetOnly = await staff.locator('#queue tbody tr').allInnerTexts();
  assert(greetOnly.length === 1 && greetOnly[0].includes(graded.id), `greet's queue: ${greetOnly}`);
  staff.once('dialog', (d) => void d.accept());
  await staff.getByRole('button', { name: "Regrade every student's latest submission of greet" }).click();
  await staff.locator('#banner').filter({ hasText: 'greet: 1 regrade queued.' }).waitFor();
  await staff.locator('#queue tbody tr').filter({ hasText: '(regrade)' }).first().waitFor();
  await shot(staff, 'staff', true);
  // A student is told the page is not for them.
  const s2 = await newPage(undefined, null, 'staff-as-student');
  await s2.goto('/staff.html');
  await s2.getByLabel(/token/i).fill(TOKEN);
  await s2.getByLabel(/token/i).press('Enter');
  await s2.locator('#banner').filter({ hasText: 'for staff' }).waitFor();
});

await test('nothing was fetched from elsewhere, no CSP violation, no uncaught error', null, async () => {
  assert(problems.length === 0, problems.join('\n'));
});

await browser.close();
rmSync(userData, { recursive: true, force: true });
console.log(`screenshots: ${OUT}`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
