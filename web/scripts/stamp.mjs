// Records which sources the committed bundle was built from: sha256 over the files that make dist/
// (sorted paths; each as "path\0length\0content"). crates/server checks web/dist against it, so a
// change to web/src without `npm run build` fails the tests.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = join(import.meta.dirname, '..');
const SOURCES = ['index.html', 'staff.html', 'package.json', 'package-lock.json', 'vite.config.ts', 'tsconfig.json', 'src', 'public'];

function walk(p, out) {
  const st = statSync(p, { throwIfNoEntry: false });
  if (!st) return;
  if (st.isDirectory()) for (const e of readdirSync(p)) walk(join(p, e), out);
  else if (st.isFile()) out.push(relative(root, p).split('\\').join('/'));
}

export function sourceHash() {
  const files = [];
  for (const s of SOURCES) walk(join(root, s), files);
  files.sort();
  const h = createHash('sha256');
  for (const f of files) {
    const data = readFileSync(join(root, f));
    h.update(`${f}\0${data.length}\0`);
    h.update(data);
  }
  return h.digest('hex');
}

if (process.argv[1] === import.meta.filename) {
  const hash = sourceHash();
  writeFileSync(join(root, 'dist.sha256'), hash + '\n');
  console.log(`web/dist.sha256: ${hash}`);
}
