// The code editor: CodeMirror 6, one EditorState per file, tabs to switch, highlighting by file name.

import { basicSetup } from 'codemirror';
import { Compartment, EditorState, Extension, Prec } from '@codemirror/state';
import { EditorView, keymap } from '@codemirror/view';
import { indentWithTab } from '@codemirror/commands';
import { StreamLanguage } from '@codemirror/language';
import { cpp } from '@codemirror/lang-cpp';
import { python } from '@codemirror/lang-python';
import { java } from '@codemirror/lang-java';
import { javascript } from '@codemirror/lang-javascript';
import { rust } from '@codemirror/lang-rust';
import { php } from '@codemirror/lang-php';
import { shell } from '@codemirror/legacy-modes/mode/shell';
import { oCaml } from '@codemirror/legacy-modes/mode/mllike';
import { perl } from '@codemirror/legacy-modes/mode/perl';
import { ruby } from '@codemirror/legacy-modes/mode/ruby';
import { scheme } from '@codemirror/legacy-modes/mode/scheme';
import { go } from '@codemirror/legacy-modes/mode/go';
import { oneDark } from '@codemirror/theme-one-dark';
import type { EditorFile } from './api';

/** Highlighting for a file, from its name (every language of the built-in registry). */
export function languageFor(path: string): Extension {
  const ext = path.toLowerCase().split('.').pop() ?? '';
  switch (ext) {
    case 'c':
    case 'h':
    case 'cc':
    case 'cpp':
    case 'cxx':
    case 'hpp':
    case 'hh':
      return cpp();
    case 'py':
      return python();
    case 'java':
      return java();
    case 'js':
    case 'mjs':
    case 'cjs':
      return javascript();
    case 'ts':
      return javascript({ typescript: true });
    case 'rs':
      return rust();
    case 'sh':
    case 'bash':
      return StreamLanguage.define(shell);
    case 'ml':
    case 'mli':
      return StreamLanguage.define(oCaml);
    case 'pl':
    case 'pm':
      return StreamLanguage.define(perl);
    case 'php':
      return php();
    case 'rb':
      return StreamLanguage.define(ruby);
    case 'scm':
    case 'ss':
      return StreamLanguage.define(scheme);
    case 'go':
      return StreamLanguage.define(go);
    default:
      return [];
  }
}

export interface Shortcuts {
  run: () => void;
  check: () => void;
  save: () => void;
}

interface OpenFile {
  path: string;
  state: EditorState;
}

const lightTheme = EditorView.theme({}, { dark: false });

export class Editor {
  private files: OpenFile[] = [];
  private current = 0;
  private readonly view: EditorView;
  private readonly themeSlot = new Compartment();
  private readonly langSlot = new Compartment();
  private dark = false;
  private listeners: (() => void)[] = [];

  constructor(
    parent: HTMLElement,
    private readonly shortcuts: Shortcuts,
  ) {
    this.view = new EditorView({ parent });
    this.view.contentDOM.setAttribute('aria-label', 'Code editor');
  }

  /** Called when the files, their names or the current file change. */
  onChange(f: () => void): void {
    this.listeners.push(f);
  }

  private changed(): void {
    for (const f of this.listeners) f();
  }

  private makeState(path: string, content: string): EditorState {
    return EditorState.create({
      doc: content,
      extensions: [
        Prec.highest(
          keymap.of([
            { key: 'Mod-Enter', run: () => (this.shortcuts.run(), true) },
            { key: 'Shift-Mod-Enter', run: () => (this.shortcuts.check(), true) },
            { key: 'Mod-s', run: () => (this.shortcuts.save(), true), preventDefault: true },
          ]),
        ),
        basicSetup,
        keymap.of([indentWithTab]),
        EditorState.tabSize.of(4),
        this.langSlot.of(languageFor(path)),
        this.themeSlot.of(this.dark ? oneDark : lightTheme),
        EditorView.updateListener.of((u) => {
          if (u.docChanged) this.changed();
        }),
      ],
    });
  }

  private saveCurrent(): void {
    if (this.files[this.current]) this.files[this.current].state = this.view.state;
  }

  /** Replaces every file (a restored revision, a draft). */
  setFiles(files: EditorFile[], select?: string): void {
    this.files = files.map((f) => ({ path: f.path, state: this.makeState(f.path, f.content) }));
    if (this.files.length === 0) this.files.push({ path: 'main.c', state: this.makeState('main.c', '') });
    const i = select ? this.files.findIndex((f) => f.path === select) : 0;
    this.current = Math.max(0, i);
    this.view.setState(this.files[this.current].state);
    this.changed();
  }

  getFiles(): EditorFile[] {
    this.saveCurrent();
    return this.files.map((f) => ({ path: f.path, content: f.state.doc.toString() }));
  }

  paths(): string[] {
    return this.files.map((f) => f.path);
  }

  currentPath(): string {
    return this.files[this.current]?.path ?? '';
  }

  has(path: string): boolean {
    return this.files.some((f) => f.path === path);
  }

  select(path: string): void {
    const i = this.files.findIndex((f) => f.path === path);
    if (i < 0 || i === this.current) return;
    this.saveCurrent();
    this.current = i;
    this.view.setState(this.applyTheme(this.files[i].state));
    this.changed();
  }

  add(path: string, content = ''): void {
    this.saveCurrent();
    this.files.push({ path, state: this.makeState(path, content) });
    this.current = this.files.length - 1;
    this.view.setState(this.files[this.current].state);
    this.changed();
  }

  rename(from: string, to: string): void {
    this.saveCurrent();
    const f = this.files.find((x) => x.path === from);
    if (!f) return;
    f.path = to;
    f.state = f.state.update({ effects: this.langSlot.reconfigure(languageFor(to)) }).state;
    if (this.files[this.current] === f) this.view.setState(f.state);
    this.changed();
  }

  remove(path: string): void {
    this.saveCurrent();
    const i = this.files.findIndex((f) => f.path === path);
    if (i < 0 || this.files.length <= 1) return;
    this.files.splice(i, 1);
    if (this.current >= this.files.length) this.current = this.files.length - 1;
    else if (this.current > i) this.current -= 1;
    this.view.setState(this.applyTheme(this.files[this.current].state));
    this.changed();
  }

  /** Replaces the content of one file, keeping the others. */
  setContent(path: string, content: string): void {
    this.select(path);
    this.view.dispatch({ changes: { from: 0, to: this.view.state.doc.length, insert: content } });
  }

  private applyTheme(s: EditorState): EditorState {
    return s.update({ effects: this.themeSlot.reconfigure(this.dark ? oneDark : lightTheme) }).state;
  }

  setDark(dark: boolean): void {
    this.dark = dark;
    this.view.dispatch({ effects: this.themeSlot.reconfigure(dark ? oneDark : lightTheme) });
  }

  focus(): void {
    this.view.focus();
  }
}

/** A file name the server accepts: relative, `/`-separated, no `.` or `..`, no backslash or control characters. */
export function validName(name: string): string | null {
  if (!name) return 'Give the file a name.';
  if (name.length > 255) return 'The name is too long.';
  if (name.startsWith('/')) return 'Use a relative name (no leading "/").';
  if (name.includes('\\')) return 'Use "/" between folders, not "\\".';
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(name)) return 'The name contains a control character.';
  for (const part of name.split('/')) {
    if (part === '') return 'The name has an empty folder ("//" or a trailing "/").';
    if (part === '.' || part === '..') return '"." and ".." are not allowed in names.';
  }
  return null;
}
