//! `corral env build FILE [--name NAME] [--json]`: an image from a build file, each `run` step in
//! a build sandbox. Progress (step N/M, cached or ran, time) and the steps' own output go to
//! stderr; stdout gets the result: `DIGEST NAME`, or with `--json` one summary object.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use crate::errors::OrUsage;
use corral_images::build::{self, BuildFile, Event};
use corral_images::Store;

#[derive(Args, Debug)]
pub struct BuildArgs {
    /// The build file (YAML, or JSON when it ends in .json; see schemas/build.schema.json).
    file: PathBuf,
    /// Name for the image [default: the file's `name`, else none: the digest names it].
    #[arg(long)]
    name: Option<String>,
    /// One JSON summary on stdout (digest, name, base, per step: cached, seconds, layer).
    #[arg(long)]
    json: bool,
}

pub fn run(store: &Store, args: BuildArgs) -> anyhow::Result<()> {
    // A build file that cannot be read or means nothing is the caller's to fix, as a suite is.
    let file = BuildFile::load(&args.file).usage()?;
    let host = crate::sandboxes::host()
        .context("the build sandbox cannot start here; run `corral doctor` to see why")?;
    let mut runner = build::sandboxed::SandboxRunner::new(host);
    let mut stderr = std::io::stderr();
    let mut on_event = |e: Event<'_>| {
        // Progress is best effort: a closed stderr must not fail the build.
        let _ = match e {
            Event::Start { step, total, text } => {
                writeln!(stderr, "step {step}/{total}: {text}")
            }
            Event::Output(bytes) => stderr.write_all(bytes),
            Event::Done(r) => {
                let what = if r.cached { "cached" } else { "ran" };
                let layer = r
                    .layer
                    .as_ref()
                    .map(|d| format!(", layer {}", &d.to_string()[..19]))
                    .unwrap_or_default();
                writeln!(stderr, "step {}: {what} ({:.1}s{layer})", r.step, r.seconds)
            }
        };
    };
    let report = build::build(
        store,
        &file,
        args.name.as_deref(),
        &mut runner,
        &mut on_event,
    )
    .map_err(|e| match e {
        // A name that is none (`--name`, the file's `name`).
        build::BuildError::File(_) => crate::errors::usage(e),
        // A base image the store does not have (or cannot be named so), as `run --image`.
        build::BuildError::Base { ref source, .. }
            if matches!(
                source,
                corral_images::Error::NotFound(_)
                    | corral_images::Error::BadReference(_)
                    | corral_images::Error::Ambiguous { .. }
            ) =>
        {
            crate::errors::usage(e)
        }
        e => e.into(),
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        eprintln!(
            "built {} ({} steps ran, {} cached)",
            report.digest, report.ran, report.cached
        );
        let names: Vec<String> = report.name.iter().cloned().collect();
        println!("{}", digest_line(&report.digest, &names));
    }
    Ok(())
}

/// `DIGEST NAME…`, or the digest alone for an image without a name (no space after it): a
/// build's result line, and an import's (`env`, which calls into this module, never the
/// reverse).
pub fn digest_line(digest: &impl std::fmt::Display, names: &[String]) -> String {
    std::iter::once(digest.to_string())
        .chain(names.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ")
}
