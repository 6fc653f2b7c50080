//! (c) A realistic grading loop, the same work done three ways.
//!
//! - C: copy `hello.c` in, `gcc -O2`, then run the binary against 10 inputs (stdin), checking
//!   each output.
//! - Python: copy `sol.py` in, run `python3 sol.py` against the same 10 inputs.
//!
//! Runners: `corral` (one leased warm sandbox per submission: compile and the 10 runs share its
//! working directory; the pool holds two, so the previous submission's reset overlaps this one),
//! `bare` (a temporary directory and plain child processes — no isolation at all, the floor), and
//! `bwrap` (each step its own `bwrap --unshare-all` with the directory bound in, the way a
//! bubblewrap-based grader has to do it). corral and bare take turns submission by submission so
//! a slow moment of the machine is shared between them (see [`take_turns`]), then bwrap and bare
//! in rounds of their own. Time is per submission, start to verdict. With the `gvisor` section,
//! the corral loops also run natively and under gVisor, taking turns.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context};
use corral_sandbox::{
    Host, Millis, NoSink, Pool, PoolConfig, RunSpec, Runtime, SandboxConfig, Status, Stdin,
};

use crate::stats::{Report, Samples};

const HELLO_C: &str = r#"#include <stdio.h>
#include <string.h>
int main(void) {
    char name[256];
    if (!fgets(name, sizeof name, stdin)) return 1;
    name[strcspn(name, "\n")] = 0;
    printf("hello, %s\n", name);
    return 0;
}
"#;

const SOL_PY: &str = r#"import sys
name = sys.stdin.readline().strip()
print(f"hello, {name}")
"#;

const GCC: &str = "/usr/bin/gcc";
const PYTHON: &str = "/usr/bin/python3";
const INPUTS: usize = 10;
const WARMUP: usize = 2;

#[derive(Clone, Copy, PartialEq)]
enum Lang {
    C,
    Python,
}

impl Lang {
    fn name(self) -> &'static str {
        match self {
            Lang::C => "c",
            Lang::Python => "py",
        }
    }
}

enum Runner {
    /// corral on the native runtime.
    Corral(Arc<Pool>, SandboxConfig),
    /// corral under gVisor: a pre-started gVisor sandbox per submission (never reused).
    Gvisor(Arc<Pool>, SandboxConfig),
    Bare,
    Bwrap(PathBuf),
}

impl Runner {
    fn name(&self) -> &'static str {
        match self {
            Runner::Corral(..) => "corral",
            Runner::Gvisor(..) => "gvisor",
            Runner::Bare => "bare",
            Runner::Bwrap(_) => "bwrap",
        }
    }
}

struct Workload {
    _dirs: tempfile::TempDir,
    c_src: PathBuf,
    py_src: PathBuf,
    scratch: PathBuf,
    inputs: Vec<String>,
    expected: Vec<String>,
}

impl Workload {
    fn new() -> anyhow::Result<Self> {
        let dirs = tempfile::Builder::new().prefix("corral-bench-").tempdir()?;
        let c_src = dirs.path().join("c");
        let py_src = dirs.path().join("py");
        let scratch = dirs.path().join("scratch");
        for d in [&c_src, &py_src, &scratch] {
            std::fs::create_dir(d)?;
        }
        std::fs::write(c_src.join("hello.c"), HELLO_C)?;
        std::fs::write(py_src.join("sol.py"), SOL_PY)?;
        let inputs = (0..INPUTS).map(|i| format!("input-{i}\n")).collect();
        let expected = (0..INPUTS).map(|i| format!("hello, input-{i}\n")).collect();
        Ok(Workload {
            _dirs: dirs,
            c_src,
            py_src,
            scratch,
            inputs,
            expected,
        })
    }

    fn src(&self, lang: Lang) -> &Path {
        match lang {
            Lang::C => &self.c_src,
            Lang::Python => &self.py_src,
        }
    }
}

