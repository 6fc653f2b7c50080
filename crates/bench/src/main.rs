//! `corral-bench`: measures corral in-process, driving sandboxes through the library with the
//! `corral` binary as their init, and prints one JSON object of measurements on stdout.
//!
//! Sections (all by default, in this order):
//! - `rss`: memory of this process holding an idle pool of 8 warm sandboxes (measured first, so
//!   nothing else has grown the heap yet), and of the sandboxes' own processes;
//! - `latency`: one `/bin/true` through the warm pool and through a fresh sandbox, p50/p99;
//! - `throughput`: runs/s with 1, 2 and 8 threads sharing one pool;
//! - `limits`: how far past a 100 ms CPU or wall limit a run gets before it is stopped, next to
//!   the floor: a bare `sleep 5` killed by its parent at 100 ms, taking turns with the wall probes;
//! - `image`: pooled `/bin/true` in a container image's root and on the host's root, taking turns
//!   (with `--image-data` and `--image`);
//! - `grading`: a C submission (gcc + 10 runs) and a Python one (10 runs), the same work done
//!   through corral's pool, bare (no sandbox) and through bubblewrap, interleaved submission by
//!   submission so drift on the machine hits all three alike;
//! - `gvisor` (when asked for): the gVisor runtime fresh, in a warm lease, pre-started, and
//!   `runsc do`, in the same run.
//! - `ws` (only when asked for, with `--ws-url`): stdin line in → echo out over a running
//!   `corral serve`'s WebSocket (`bench/service.sh` starts the server).
//!
//! `bench/compare.sh` runs this next to the other sandboxes and writes the comparison. Nothing
//! here asserts a timing: it measures and reports.

mod grading;
mod gvisor;
mod image_root;
mod pooled;
mod rss;
mod stats;
mod ws_echo;

use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;
use corral_sandbox::{Host, InitProgram};

use stats::Report;

#[derive(Parser, Debug)]
#[command(
    name = "corral-bench",
    about = "Measures corral's pool, fresh sandboxes, limits and memory; prints JSON"
)]
pub struct Args {
    /// The built `corral` binary, started as every sandbox's init (`corral __sandbox-init`).
    #[arg(long)]
    pub corral: PathBuf,
    /// Fewer iterations everywhere (a smoke run in well under a minute).
    #[arg(long)]
    pub quick: bool,
    /// Comma-separated sections: rss, latency, throughput, limits, image, grading, gvisor, ws.
    #[arg(long, default_value = "rss,latency,throughput,limits,image,grading")]
    pub sections: String,
    /// The data folder whose image store holds `--image` (the `image` section).
    #[arg(long, requires = "image")]
    pub image_data: Option<PathBuf>,
    /// The image the `image` section runs in (a name or digest in `--image-data`).
    #[arg(long, requires = "image_data")]
    pub image: Option<String>,
    /// Timed `/bin/true` runs through the warm pool (default 1000, quick 200).
    #[arg(long)]
    pub n: Option<usize>,
    /// Timed runs with a fresh sandbox each (default 150, quick 30).
    #[arg(long)]
    pub n_fresh: Option<usize>,
    /// Runs per parallelism level in the throughput section (default 2000, quick 400).
    #[arg(long)]
    pub throughput_runs: Option<usize>,
    /// Runs of each limit probe (default 100, quick 10): a p99 of fewer is simply the worst run.
    #[arg(long)]
    pub limit_runs: Option<usize>,
    /// Timed submissions per language and runner in the grading section (default 16, quick 8; an
    /// odd number is rounded up: the order of the turns flips every round).
    #[arg(long)]
    pub submissions: Option<usize>,
    /// The WebSocket of a running `corral serve` (`ws://HOST:PORT/ws`), for the `ws` section.
    #[arg(long)]
    pub ws_url: Option<String>,
    /// A token of that server for the `ws` section.
    #[arg(long)]
    pub ws_token: Option<String>,
    /// Lines typed in the `ws` section (default 100, quick 20).
    #[arg(long)]
    pub ws_lines: Option<usize>,
    /// bubblewrap for the grading comparison (skipped when absent).
    #[arg(long, default_value = "/usr/bin/bwrap")]
    pub bwrap: PathBuf,
}

impl Args {
    fn pick(&self, v: Option<usize>, full: usize, quick: usize) -> usize {
        v.unwrap_or(if self.quick { quick } else { full }).max(1)
    }
}

fn main() {
    let args = Args::parse();
    let mut report = Report::default();
    let code = match run(&args, &mut report) {
        Ok(()) => 0,
        Err(e) => {
            report.error(format!("{e:#}"));
            1
        }
    };
    let mut out = report.values;
    out.insert(
        "errors".into(),
        serde_json::Value::from(report.errors.clone()),
    );
    println!("{}", serde_json::Value::Object(out));
    std::process::exit(code);
}

fn run(args: &Args, report: &mut Report) -> anyhow::Result<()> {
    let corral = std::fs::canonicalize(&args.corral)
        .map_err(|e| anyhow::anyhow!("--corral {}: {e}", args.corral.display()))?;
    let host = Arc::new(Host::new(InitProgram {
        path: corral,
        arg: corral_sandbox::INIT_ARG.into(),
    })?);
    report.set("quick", args.quick);
    report.set(
        "cgroup_version",
        format!("{:?}", host.cgroup_version()).to_lowercase(),
    );
    let sections: Vec<&str> = args.sections.split(',').map(str::trim).collect();
    for section in &sections {
        let t = std::time::Instant::now();
        let result = match *section {
            "rss" => rss::measure(&host, report),
            "latency" => pooled::latency(
                &host,
                args.pick(args.n, 1000, 200),
                args.pick(args.n_fresh, 150, 30),
                report,
            ),
            "throughput" => {
                pooled::throughput(&host, args.pick(args.throughput_runs, 2000, 400), report)
            }
            "limits" => pooled::limits(&host, args.pick(args.limit_runs, 100, 10), report),
            "image" => image_root::measure(
                &host,
                &args.corral,
                args.image_data.as_deref().zip(args.image.as_deref()),
                args.pick(args.n, 1000, 200),
                report,
            ),
            "grading" => grading::measure(
                &host,
                args.pick(args.submissions, 16, 8),
                &args.bwrap,
                report,
            ),
            "gvisor" => {
                gvisor::measure(&host, args.pick(args.n_fresh, 30, 5), report).and_then(|()| {
                    grading::measure_gvisor(&host, args.pick(args.submissions, 16, 8), report)
                })
            }
            "ws" => match (&args.ws_url, &args.ws_token) {
                (Some(url), Some(token)) => {
                    ws_echo::measure(url, token, args.pick(args.ws_lines, 100, 20), report)
                }
                _ => Err(anyhow::anyhow!(
                    "the ws section needs --ws-url and --ws-token"
                )),
            },
            "" => Ok(()),
            other => Err(anyhow::anyhow!("unknown section {other:?}")),
        };
        if let Err(e) = result {
            report.error(format!("section {section}: {e:#}"));
        }
        eprintln!(
            "corral-bench: {section} done in {:.1}s",
            t.elapsed().as_secs_f64()
        );
    }
    Ok(())
}
