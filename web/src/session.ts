// One interactive run over `/ws`: the compile command, then the run command in the same sandbox.

import { explain, getToken, reportUnauthorized, ApiError, api, wsUrl } from './api';

export interface ExitInfo {
  code: number | null;
  sandbox: string | null;
  status: string;
  exit_code: number | null;
  signal: number | null;
  cpu_time_ms: number;
  wall_time_ms: number;
  memory_peak_bytes: number;
  /** A fork or thread was refused at the process limit. */
  pids_limit_hit?: boolean;
  reason?: string;
  error?: string;
  limits: Record<string, string | number>;
  limits_clamped: string[];
}

export interface SessionEvents {
  stdout: (data: string) => void;
  stderr: (data: string) => void;
  waiting: () => void;
  /** Every sandbox is busy: the run waits for one. */
  queued?: () => void;
  /** A queued run has its sandbox now. */
  started?: () => void;
}

type Pending = { resolve: (e: ExitInfo) => void; reject: (e: Error) => void };

/** A WebSocket session; `run` resolves with the `exit` message of one program. */
export class Session {
  private ws: WebSocket | null = null;
  private pending: Pending | null = null;
  private closedByUs = false;

  constructor(private readonly events: SessionEvents) {}

  async open(): Promise<void> {
    const ws = new WebSocket(wsUrl('/ws'));
    this.ws = ws;
    await new Promise<void>((resolve, reject) => {
      ws.onopen = () => resolve();
      ws.onerror = () => undefined;
      ws.onclose = () => reject(new Error('closed'));
    }).catch(async () => {
      // The browser does not say why an upgrade failed: ask the API, which does (401, 429, 503).
      await whyNoSocket();
    });
    ws.onmessage = (m) => this.message(m.data);
    ws.onclose = () => {
      const p = this.pending;
      this.pending = null;
      if (p && !this.closedByUs) p.reject(new Error('The connection to the server was lost while the program ran.'));
    };
  }

  private message(raw: unknown): void {
    let m: { type: string; data?: string; error?: string; message?: string; retry_after?: number };
    try {
      m = JSON.parse(String(raw));
    } catch {
      return;
    }
    switch (m.type) {
      case 'stdout':
        this.events.stdout(m.data ?? '');
        break;
      case 'stderr':
        this.events.stderr(m.data ?? '');
        break;
      case 'stdin':
        this.events.waiting();
        break;
      case 'queued':
        this.events.queued?.();
        break;
      case 'started':
        this.events.started?.();
        break;
      case 'exit': {
        const p = this.pending;
        this.pending = null;
        p?.resolve(m as unknown as ExitInfo);
        break;
      }
      case 'error': {
        const status = m.error === 'overloaded' ? 503 : m.error === 'rate_limited' ? 429 : 0;
        // The server says how long to wait (`retry_after`, seconds) for a limit that passes.
        const wait = typeof m.retry_after === 'number' ? m.retry_after : null;
        const text = status ? explain(status, m.error ?? '', m.message ?? '', wait) : (m.message ?? m.error ?? 'error');
        const err = new ApiError(text, status, m.error ?? 'error', wait);
        // Errors about input (no program running) do not end a run.
        if (m.error === 'not_running') return;
        const p = this.pending;
        this.pending = null;
        p?.reject(err);
        break;
      }
    }
  }

  private send(v: unknown): void {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(v));
  }

  /**
   * Runs `cmd` with the language's paths, environment and limits; with `tty` on a pseudo-terminal
   * of that size, else on pipes.
   */
  run(
    cmd: string,
    sandbox: ({ homedir: string } | { id: string }) & { keep?: boolean },
    language: string,
    tty?: { cols: number; rows: number },
  ): Promise<ExitInfo> {
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject };
      const run = { type: 'run', cmd, sandbox, language, queue_notices: true };
      this.send(tty ? { ...run, tty } : run);
    });
  }

  resize(cols: number, rows: number): void {
    this.send({ type: 'resize', cols, rows });
  }

  stdin(data: string, eof: boolean): void {
    this.send({ type: 'stdin', data, eof });
  }

  signal(name: string): void {
    this.send({ type: 'signal', name });
  }

  kill(): void {
    this.send({ type: 'kill' });
  }

  close(): void {
    this.closedByUs = true;
    this.ws?.close();
    this.ws = null;
  }
}

async function whyNoSocket(): Promise<never> {
  // /whoami goes through the same authentication and rate limits as /ws.
  try {
    await api('GET', '/whoami');
  } catch (e) {
    if (e instanceof ApiError) throw e;
  }
  if (!getToken()) {
    const e = new ApiError(explain(401, 'unauthorized', 'no token', null), 401, 'unauthorized');
    reportUnauthorized(e);
    throw e;
  }
  throw new ApiError('Could not open a connection to the server for this run. Try again in a moment.', 0, 'network');
}

/** The end of a run, in words: exit status, or what stopped it (`stopped`: the user pressed
 *  Stop, whose kill is not a crash). */
export function describeExit(e: ExitInfo, stopped = false): { text: string; kind: 'ok' | 'warn' | 'error' } {
  const reason = e.reason ?? '';
  // A fork bomb held by the process limit ends "cleanly": say what held it.
  const limited = e.pids_limit_hit ? ' (some processes could not start: the process limit was reached)' : '';
  switch (e.status) {
    case 'ok':
      return limited
        ? { text: `exited with status 0${limited}`, kind: 'warn' }
        : { text: 'exited with status 0', kind: 'ok' };
    case 'nonzero_exit':
      return { text: `exited with status ${e.exit_code}${limited}`, kind: 'warn' };
    case 'signaled':
      if (e.signal === 2) return { text: 'interrupted (Ctrl-C, SIGINT)', kind: 'warn' };
      if (stopped && e.signal === 9) return { text: 'stopped (you pressed Stop)', kind: 'warn' };
      return { text: `killed by signal ${signalName(e.signal)}`, kind: 'error' };
    case 'time_limit':
      return { text: `stopped: ${reason || 'CPU time limit exceeded'} (an infinite loop?)`, kind: 'error' };
    case 'wall_time_limit':
      return { text: `stopped: ${reason || 'wall time limit exceeded'}`, kind: 'error' };
    case 'memory_limit':
      return { text: `stopped: ${reason || 'memory limit exceeded'}`, kind: 'error' };
    case 'output_limit':
      return { text: `stopped: ${reason || 'output limit exceeded'}`, kind: 'error' };
    case 'blocked_syscall':
      return { text: `stopped: ${reason || 'a forbidden system call'}`, kind: 'error' };
    case 'sandbox_error':
      return { text: `the sandbox failed: ${e.error ?? reason}`, kind: 'error' };
    default:
      return { text: e.status, kind: 'warn' };
  }
}

const SIGNALS: Record<number, string> = {
  1: 'SIGHUP',
  2: 'SIGINT',
  3: 'SIGQUIT',
  4: 'SIGILL',
  6: 'SIGABRT (abort)',
  8: 'SIGFPE (arithmetic error)',
  9: 'SIGKILL',
  11: 'SIGSEGV (segmentation fault)',
  13: 'SIGPIPE',
  15: 'SIGTERM',
};

export function signalName(n: number | null): string {
  return n === null ? 'unknown' : (SIGNALS[n] ?? `${n}`);
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

export function usage(e: ExitInfo): string {
  return `time ${(e.wall_time_ms / 1000).toFixed(2)} s (CPU ${(e.cpu_time_ms / 1000).toFixed(2)} s) · memory ${formatBytes(e.memory_peak_bytes)}`;
}
