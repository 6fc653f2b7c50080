//! `/bin/true` through the pool (latency, throughput) and the precision of time limits.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use corral_sandbox::{
    Host, Millis, NoSink, Outcome, Pool, PoolConfig, RunSpec, SandboxConfig, Status,
};

use crate::stats::{Report, Samples};

/// The run every latency figure is about: the smallest program there is.
pub fn true_spec() -> RunSpec {
    let mut spec = RunSpec::new(vec!["/bin/true".into()]);
    spec.limits.cpu_time = Millis::ms(1000);
    spec.limits.wall_time = Millis::ms(5000);
    spec
}

fn pool(host: &Arc<Host>, max_idle: usize, fresh: bool) -> Arc<Pool> {
    Pool::new(
        host.clone(),
        PoolConfig {
            max_idle,
            fresh,
            ..PoolConfig::default()
        },
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A warm pool of two sandboxes of `shape` (one resets while the other runs, as in steady use).
pub fn warm_pool(host: &Arc<Host>, shape: &SandboxConfig) -> anyhow::Result<Arc<Pool>> {
    let p = pool(host, 2, false);
    p.prewarm(shape, 2)?;
    Ok(p)
}

/// [`timed_runs`] for other modules.
pub fn timed_runs_in(
    pool: &Arc<Pool>,
    spec: &RunSpec,
    warmup: usize,
    n: usize,
) -> anyhow::Result<Samples> {
    timed_runs(pool, spec, warmup, n)
}

/// Times `n` sequential runs of `spec` (after `warmup` untimed ones); fails on any run that is not
/// `ok`.
fn timed_runs(
    pool: &Arc<Pool>,
    spec: &RunSpec,
    warmup: usize,
    n: usize,
) -> anyhow::Result<Samples> {
    let mut s = Samples::with_capacity(n);
    for i in 0..warmup + n {
        let t = Instant::now();
        let o = pool.run(spec, &mut NoSink);
        let dt = t.elapsed();
        expect_ok(&o)?;
        if i >= warmup {
            s.push(ms(dt));
        }
    }
    Ok(s)
}

pub fn expect_ok(o: &Outcome) -> anyhow::Result<()> {
    if o.status != Status::Ok {
        bail!(
            "run ended {} (exit {:?}, error {:?}, stderr {:?})",
            o.status.as_str(),
            o.exit_code,
            o.error,
            o.stderr.text()
        );
    }
    Ok(())
}

/// (a) One `/bin/true`: warm pool (two prewarmed sandboxes, so the reset of the one just given
/// back overlaps the next run, as in steady use), a single warm sandbox (every run waits for the
/// reset of the previous one), `python3 -c pass` through the warm pool, and a fresh sandbox per
/// run (build + run + teardown).
pub fn latency(
    host: &Arc<Host>,
    n: usize,
    n_fresh: usize,
    report: &mut Report,
) -> anyhow::Result<()> {
    let spec = true_spec();
    let shape = SandboxConfig::for_spec(&spec);

    let warm = pool(host, 2, false);
    warm.prewarm(&shape, 2)?;
    let s = timed_runs(&warm, &spec, 50, n)?;
    report.summary("pooled", &s);
    drop(warm);

    let single = pool(host, 1, false);
    single.prewarm(&shape, 1)?;
    let s = timed_runs(&single, &spec, 20, n.div_ceil(2))?;
    report.summary("pooled_1sbx", &s);
    drop(single);

    // A syscall-heavy start (interpreter, hundreds of opens and stats): what seccomp, Landlock
    // and the cgroup add per system call shows here, next to the fixed cost above.
    let mut py = RunSpec::new(vec!["/usr/bin/python3".into(), "-c".into(), "pass".into()]);
    py.limits = spec.limits.clone();
    let warm = pool(host, 2, false);
    warm.prewarm(&shape, 2)?;
    let s = timed_runs(&warm, &py, 5, (n / 5).max(10))?;
    report.summary("pooled_python", &s);
    drop(warm);

    let fresh = pool(host, 0, true);
    let s = timed_runs(&fresh, &spec, 5, n_fresh)?;
    report.summary("fresh", &s);

    // Where a fresh run's time goes: building the sandbox vs. tearing it down.
    let mut build = Samples::with_capacity(n_fresh);
    let mut teardown = Samples::with_capacity(n_fresh);
    for _ in 0..n_fresh.min(50) {
        let t = Instant::now();
        let sb = corral_sandbox::Sandbox::create(host, &shape)?;
        build.push(ms(t.elapsed()));
        let t = Instant::now();
        drop(sb);
        teardown.push(ms(t.elapsed()));
    }
    report.summary("fresh_build", &build);
    report.summary("fresh_teardown", &teardown);
    Ok(())
}

/// (b) Runs/s with `p` threads sharing one pool (max_idle = 2p, prewarmed), `total` runs each level.
pub fn throughput(host: &Arc<Host>, total: usize, report: &mut Report) -> anyhow::Result<()> {
    let spec = Arc::new(true_spec());
    let shape = SandboxConfig::for_spec(&spec);
    for p in [1usize, 2, 8] {
        let pool = pool(host, 2 * p, false);
        pool.prewarm(&shape, 2 * p)?;
        // Warm the code paths (and the reset pipeline) before the clock starts.
        timed_runs(&pool, &spec, 0, 2 * p)?;
        let next = Arc::new(AtomicUsize::new(0));
        let lat = Arc::new(Mutex::new(Samples::with_capacity(total)));
        let failures = Arc::new(AtomicUsize::new(0));
        let start = Instant::now();
        let threads: Vec<_> = (0..p)
            .map(|_| {
                let (pool, spec, next, lat, failures) = (
                    pool.clone(),
                    spec.clone(),
                    next.clone(),
                    lat.clone(),
                    failures.clone(),
                );
                std::thread::spawn(move || {
                    let mut mine = Samples::with_capacity(total / p + 1);
                    while next.fetch_add(1, Ordering::Relaxed) < total {
                        let t = Instant::now();
                        let o = pool.run(&spec, &mut NoSink);
                        mine.push(ms(t.elapsed()));
                        if o.status != Status::Ok {
                            failures.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    lat.lock().expect("no panics while held").extend(mine);
                })
            })
            .collect();
        for t in threads {
            t.join().map_err(|_| anyhow::anyhow!("a worker panicked"))?;
        }
        let secs = start.elapsed().as_secs_f64();
        let failed = failures.load(Ordering::Relaxed);
        if failed > 0 {
            report.error(format!("throughput p{p}: {failed} of {total} runs not ok"));
        }
        report.set(
            format!("pooled_runs_per_s_p{p}"),
            (total as f64 / secs).round(),
        );
        let lat = lat.lock().expect("no panics while held");
        report.ms(format!("pooled_run_p50_ms_p{p}"), lat.percentile(50.0));
        report.ms(format!("pooled_run_p99_ms_p{p}"), lat.percentile(99.0));
        report.set(format!("pooled_runs_p{p}"), total);
    }
    Ok(())
}

/// (d) A CPU spin under a 100 ms CPU limit and `sleep 5` under a 100 ms wall limit, `n` times
/// each. Overshoot is what the result reports minus the limit; for the wall limit the host-side
/// figure too: how long the caller waited for the verdict, minus the limit.
pub fn limits(host: &Arc<Host>, n: usize, report: &mut Report) -> anyhow::Result<()> {
    let mut spin = RunSpec::new(vec![
        "/bin/sh".into(),
        "-c".into(),
        "while :; do :; done".into(),
    ]);
    spin.limits.cpu_time = Millis::ms(100);
    spin.limits.wall_time = Millis::ms(5000);
    let mut sleep = RunSpec::new(vec!["/bin/sleep".into(), "5".into()]);
    sleep.limits.cpu_time = Millis::ms(1000);
    sleep.limits.wall_time = Millis::ms(100);

    let pool = pool(host, 2, false);
    pool.prewarm(&SandboxConfig::for_spec(&spin), 2)?;
    let mut worst = Samples::default();
    // The floor, taking turns with the wall probes: the same `sleep 5` started bare, killed by
    // its parent at 100 ms and reaped. Its lateness is the machine's (the timer's wake-up, the
    // kill, the exit, the reap): a VM whose idle vCPUs its host wakes late shows it here too.
    let mut bare_wall = Samples::with_capacity(n);
    for (name, spec, want) in [
        ("cpu", &spin, Status::TimeLimit),
        ("wall", &sleep, Status::WallTimeLimit),
    ] {
        let mut over = Samples::with_capacity(n);
        let mut host_over = Samples::with_capacity(n);
        let mut elapsed = Samples::with_capacity(n);
        for i in 0..n + 2 {
            if name == "wall" {
                let late = bare_wall_overshoot()?;
                if i >= 2 {
                    bare_wall.push(late);
                }
            }
            let t = Instant::now();
            let o = pool.run(spec, &mut NoSink);
            let waited = ms(t.elapsed());
            if o.status != want {
                report.error(format!(
                    "{name} limit probe ended {} instead of {}",
                    o.status.as_str(),
                    want.as_str()
                ));
                continue;
            }
            if i < 2 {
                continue; // warm-up
            }
            let used = match name {
                "cpu" => o.usage.cpu_time_ms,
                _ => o.usage.wall_time_ms,
            };
            over.push(used as f64 - 100.0);
            host_over.push(waited - 100.0);
            elapsed.push(waited);
        }
        report.summary(&format!("limit_{name}_overshoot"), &over);
        report.ms(format!("limit_{name}_overshoot_max_ms"), over.max());
        if name == "wall" {
            report.summary("limit_wall_host_overshoot", &host_over);
        } else {
            // A spin gets less than a whole CPU on a busy machine: wall time says nothing here.
            report.summary("limit_cpu_elapsed", &elapsed);
        }
        worst.push(over.percentile(99.0));
    }
    report.ms("limit_overshoot_p99_ms", worst.max());
    report.summary("limit_bare_wall_overshoot", &bare_wall);
    Ok(())
}

/// How late past 100 ms a bare `sleep 5`, killed by its parent at 100 ms, is reaped (ms).
fn bare_wall_overshoot() -> anyhow::Result<f64> {
    let mut child = std::process::Command::new("/bin/sleep").arg("5").spawn()?;
    let start = Instant::now();
    std::thread::sleep(Duration::from_millis(100));
    child.kill()?;
    child.wait()?;
    Ok(ms(start.elapsed()) - 100.0)
}
