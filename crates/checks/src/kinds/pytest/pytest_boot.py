# corral's pytest bootstrap: runs inside the sandbox as
#   /usr/bin/python3 -I -B -c <shared/read_nonce.py + this file> CONFIG_JSON
# with a one-line nonce on standard input. It runs before any of the submission's code, so what it
# sets up here is intact when the submission's code first runs (when a test module imports it).
# See crates/checks/src/kinds/pytest.rs and the README ("pytest suites") for what this does and
# does not protect against: code in the same process as pytest can in principle tamper with all
# of it.
import os
import signal
import sys


def _corral_main():
    nonce = _corral_read_nonce()
    import json

    cfg = json.loads(sys.argv[1])
    # Not dumpable: other processes of the sandbox (the submission may start some) cannot open
    # /proc/PID/mem or /proc/PID/fd of this one.
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except Exception:
        pass
    for k in list(os.environ):
        if k.startswith("PYTEST_") or k.startswith("PY_") or k.startswith("PYTHON"):
            del os.environ[k]
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    os.environ["PY_COLORS"] = "0"
    out_dir = cfg["out_dir"]
    os.mkdir(out_dir, 0o700)
    report = os.path.join(out_dir, "junit.xml")
    # The submission's conftest.py files are never loaded (pytest runs with --noconftest, or
    # with conftest files from the read-only test folder only); delete them all the same.
    removed = []
    for root, dirs, files in os.walk(cfg["workdir"]):
        if "conftest.py" in files:
            path = os.path.join(root, "conftest.py")
            try:
                os.unlink(path)
                removed.append(os.path.relpath(path, cfg["workdir"]))
            except OSError:
                pass
    # The submission's modules are imported from the working directory, as `python -m pytest`
    # run there would (pytest then puts the tests' folder in front of it).
    sys.path.insert(0, cfg["workdir"])
    sys.argv = ["pytest"]

    _CORRAL_TEST_TIMEOUT[0] = float(cfg.get("test_timeout") or 0)
    _CORRAL_SKIP.update(cfg.get("skip") or [])
    # The test under way, for the host when the session ends before its summary (a limit, a
    # crash, the watchdog below): that test fails and the others run again without it.
    _CORRAL_FDS["current"] = _corral_create(os.path.join(out_dir, "current"))
    # faulthandler's watchdog is a C thread: it ends the process even when a test is stuck where
    # the SIGALRM handler never runs (in C code that holds the GIL), and says so in this file.
    _CORRAL_FDS["watchdog"] = _corral_create(os.path.join(out_dir, "watchdog"))
    import pytest

    guard = _corral_guard_class(pytest)()
    args = list(cfg["args"]) + ["--junitxml=" + report]
    try:
        rc = int(pytest.main(args, plugins=[guard]))
    except BaseException as e:  # noqa: BLE001 - anything here ends the run without a summary
        sys.stderr.write("corral: pytest raised %r\n" % (e,))
        # The traceback, for staff (the report's diagnostics): the interpreter's own printer,
        # which needs no module the working directory could shadow.
        try:
            sys.__excepthook__(type(e), e, e.__traceback__)
        except BaseException:  # noqa: BLE001
            pass
        sys.stderr.flush()
        os._exit(70)
    summary = {
        "exit": rc,
        "finished": guard.finished,
        "outcomes": guard.outcomes,
        "collect_errors": guard.collect_errors,
        "tampered": guard.tampered,
        "removed": removed,
    }
    fd = os.open(
        os.path.join(out_dir, "summary.json"),
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
        0o600,
    )
    os.write(fd, _corral_sealed(nonce, summary))
    os.close(fd)
    sys.stdout.flush()
    sys.stderr.flush()
    # No atexit handler or finalizer of the submission runs after this.
    os._exit(rc)


def _corral_create(path):
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


class _CorralTimed:
    """One phase of a test (setup, call, teardown) under the test timeout: SIGALRM at the limit
    (the phase fails with TimeoutError), faulthandler's watchdog a grace period later (the
    process ends; the host fails the test and runs the others again)."""

    def __enter__(self):
        limit = _CORRAL_TEST_TIMEOUT[0]
        if limit:
            def on_alarm(signum, frame):
                raise TimeoutError("the test took longer than %gs" % limit)

            signal.signal(signal.SIGALRM, on_alarm)
            signal.setitimer(signal.ITIMER_REAL, limit)
            try:
                import faulthandler

                faulthandler.dump_traceback_later(
                    limit + _CORRAL_WATCHDOG_GRACE, exit=True, file=_CORRAL_FDS["watchdog"]
                )
            except Exception:  # noqa: BLE001 - no thread left (pids limit): the alarm alone
                pass
        return self

    def __exit__(self, *exc):
        if _CORRAL_TEST_TIMEOUT[0]:
            signal.setitimer(signal.ITIMER_REAL, 0)
            try:
                import faulthandler

                faulthandler.cancel_dump_traceback_later()
            except Exception:  # noqa: BLE001
                pass
        return False


def _corral_watched_modules():
    for name, mod in list(sys.modules.items()):
        if mod is None:
            continue
        if name in ("pytest", "pluggy", "builtins") or name.startswith(("_pytest.", "pluggy.")) or name == "_pytest":
            yield name, mod


