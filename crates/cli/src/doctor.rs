//! `corral doctor`: what this host offers, plus a real sandboxed run to prove it.

use std::sync::Arc;

use clap::Args;
use corral_sandbox::{Host, InitProgram, RunSpec, Runtime, Status};

#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

pub fn main(args: DoctorArgs) -> i32 {
    let report = corral_sandbox::doctor::probe();
    let smoke = smoke_test(report.ready(), Runtime::Native);
    // gVisor is optional: its failure is reported (runs asking for it fail), not fatal.
    let gvisor_smoke = match report.checks.iter().find(|c| c.name == "gvisor") {
        Some(c) if c.ok => smoke_test(report.ready(), Runtime::Gvisor),
        Some(c) => Err(c.detail.clone()),
        None => Err("not probed".into()),
    };
    let enforcement = corral_sandbox::doctor::runtime_enforcement(&report, gvisor_smoke.is_ok());
    let ready = report.ready() && smoke.is_ok();
    let check50_tools = corral_checks::check50_toolchain::probe(
        std::path::Path::new(corral_checks::kinds::check50::SITE),
        std::path::Path::new("/usr/bin/python3"),
    );
    if args.json {
        let languages: serde_json::Map<String, serde_json::Value> = crate::check::registry(None)
            .map(|r| {
                r.iter()
                    .map(|l| (l.id.clone(), serde_json::json!(l.exposure())))
                    .collect()
            })
            .unwrap_or_default();
        let seccomp: serde_json::Map<String, serde_json::Value> = crate::check::registry(None)
            .map(|r| {
                r.iter()
                    .map(|l| (l.id.clone(), serde_json::json!(l.seccomp.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        let v = serde_json::json!({
            "ready": ready,
            "language_exposures": languages,
            "language_seccomp": seccomp,
            "level": report.level(),
            "checks": report.checks,
            "sandbox_smoke_test": match &smoke { Ok(s) => serde_json::json!({"ok": true, "detail": s}), Err(e) => serde_json::json!({"ok": false, "detail": e}) },
            "check50_host_tools": check50_tools.iter().map(|t| serde_json::json!({
                "name": t.name,
                "found": t.found.is_ok(),
                "detail": match &t.found { Ok(s) | Err(s) => s },
                "needed_by": t.needed_by,
            })).collect::<Vec<_>>(),
            "runtimes": {
                "native": {"usable": smoke.is_ok(), "enforces": enforcement[0].1},
                "gvisor": {
                    "usable": gvisor_smoke.is_ok(),
                    "detail": match &gvisor_smoke { Ok(s) | Err(s) => s },
                    "enforces": enforcement[1].1,
                },
            },
        });
        println!("{v:#}");
    } else {
        for c in &report.checks {
            let mark = if c.ok {
                "ok  "
            } else if c.required {
                "FAIL"
            } else {
                "warn"
            };
            println!("{mark}  {:<16} {}", c.name, c.detail);
        }
        match &smoke {
            Ok(s) => println!("ok    {:<16} {s}", "sandbox"),
            Err(e) => println!("FAIL  {:<16} {e}", "sandbox"),
        }
        match &gvisor_smoke {
            Ok(s) => println!("ok    {:<16} {s}", "gvisor sandbox"),
            Err(e) => println!("warn  {:<16} UNUSABLE: {e}", "gvisor sandbox"),
        }
        println!();
        for (runtime, enforces) in &enforcement {
            println!("runtime {runtime:<8} {enforces}");
        }
        if let Ok(registry) = crate::check::registry(None) {
            let exposures: Vec<_> = registry.iter().map(|l| l.exposure()).collect();
            crate::languages::print_exposures(
                registry.iter().map(|l| l.id.as_str()).zip(&exposures),
            );
            crate::languages::print_seccomp_profiles(registry.iter());
        }
        // Not required: only check50 problems on the host root use them, and one that needs a
        // missing tool refuses to load, naming it.
        println!("\ncheck50 problems on the host root use:");
        for t in &check50_tools {
            match &t.found {
                Ok(s) => println!("  ok    {:<12} {s}", t.name),
                Err(e) => println!("  warn  {:<12} {e}: needed by {}", t.name, t.needed_by),
            }
        }
        println!();
        if ready {
            println!("isolation: {}", report.level());
        } else {
            println!("isolation: NONE — corral refuses to run programs on this host until the FAIL lines are fixed");
        }
    }
    if ready {
        0
    } else {
        1
    }
}

/// Builds a real sandbox of `runtime` and runs `id -u` in it.
fn smoke_test(ready: bool, runtime: Runtime) -> Result<String, String> {
    if !ready {
        return Err("skipped: a required feature is missing".into());
    }
    let host = Arc::new(
        InitProgram::current_exe()
            .and_then(Host::new)
            .map_err(|e| e.to_string())?,
    );
    let mut spec = RunSpec::new(vec!["/bin/sh".into(), "-c".into(), "id -u".into()]);
    spec.runtime = runtime;
    let o = corral_sandbox::run_fresh(&host, &spec, &mut corral_sandbox::NoSink);
    match o.status {
        Status::Ok => Ok(format!(
            "ran `id -u` as uid {} in {} ms (cgroup {})",
            o.stdout.text().trim(),
            o.usage.wall_time_ms,
            host.cgroup_version()
        )),
        _ => Err(format!(
            "{}: {}{}",
            o.status.as_str(),
            o.error.unwrap_or_default(),
            o.stderr.text()
        )),
    }
}
