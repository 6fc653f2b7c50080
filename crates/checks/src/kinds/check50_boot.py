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
    _corral_confine_programs(
        [_corral_hide_the_problem(cfg["problem_root"]), _corral_leave_pids_for_check50(cfg.get("pids"))]
    )
    _corral_record_progress(nonce, out_dir)
    _corral_time_checks()
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
    if isinstance(results, dict) and isinstance(results.get("results"), list):
        results["results"] = [_corral_clip(r) for r in results["results"]]
    summary = {"exit": code, "error": error, "check50": results}
    fd = os.open(
        os.path.join(out_dir, "summary.json"),
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
        0o600,
    )
    os.write(fd, _corral_sealed(nonce, summary))
    os.close(fd)
    os._exit(0)


# check50 keeps everything a program printed before a mismatch or a timeout (a `Missing`'s
# "collection", a `Mismatch`'s "actual"): a program that floods its terminal leaves megabytes
# per check, and a problem's results would pass the 16 MiB the host reads. The host shows at
# most 8 KiB of a value and 100 log lines, so that is what is kept (a little more: the host cuts
# at its own boundary and marks the cut). Each check's result is clipped, never the list of
# checks, which the host compares with the problem's.
_CORRAL_MAX_TEXT = 8 * 1024 + 1
_CORRAL_MAX_ITEMS = 200


def _corral_clip(value):
    if isinstance(value, str):
        return value[:_CORRAL_MAX_TEXT]
    if isinstance(value, list):
        return [_corral_clip(v) for v in value[:_CORRAL_MAX_ITEMS]]
    if isinstance(value, dict):
        return {k: _corral_clip(v) for k, v in value.items()}
    return value


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
                    finished.append(
                        _corral_clip(json.loads(json.dumps(attr.asdict(result), default=str)))
                    )
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


def _corral_time_checks():
    """check50 reports no time per check: each check is timed where it runs (a worker process
    forked from this one, which inherits the patch) and its time carried in its result's `data`
    under `_corral_time_ms`, which the host takes out again."""
    try:
        import time

        import check50.runner as runner
    except ImportError:
        return  # no check50 here: running it says so, as the summary's error
    real = runner.run_check.__call__

    def timed(self):
        started = time.monotonic()
        result, state = real(self)
        try:
            data = dict(result.data or {})
            data["_corral_time_ms"] = int((time.monotonic() - started) * 1000)
            result.data = data
        except Exception:  # noqa: BLE001 - a result without a time is still a result
            pass
        return result, state

    runner.run_check.__call__ = timed


def _corral_hide_the_problem(problem_root):
    """The problem folder holds every check's source, hidden checks' expected output included,
    and the submission's programs run as this process's user: mounted read-only, it would be
    theirs to read (and to print in a public check's output). Each program check50 starts gets a
    Landlock layer of its own that lets it read and execute files anywhere but under the
    problem's mount; check50 itself (this process and its workers) keeps reading it. The ruleset
    is made once here; the function returned applies it in each child, after its fork. Where the
    kernel has no Landlock (or gVisor) the folder stays readable, as the README says (None)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    read_exec = (1 << 0) | (1 << 2)  # LANDLOCK_ACCESS_FS_EXECUTE | _READ_FILE

    class RulesetAttr(ctypes.Structure):
        _fields_ = [("handled_access_fs", ctypes.c_uint64)]

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    attr = RulesetAttr(read_exec)
    ruleset = libc.syscall(444, ctypes.byref(attr), ctypes.sizeof(attr), 0)
    if ruleset < 0:
        return None
    hidden = os.path.realpath(problem_root).split("/")[1]
    for entry in os.listdir("/"):
        if entry == hidden:
            continue
        try:
            fd = os.open("/" + entry, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            rule = PathBeneath(read_exec, fd)
            if libc.syscall(445, ruleset, 1, ctypes.byref(rule), 0) != 0:
                os.close(ruleset)
                return None
        finally:
            os.close(fd)

    def confine():
        libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS (the sandbox set it already)
        if libc.syscall(446, ruleset, 0) != 0:
            os._exit(126)

    confine.keep_fd = ruleset
    return confine


def _corral_leave_pids_for_check50(pids):
    """check50 runs in the sandbox of the programs it starts and shares its pids limit: a
    submission that forks without end (a fork bomb) took every pid, and check50 itself could then
    not fork (a worker, the next check's program) — those checks crashed with BlockingIOError,
    different ones each run, so the same code got different grades. Each program check50 starts
    gets a lower RLIMIT_NPROC than the sandbox's: the sandbox's uid is its own, so that counts
    the sandbox's processes and threads, and the submission's stop short of the pids limit by a
    reserve that stays check50's. Only where the sandbox set RLIMIT_NPROC itself (just above the
    pids limit): in rootless mode it counts the caller's processes, and is left alone."""
    import resource

    if not isinstance(pids, int) or pids <= 0:
        return None
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    except (OSError, ValueError):
        return None
    if soft == resource.RLIM_INFINITY or soft > pids + 8:
        return None
    reserve = min(16, max(4, pids // 4))
    room = pids - reserve
    if room < 4:
        return None

    def leave_room():
        try:
            resource.setrlimit(resource.RLIMIT_NPROC, (room, room))
        except (OSError, ValueError):
            pass

    return leave_room


def _corral_confine_programs(steps):
    """Runs `steps` (functions; None is skipped) in each program check50 starts, after its fork
    and before its exec."""
    steps = [s for s in steps if s is not None]
    if not steps:
        return

    def confine():
        for step in steps:
            step()

    try:
        import ptyprocess
    except ImportError:
        return  # no check50 here (it needs ptyprocess): running it says so, as the summary's error
    keep = tuple(s.keep_fd for s in steps if hasattr(s, "keep_fd"))

    real_spawn = ptyprocess.PtyProcess.spawn.__func__

    def spawn(cls, argv, cwd=None, env=None, echo=True, preexec_fn=None, dimensions=(24, 80),
              pass_fds=()):
        def preexec():
            confine()
            if preexec_fn is not None:
                preexec_fn()

        # ptyprocess closes every other descriptor before it calls preexec_fn; the ruleset's is
        # close-on-exec, so the program never holds it.
        return real_spawn(cls, argv, cwd=cwd, env=env, echo=echo, preexec_fn=preexec,
                          dimensions=dimensions, pass_fds=tuple(pass_fds) + keep)

    ptyprocess.PtyProcess.spawn = classmethod(spawn)
    global _corral_confine
    _corral_confine = confine


_corral_confine = None


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
                             encoding=encoding, codec_errors=codec_errors,
                             preexec_fn=lambda: _corral_confine and _corral_confine())

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
