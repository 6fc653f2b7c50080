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