def _corral_guard_class(pytest):
    class _CorralGuard:
        """Records every test's outcome from pytest's own reports, and snapshots what the outcome
        depends on (pytest's and pluggy's functions and classes, the builtins, registered plugins and
        hook implementations) before any test module is imported, to compare at the end."""

        def __init__(self):
            self.outcomes = {}
            self.collect_errors = {}
            self.finished = False
            self.snap = None
            self.plugins = None
            self.hooks = None
            self.config = None
            self.codes = {}
            self.tampered = ["the session never finished"]

        def _snapshot(self):
            snap = {}
            for name, mod in _corral_watched_modules():
                for k, v in list(vars(mod).items()):
                    snap[(name, k)] = v
                    if isinstance(v, type) and getattr(v, "__module__", None) == name:
                        for ck, cv in list(vars(v).items()):
                            snap[(name, k, ck)] = cv
            return snap

        def _hooks(self):
            out = {}
            for name in dir(self.config.hook):
                caller = getattr(self.config.hook, name, None)
                impls = getattr(caller, "get_hookimpls", None)
                if impls is not None:
                    out[name] = [(i.plugin_name, i.function) for i in impls()]
            return out

        # A test that runs too long fails on its own instead of stopping the whole session.
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_setup(self, item):
            with _CorralTimed():
                yield

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_call(self, item):
            with _CorralTimed():
                yield

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_teardown(self, item):
            with _CorralTimed():
                yield

        def pytest_runtest_logstart(self, nodeid, location):
            data = nodeid.encode("utf-8", "replace")
            fd = _CORRAL_FDS["current"]
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))

        def pytest_runtest_logfinish(self, nodeid, location):
            os.ftruncate(_CORRAL_FDS["current"], 0)

        @pytest.hookimpl(trylast=True)
        def pytest_collection_modifyitems(self, session, config, items):
            # The tests that stopped an earlier run of this session, by exact node id (pytest's
            # own --deselect matches prefixes: test_a would drop test_ab too).
            if not _CORRAL_SKIP:
                return
            gone = [i for i in items if i.nodeid in _CORRAL_SKIP]
            if gone:
                items[:] = [i for i in items if i.nodeid not in _CORRAL_SKIP]
                config.hook.pytest_deselected(items=gone)

        @pytest.hookimpl(trylast=True)
        def pytest_sessionstart(self, session):
            # After every plugin and the session are set up; before collection imports any test
            # module (and so before any of the submission's code runs).
            self.config = session.config
            self.snap = self._snapshot()
            self.plugins = list(self.config.pluginmanager.get_plugins())
            self.hooks = self._hooks()

        def pytest_itemcollected(self, item):
            fn = getattr(item, "function", None)
            code = getattr(fn, "__code__", None)
            if code is not None:
                self.codes[item.nodeid] = (fn, code)

        def pytest_collectreport(self, report):
            if report.failed:
                self.collect_errors[report.nodeid] = str(report.longrepr)[-4000:]

        def pytest_runtest_logreport(self, report):
            prev = self.outcomes.get(report.nodeid, "passed")
            if report.failed:
                now = "failed"
            elif report.skipped:
                now = "skipped"
            else:
                now = "passed"
            order = {"passed": 0, "skipped": 1, "failed": 2}
            self.outcomes[report.nodeid] = max(prev, now, key=order.get)

        @pytest.hookimpl(trylast=True)
        def pytest_sessionfinish(self, session, exitstatus):
            # After the JUnit report was written (junitxml's own sessionfinish), before plugins
            # undo what they set up at configure time.
            self.finished = True
            self.tampered = self.verify()

        def verify(self):
            if self.snap is None:
                return ["the session never started"]
            problems = []
            now = self._snapshot()
            for key, v in self.snap.items():
                if key in _CORRAL_MUTABLE:
                    continue
                if key not in now:
                    problems.append("removed " + ".".join(key))
                elif now[key] is not v:
                    problems.append("replaced " + ".".join(key))
            plugins = list(self.config.pluginmanager.get_plugins())
            for p in plugins:
                if not any(p is q for q in self.plugins):
                    problems.append("plugin registered during the run: %r" % (type(p).__name__,))
            hooks = self._hooks()
            for name, impls in hooks.items():
                before = self.hooks.get(name, [])
                if len(impls) != len(before) or any(a[1] is not b[1] for a, b in zip(impls, before)):
                    problems.append("hook implementations changed: " + name)
            for nodeid, (fn, code) in self.codes.items():
                if fn.__code__ is not code:
                    problems.append("test function replaced: " + nodeid)
            return sorted(set(problems))[:50]

    return _CorralGuard


_CORRAL_TEST_TIMEOUT = [0.0]
# Seconds past the test timeout before the watchdog ends the process.
_CORRAL_WATCHDOG_GRACE = 1.0
_CORRAL_SKIP = set()
_CORRAL_FDS = {}

# Module-level values pytest itself changes during a run.
_CORRAL_MUTABLE = {
    ("_pytest.assertion.util", "_reprcompare"),
    ("_pytest.assertion.util", "_assertion_pass"),
    ("_pytest.assertion.util", "_config"),
}


_corral_main()