fn compile_argv() -> Vec<String> {
    [GCC, "-O2", "-o", "hello", "hello.c"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

fn run_argv(lang: Lang) -> Vec<String> {
    match lang {
        Lang::C => vec!["./hello".into()],
        Lang::Python => vec![PYTHON.into(), "sol.py".into()],
    }
}

pub fn measure(
    host: &Arc<Host>,
    n: usize,
    bwrap: &Path,
    report: &mut Report,
) -> anyhow::Result<()> {
    let (pool, shape) = warm_pool(host, Runtime::Native)?;
    let corral = Runner::Corral(pool, shape);
    let samples = take_turns([&corral, &Runner::Bare], n)?;
    summaries("grading", &[&corral, &Runner::Bare], &samples, report);
    paired(&samples, "grading", "corral_over_bare", report);
    // Bubblewrap beside bare in rounds of their own: the kernel tears a `--unshare-all` run's
    // network namespace down on a worker thread after it ended, which slows whatever runs next.
    if bwrap.exists() {
        let bwrap = Runner::Bwrap(bwrap.to_path_buf());
        let samples = take_turns([&bwrap, &Runner::Bare], n)?;
        summaries("grading", &[&bwrap], &samples[..1], report);
        paired(&samples, "grading", "bwrap_over_bare", report);
    } else {
        report.error(format!(
            "{} not found: no bwrap grading figures",
            bwrap.display()
        ));
    }
    report.set("grading_inputs", INPUTS);
    Ok(())
}

/// The same loops natively and under gVisor, taking turns (issue 11's measurement): each gVisor
/// submission takes a pre-started gVisor sandbox, as a server's pool gives it.
pub fn measure_gvisor(host: &Arc<Host>, n: usize, report: &mut Report) -> anyhow::Result<()> {
    let (native, native_shape) = warm_pool(host, Runtime::Native)?;
    let (gvisor, gvisor_shape) = warm_pool(host, Runtime::Gvisor)?;
    let runners = [
        &Runner::Gvisor(gvisor, gvisor_shape),
        &Runner::Corral(native, native_shape),
    ];
    // Keys of their own (`gvisor_grading_…`): this native loop runs beside gVisor's, not beside
    // bare, and must not overwrite the grading section's figures.
    let samples = take_turns(runners, n)?;
    summaries("gvisor_grading", &runners, &samples, report);
    paired(&samples, "gvisor_grading", "gvisor_over_corral", report);
    Ok(())
}

/// A pool holding two warm sandboxes of the grading shape on this runtime (the previous
/// submission's reset, or a gVisor sandbox's replacement, overlaps the next submission).
fn warm_pool(host: &Arc<Host>, runtime: Runtime) -> anyhow::Result<(Arc<Pool>, SandboxConfig)> {
    let mut probe = RunSpec::new(compile_argv());
    probe.limits.wall_time = Millis::ms(30_000);
    probe.runtime = runtime;
    let shape = SandboxConfig::for_spec(&probe);
    let pool = Pool::new(
        host.clone(),
        PoolConfig {
            max_idle: 2,
            ..PoolConfig::default()
        },
    );
    pool.prewarm(&shape, 2)?;
    Ok((pool, shape))
}

/// Per language, indexed [runner][language] (C, Python).
type Turns = Vec<[Samples; 2]>;

/// Two runners grade the same submissions, taking turns, one language after the other (as a
/// grading night runs one problem's submissions in a row): WARMUP untimed rounds, then `n`
/// timed ones (made even), each a submission by each runner. The first to go in a round meets
/// the caches the other left behind, and after the language changes, the ones gcc left behind
/// (the first `python3` then takes ~1.5 ms longer): the order flips every round, so each runner
/// goes first in half of them. With a fixed order, corral always went first and paid for it
/// (+8 % → +3 % paired, same binary).
fn take_turns(runners: [&Runner; 2], n: usize) -> anyhow::Result<Turns> {
    let w = Workload::new()?;
    let n = n.max(2).next_multiple_of(2);
    let mut samples: Turns = runners
        .iter()
        .map(|_| [Samples::with_capacity(n), Samples::with_capacity(n)])
        .collect();
    for (li, lang) in [Lang::C, Lang::Python].into_iter().enumerate() {
        for i in 0..WARMUP + n {
            for turn in 0..2 {
                // Round i's order is flipped from round i - 1's; timed rounds start in pairs.
                let ri = turn ^ (i % 2);
                let runner = runners[ri];
                let t = Instant::now();
                submission(runner, lang, &w, i)
                    .with_context(|| format!("{} {} submission", runner.name(), lang.name()))?;
                let dt = t.elapsed().as_secs_f64() * 1000.0;
                if i >= WARMUP {
                    samples[ri][li].push(dt);
                }
            }
        }
    }
    Ok(samples)
}

/// `{key}_{lang}_{runner}` summaries.
fn summaries(key: &str, runners: &[&Runner], samples: &[[Samples; 2]], report: &mut Report) {
    for (runner, per_lang) in runners.iter().zip(samples) {
        for (lang, s) in [Lang::C, Lang::Python].into_iter().zip(per_lang) {
            report.summary(&format!("{key}_{}_{}", lang.name(), runner.name()), s);
        }
    }
}

/// `{key}_{lang}_{what}_paired_pct`: runner 0's time over runner 1's in percent, over each two
/// consecutive rounds (in which each went first once, so the order cancels out, and a load
/// swing between rounds too), the median of those.
fn paired(samples: &Turns, key: &str, what: &str, report: &mut Report) {
    for (li, lang) in [Lang::C, Lang::Python].into_iter().enumerate() {
        let (a, b) = (samples[0][li].values(), samples[1][li].values());
        let mut pct = Samples::with_capacity(a.len() / 2);
        for (x, y) in a.chunks_exact(2).zip(b.chunks_exact(2)) {
            pct.push(((x[0] + x[1]) / (y[0] + y[1]) - 1.0) * 100.0);
        }
        report.ms(
            format!("{key}_{}_{what}_paired_pct", lang.name()),
            pct.percentile(50.0),
        );
    }
}

fn submission(runner: &Runner, lang: Lang, w: &Workload, i: usize) -> anyhow::Result<()> {
    match runner {
        Runner::Corral(pool, shape) | Runner::Gvisor(pool, shape) => {
            corral_submission(pool, shape, lang, w)
        }
        Runner::Bare => process_submission(None, lang, w, i),
        Runner::Bwrap(b) => process_submission(Some(b), lang, w, i),
    }
}

fn corral_submission(
    pool: &Arc<Pool>,
    shape: &SandboxConfig,
    lang: Lang,
    w: &Workload,
) -> anyhow::Result<()> {
    let mut lease = pool.lease(shape)?;
    let sb = lease.sandbox();
    sb.copy_in(w.src(lang))?;
    if lang == Lang::C {
        let mut cc = RunSpec::new(compile_argv());
        cc.limits.wall_time = Millis::ms(30_000);
        cc.runtime = shape.runtime;
        let o = sb.run(&cc, &mut NoSink);
        if o.status != Status::Ok {
            bail!("gcc: {} {}", o.status.as_str(), o.stderr.text());
        }
    }
    for (input, want) in w.inputs.iter().zip(&w.expected) {
        let mut spec = RunSpec::new(run_argv(lang));
        spec.limits.wall_time = Millis::ms(30_000);
        spec.stdin = Stdin::Bytes(input.as_bytes().to_vec());
        spec.runtime = shape.runtime;
        let o = sb.run(&spec, &mut NoSink);
        if o.status != Status::Ok || o.stdout.bytes != want.as_bytes() {
            bail!(
                "run: {} stdout {:?} stderr {:?}",
                o.status.as_str(),
                o.stdout.text(),
                o.stderr.text()
            );
        }
    }
    Ok(())
}

/// bare (`bwrap == None`) or through bubblewrap: a directory of its own per submission.
fn process_submission(
    bwrap: Option<&PathBuf>,
    lang: Lang,
    w: &Workload,
    i: usize,
) -> anyhow::Result<()> {
    let dir = w
        .scratch
        .join(format!("{}-{}-{i}", lang.name(), bwrap.is_some()));
    std::fs::create_dir(&dir)?;
    for e in std::fs::read_dir(w.src(lang))? {
        let e = e?;
        std::fs::copy(e.path(), dir.join(e.file_name()))?;
    }
    let result = (|| {
        if lang == Lang::C {
            let out = spawn(bwrap, &dir, &compile_argv(), None)?;
            if !out.status.success() {
                bail!("gcc: {}", String::from_utf8_lossy(&out.stderr));
            }
        }
        for (input, want) in w.inputs.iter().zip(&w.expected) {
            let out = spawn(bwrap, &dir, &run_argv(lang), Some(input.as_bytes()))?;
            if !out.status.success() || out.stdout != want.as_bytes() {
                bail!(
                    "run: {} stdout {:?} stderr {:?}",
                    out.status,
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
        Ok(())
    })();
    std::fs::remove_dir_all(&dir)?;
    result
}

/// The bubblewrap invocation compare.sh also measures, plus the submission's directory.
pub const BWRAP_ARGS: &[&str] = &[
    "--unshare-all",
    "--die-with-parent",
    "--ro-bind",
    "/usr",
    "/usr",
    "--symlink",
    "usr/lib",
    "/lib",
    "--symlink",
    "usr/lib64",
    "/lib64",
    "--symlink",
    "usr/bin",
    "/bin",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--tmpfs",
    "/tmp",
];

fn spawn(
    bwrap: Option<&PathBuf>,
    dir: &Path,
    argv: &[String],
    stdin: Option<&[u8]>,
) -> anyhow::Result<std::process::Output> {
    let mut cmd = match bwrap {
        None => {
            let mut c = Command::new(&argv[0]);
            c.args(&argv[1..]).current_dir(dir);
            c
        }
        Some(b) => {
            let mut c = Command::new(b);
            c.args(BWRAP_ARGS)
                .arg("--bind")
                .arg(dir)
                .arg("/home/sandbox")
                .args(["--chdir", "/home/sandbox", "--"])
                .args(argv);
            c
        }
    };
    cmd.env_clear()
        .env("PATH", corral_sandbox::DEFAULT_PATH)
        .env("HOME", "/home/sandbox")
        .env("LANG", "C.UTF-8")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {:?}", argv[0]))?;
    if let (Some(data), Some(mut w)) = (stdin, child.stdin.take()) {
        w.write_all(data)?;
    }
    Ok(child.wait_with_output()?)
}
