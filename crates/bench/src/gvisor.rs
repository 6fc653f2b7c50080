//! The gVisor runtime, measured in one run with its baseline: a fresh gVisor sandbox per run, runs
//! in one leased (warm) gVisor sandbox — the "one submission, many runs" model — runs through a
//! pool whose spare sandboxes were started ahead, and `runsc do /bin/true` (gVisor's own quickest
//! way to run one command). The target: a warm-lease run at most a fifth of a `runsc do`.

use std::sync::Arc;
use std::time::Instant;

use corral_sandbox::{Host, NoSink, Pool, PoolConfig, Runtime, SandboxConfig};

use crate::pooled::{expect_ok, true_spec};
use crate::stats::{Report, Samples};

pub fn measure(host: &Arc<Host>, n: usize, report: &mut Report) -> anyhow::Result<()> {
    let runsc = host.runsc()?.path.clone();
    let mut spec = true_spec();
    spec.runtime = Runtime::Gvisor;
    let shape = SandboxConfig::for_spec(&spec);
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1000.0;

    let fresh = Pool::new(
        host.clone(),
        PoolConfig {
            max_idle: 0,
            fresh: true,
            ..Default::default()
        },
    );
    let mut s = Samples::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        expect_ok(&fresh.run(&spec, &mut NoSink))?;
        s.push(ms(t));
    }
    report.summary("gvisor_fresh", &s);

    let leased = Pool::new(host.clone(), PoolConfig::default());
    let mut lease = leased.lease(&shape)?;
    let mut warm = Samples::with_capacity(n * 4);
    for _ in 0..n * 4 {
        let t = Instant::now();
        expect_ok(&corral_sandbox::run_in(lease.sandbox(), &spec, &mut NoSink))?;
        warm.push(ms(t));
    }
    drop(lease);
    report.summary("gvisor_warm_lease", &warm);

    // One run per lease, as `corral run --batch` does: each lease takes a pre-started sandbox and
    // its return starts the next one in the background (a pause between runs lets it finish).
    let spares = Pool::new(
        host.clone(),
        PoolConfig {
            max_idle: 2,
            ..Default::default()
        },
    );
    spares.prewarm(&shape, 2)?;
    let mut pre = Samples::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        expect_ok(&spares.run(&spec, &mut NoSink))?;
        pre.push(ms(t));
        std::thread::sleep(std::time::Duration::from_millis(400));
    }
    report.summary("gvisor_prestarted", &pre);

    let mut runsc_do = Samples::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let st = std::process::Command::new(&runsc)
            .args(["--network=none", "do", "/bin/true"])
            .status()?;
        anyhow::ensure!(st.success(), "runsc do /bin/true failed: {st}");
        runsc_do.push(ms(t));
    }
    report.summary("runsc_do", &runsc_do);
    report.set(
        "gvisor_warm_over_runsc_do_p50",
        warm.percentile(50.0) / runsc_do.percentile(50.0),
    );
    Ok(())
}
