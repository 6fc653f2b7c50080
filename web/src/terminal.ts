// The terminal: xterm.js showing the commands, the program's output (stderr in red) and what the
// student types. Two ways to talk to a program:
// - `tty`: the program runs on a pseudo-terminal in the sandbox, which echoes and edits the line
//   itself; keys go through as typed (Ctrl-D is end of input). Prompts show without fflush;
//   stderr stays a pipe (red, and it may overtake output written before it).
// - `pipe`: plain pipes; this terminal echoes, edits the line and sends it on Enter, and stderr is
//   drawn in red. Ctrl-D ends the input.
// In both, Ctrl-C sends SIGINT to the program.

import { Terminal, type ITheme } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';

const DARK: ITheme = {
  background: '#1e1f22',
  foreground: '#e6e6e6',
  cursor: '#e6e6e6',
  red: '#ff6b6b',
  brightRed: '#ff8787',
  cyan: '#56c8d8',
  brightBlack: '#9aa0a6',
  green: '#7bd88f',
  yellow: '#f5d76e',
};
const LIGHT: ITheme = {
  background: '#fbfbfb',
  foreground: '#1f2328',
  cursor: '#1f2328',
  selectionBackground: '#b6d7ff',
  red: '#c0192a',
  brightRed: '#d1242f',
  cyan: '#0b6e99',
  brightBlack: '#5c6370',
  green: '#1a7f37',
  yellow: '#8a6100',
};

export interface InputSink {
  stdin: (data: string, eof: boolean) => void;
  signal: (name: string) => void;
  /** Terminal mode: the program's terminal has a new size. */
  resize?: (cols: number, rows: number) => void;
}

export type InputMode = 'tty' | 'pipe';

const RESET = '\x1b[0m';

export class TerminalPanel {
  readonly term: Terminal;
  private readonly fit = new FitAddon();
  private line = '';
  private sink: InputSink | null = null;
  private mode: InputMode = 'pipe';
  /** Everything shown, as plain text (for the history and for people using a screen reader). */
  private transcript = '';

  constructor(parent: HTMLElement) {
    this.term = new Terminal({
      convertEol: true,
      drawBoldTextInBrightColors: false,
      cursorBlink: true,
      fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace',
      fontSize: 14,
      scrollback: 5000,
      screenReaderMode: false,
      theme: LIGHT,
    });
    this.term.loadAddon(this.fit);
    this.term.open(parent);
    this.term.textarea?.setAttribute('aria-label', 'Terminal: type input for the running program');
    this.term.onData((d) => this.input(d));
    this.term.onResize(({ cols, rows }) => this.sink?.resize?.(cols, rows));
    const ro = new ResizeObserver(() => this.resize());
    ro.observe(parent);
    this.resize();
  }

  resize(): void {
    try {
      this.fit.fit();
    } catch {
      /* not visible yet */
    }
  }

  setDark(dark: boolean): void {
    this.term.options.theme = dark ? DARK : LIGHT;
  }

  focus(): void {
    this.term.focus();
  }

  size(): { cols: number; rows: number } {
    return { cols: this.term.cols, rows: this.term.rows };
  }

  text(): string {
    return this.transcript;
  }

  reset(): void {
    this.term.reset();
    this.line = '';
    this.transcript = '';
  }

  private write(s: string, color?: string): void {
    this.transcript += s;
    this.term.write(color ? color + s + RESET : s);
  }

  /** A command about to run, as a shell would show it. */
  command(cmd: string): void {
    this.write(`$ ${cmd}\n`, '\x1b[1;36m');
  }

  stdout(data: string): void {
    this.write(data);
  }

  stderr(data: string): void {
    this.write(data, '\x1b[31m');
  }

  /** A note from the editor (not the program's output). */
  info(text: string, kind: 'ok' | 'warn' | 'error' | 'dim' = 'dim'): void {
    const color = { ok: '\x1b[32m', warn: '\x1b[33m', error: '\x1b[1;31m', dim: '\x1b[90m' }[kind];
    // Start on a new line when the program left the cursor mid-line.
    const nl = this.transcript && !this.transcript.endsWith('\n') ? '\n' : '';
    this.write(`${nl}${text}\n`, color);
  }

  /** While a program runs, what is typed goes to `sink`; null: typing does nothing. */
  attach(sink: InputSink | null, mode: InputMode = 'pipe'): void {
    this.sink = sink;
    this.mode = mode;
    this.line = '';
  }

  private input(data: string): void {
    if (!this.sink) return;
    if (this.mode === 'tty') {
      // The sandbox's terminal echoes and edits; only Ctrl-C is ours (a signal, always delivered).
      const parts = data.split('\x03');
      parts.forEach((p, i) => {
        if (i > 0) {
          this.write('^C', '\x1b[90m');
          this.sink?.signal('SIGINT');
        }
        if (p) this.sink?.stdin(p, false);
      });
      return;
    }
    for (const ch of Array.from(data)) {
      switch (ch) {
        case '\r':
        case '\n':
          this.write('\n');
          this.sink.stdin(this.line + '\n', false);
          this.line = '';
          break;
        case '\x7f':
        case '\b':
          if (this.line.length > 0) {
            const chars = Array.from(this.line);
            chars.pop();
            this.line = chars.join('');
            this.term.write('\b \b');
            this.transcript = this.transcript.slice(0, -1);
          }
          break;
        case '\x03':
          this.write('^C\n', '\x1b[90m');
          this.line = '';
          this.sink.signal('SIGINT');
          break;
        case '\x04':
          this.sink.stdin(this.line, true);
          this.line = '';
          this.write('^D\n', '\x1b[90m');
          break;
        default:
          if (ch >= ' ' || ch === '\t') {
            this.line += ch;
            this.write(ch);
          }
      }
    }
  }
}
