# corral's check50 bootstrap: runs inside the sandbox as
#   /usr/bin/python3 -I -B -c <shared/read_nonce.py + this file> CONFIG_JSON
# with a one-line nonce on standard input. It runs check50 (installed by scripts/setup under
# /usr/local/lib/corral/python) offline on the read-only problem folder, captures its JSON in
# memory and writes it, with the nonce, to a summary file the host checks.
import os
import sys


def _corral_main():
    nonce = _corral_read_nonce()
    import json

    cfg = json.loads(sys.argv[1])
    # Not dumpable: the programs check50 starts (the submission's) cannot read this process's
    # memory or descriptors through /proc.
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
    except Exception:
        pass
    out_dir = cfg["out_dir"]
    os.mkdir(out_dir, 0o700)
    sys.path.insert(0, cfg["site"])
    import contextlib
    import io

    buf = io.StringIO()
    code = None
    error = None
    _corral_pipes_for_pexpect()
    _corral_record_progress(nonce, out_dir)
    sys.argv = ["check50", "--dev", "--no-install-dependencies", "--output", "json", "--", cfg["problem"]]
    try:
        import check50.__main__ as c50

        with contextlib.redirect_stdout(buf):
            c50.main()
    except SystemExit as e:
        code = int(e.code) if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException as e:  # noqa: BLE001
        error = "%s: %s" % (type(e).__name__, e)
    try:
        results = json.loads(buf.getvalue())
    except ValueError:
        results = None
    summary = {"exit": code, "error": error, "check50": results}
    fd = os.open(
        os.path.join(out_dir, "summary.json"),
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
        0o600,
    )
    os.write(fd, _corral_sealed(nonce, summary))
    os.close(fd)
    os._exit(0)


def _corral_record_progress(nonce, out_dir):
    """check50 writes its results when every check has run; a limit that stops it first would
    lose the checks it had finished. So each finished check is also recorded as check50 learns
    of it (its runner waits on `futures.wait`), sealed like the summary, in progress.json — written
    whole to a new file and renamed over the last, so the host reads one complete version."""
    import json

    try:
        import attr
        import check50.runner as runner
    except ImportError:
        return  # no check50 here: running it says so, as the summary's error
    real = runner.futures
    finished = []
    # Absolute: check50 runs its checks in a working area of its own (it changes directory).
    target = os.path.join(os.path.abspath(out_dir), "progress.json")

    class _Futures:
        def __getattr__(self, name):
            return getattr(real, name)

        def wait(self, fs, *args, **kwargs):
            done, not_done = real.wait(fs, *args, **kwargs)
            for future in done:
                try:
                    result, _state = future.result()
                    finished.append(json.loads(json.dumps(attr.asdict(result), default=str)))
                except Exception:  # noqa: BLE001 - check50 itself reports a failed check
                    continue
            try:
                tmp = "%s.%d" % (target, len(finished))
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                os.write(fd, _corral_sealed(nonce, {"results": finished}))
                os.close(fd)
                os.rename(tmp, target)
            except OSError:
                pass
            return done, not_done

    runner.futures = _Futures()


def _corral_pipes_for_pexpect():
    """check50 drives each program through a pseudo-terminal (pexpect.spawn), and its checks
    are written for one: a pattern's "\n" is matched as the terminal's "\r\n", and a C
    program's prompt shows up because stdout on a terminal is line-buffered. corral's sandboxes
    have a devpts instance of their own, so that is what check50 gets. Only where no pty can be
    opened (a runtime without one) do programs run over pipes instead — stdout and stderr
    merged, a newline sent as "\r\n"'s "\n" — which breaks those checks, so say so."""
    import os

    try:
        master, slave = os.openpty()
        os.close(master)
        os.close(slave)
        return
    except OSError as e:
        print("corral: no pseudo-terminal in this sandbox (%s): check50's programs run over "
              "pipes; checks that expect a newline in output can fail" % e, file=sys.stderr)
    import pexpect
    from pexpect.popen_spawn import PopenSpawn

    class PipeSpawn(PopenSpawn):
        def __init__(self, command, timeout=30, maxread=2000, searchwindowsize=None, logfile=None,
                     cwd=None, env=None, encoding=None, codec_errors="strict", echo=False, **_):
            super().__init__(command, timeout=timeout, maxread=maxread,
                             searchwindowsize=searchwindowsize, logfile=logfile, cwd=cwd, env=env,
                             encoding=encoding, codec_errors=codec_errors)

        def isalive(self):
            return self.proc.poll() is None

        def close(self, force=True):
            if self.proc.poll() is None:
                try:
                    self.proc.kill()
                except OSError:
                    pass
            self.wait()

        def terminate(self, force=False):
            self.close()
            return True

    pexpect.spawn = PipeSpawn


_corral_main()
