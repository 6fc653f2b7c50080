//! Pooled `/bin/true` in a container image's root next to the host's root, in the same run:
//! what overlayfs and the image's layers add to a warm run (the target is at most 1.1×).
//!
//! The image comes from a data folder's store; its layer folders are read from
//! `corral env inspect` (the bench links only the sandbox library).

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use corral_sandbox::{Host, ImageRoot, Root, RootClaim, SandboxConfig};

use crate::pooled::{timed_runs_in, true_spec, warm_pool};
use crate::stats::{Report, Samples};

/// The image `reference` of the data folder `data`, as `corral env inspect` describes it.
fn inspect(corral: &Path, data: &Path, reference: &str) -> anyhow::Result<ImageRoot> {
    let out = std::process::Command::new(corral)
        .args(["env", "--data"])
        .arg(data)
        .args(["inspect", reference])
        .output()
        .context("running corral env inspect")?;
    anyhow::ensure!(
        out.status.success(),
        "corral env inspect {reference}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let layers = v["layer_dirs"]
        .as_array()
        .context("no layer_dirs in corral env inspect")?
        .iter()
        .filter_map(|l| l.as_str().map(Into::into))
        .collect();
    Ok(ImageRoot {
        name: reference.into(),
        digest: v["digest"].as_str().unwrap_or_default().into(),
        layers,
        env: Vec::new(),
        working_dir: None,
        upper: None,
        as_root: false,
        // Nobody collects garbage during a benchmark; the bench links only the sandbox library.
        claim: RootClaim::default(),
    })
}

/// Rounds of `n / rounds` runs each, host root and image root taking turns, so drift on the
/// machine hits both alike.
pub fn measure(
    host: &Arc<Host>,
    corral: &Path,
    image: Option<(&Path, &str)>,
    n: usize,
    report: &mut Report,
) -> anyhow::Result<()> {
    let Some((data, reference)) = image else {
        report.set(
            "image_skipped",
            "no --image-data / --image given (bench/compare.sh imports the test image when it is cached)",
        );
        return Ok(());
    };
    let img = inspect(corral, data, reference)?;
    report.set("image_layers", img.layers.len());
    let host_spec = true_spec();
    let mut image_spec = true_spec();
    image_spec.root = Root::Image(img);
    let host_pool = warm_pool(host, &SandboxConfig::for_spec(&host_spec))?;
    let image_pool = warm_pool(host, &SandboxConfig::for_spec(&image_spec))?;
    let rounds = 10;
    let per = n.div_ceil(rounds);
    let (mut on_host, mut in_image) = (Samples::with_capacity(n), Samples::with_capacity(n));
    for i in 0..rounds {
        let warmup = if i == 0 { 20 } else { 0 };
        on_host.extend(timed_runs_in(&host_pool, &host_spec, warmup, per)?);
        in_image.extend(timed_runs_in(&image_pool, &image_spec, warmup, per)?);
    }
    report.summary("image_host_pooled", &on_host);
    report.summary("image_pooled", &in_image);
    report.ms(
        "image_p50_over_host",
        in_image.percentile(50.0) / on_host.percentile(50.0),
    );
    Ok(())
}
