//! `corral env build`: an image from a base and a list of steps (see [`file`] for the file).
//!
//! Each `run` step runs in a build sandbox (a [`StepRunner`]: the caller's, so this crate needs
//! no sandbox of its own) over the image so far, and what it changed — the overlayfs upper folder
//! — becomes a layer ([`crate::changes`]); a `copy` step writes its files into such a folder
//! itself; `env` and `workdir` change only the config. Every completed step is cached by its key
//! ([`key`]): an unchanged step is not run again. Only when every step succeeded is the image
//! written (an OCI manifest and config with one history entry per step) and named; a failed build
//! names nothing.

mod config;
pub mod copy;
mod error;
pub mod file;
pub mod key;
mod runner;
pub mod sandboxed;

use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;

use crate::changes::{layer_from_changes, IdMap};
use crate::digest::Digest;
use crate::error::IoContext;
use crate::store::{State, Store};
pub use error::BuildError;
pub use file::{BuildFile, Command, Step};
pub use runner::{Changes, RunRequest, StepOutcome, StepRunner};

/// Progress of a build, for the caller to show.
pub enum Event<'a> {
    /// A step begins (it may turn out cached).
    Start {
        step: usize,
        total: usize,
        text: &'a str,
    },
    /// Output of the running step.
    Output(&'a [u8]),
    /// A step is done.
    Done(&'a StepReport),
}

/// One step of a finished (or failed) build.
#[derive(Debug, Clone, Serialize)]
pub struct StepReport {
    pub step: usize,
    pub text: String,
    /// Not run: its result came from the step cache.
    pub cached: bool,
    pub seconds: f64,
    /// The diff-id of the layer it added (`None`: config only, or nothing changed).
    pub layer: Option<Digest>,
    pub key: Digest,
}

/// A finished build.
#[derive(Debug, Clone, Serialize)]
pub struct BuildReport {
    /// The new image's manifest digest.
    pub digest: Digest,
    pub name: Option<String>,
    pub base: Digest,
    pub steps: Vec<StepReport>,
    /// Steps actually run (not cached).
    pub ran: usize,
    pub cached: usize,
}

/// Builds `file` into `store` and names the result `name` (else the file's `name`, else nothing).
pub fn build(
    store: &Store,
    file: &BuildFile,
    name: Option<&str>,
    runner: &mut dyn StepRunner,
    events: &mut dyn FnMut(Event<'_>),
) -> Result<BuildReport, BuildError> {
    let name = name.or(file.name.as_deref());
    if let Some(n) = name {
        crate::store::refs::normalise_name(n).ok_or_else(|| {
            BuildError::File(crate::document::DocumentError::Parse {
                path: file.path.clone(),
                location: None,
                message: format!("name: {n:?} is not an image name"),
            })
        })?;
    }
    // Shared with imports and pulls: `gc` waits until the build is done with its new layers.
    let _writing = store.writer_lock()?;
    let (_, base) = store
        .resolve(&file.from)
        .map_err(|source| BuildError::Base {
            reference: file.from.clone(),
            source,
        })?;
    let mut state = State {
        key: base.digest.clone(),
        layers: base.layers.clone(),
        env: base.env.clone(),
        working_dir: base.working_dir.clone(),
        history: Vec::new(),
    };
    let total = file.steps.len();
    let mut reports = Vec::new();
    for (i, step) in file.steps.iter().enumerate() {
        let n = i + 1;
        let text = step.to_string();
        events(Event::Start {
            step: n,
            total,
            text: &text,
        });
        let started = Instant::now();
        let source = match step {
            Step::Copy { src, .. } => Some(copy::Source::open(&file.dir, src).map_err(
                |message| BuildError::Copy {
                    step: n,
                    total,
                    message,
                },
            )?),
            _ => None,
        };
        let content = match &source {
            Some(s) => Some(s.digest().map_err(|message| BuildError::Copy {
                step: n,
                total,
                message,
            })?),
            None => None,
        };
        let k = key::key(&state.key, step, content.as_ref());
        let layers_before = state.layers.len();
        let cached = store.cached_state(&k)?;
        let was_cached = cached.is_some();
        state = match cached {
            Some(s) => s,
            None => {
                let at = At { step: n, total };
                let next = apply(
                    store,
                    file,
                    step,
                    at,
                    &state,
                    source.as_ref(),
                    runner,
                    events,
                )?;
                let next = State {
                    key: k.clone(),
                    ..next
                };
                store.save_state(&next)?;
                next
            }
        };
        let report = StepReport {
            step: n,
            text,
            cached: was_cached,
            seconds: started.elapsed().as_secs_f64(),
            layer: (state.layers.len() > layers_before)
                .then(|| state.layers.last().map(|l| l.diff_id.clone()))
                .flatten(),
            key: k,
        };
        events(Event::Done(&report));
        reports.push(report);
    }
    let record = config::write_image(store, &base, &state, name, &file.path)?;
    let ran = reports.iter().filter(|r| !r.cached).count();
    Ok(BuildReport {
        digest: record.digest,
        name: match name {
            Some(n) => crate::store::refs::normalise_name(n),
            None => None,
        },
        base: base.digest,
        cached: reports.len() - ran,
        ran,
        steps: reports,
    })
}

/// Which step of how many.
#[derive(Clone, Copy)]
struct At {
    step: usize,
    total: usize,
}

/// Runs one step that was not cached; returns the state after it (its key still the parent's).
#[allow(clippy::too_many_arguments)]
fn apply(
    store: &Store,
    file: &BuildFile,
    step: &Step,
    At { step: n, total }: At,
    before: &State,
    source: Option<&copy::Source>,
    runner: &mut dyn StepRunner,
    events: &mut dyn FnMut(Event<'_>),
) -> Result<State, BuildError> {
    let mut next = before.clone();
    next.history.push(config::history_entry(step, false));
    let lower_dirs: Vec<PathBuf> = store.stack(&before.layers);
    let layer_err = |source| BuildError::Layer {
        step: n,
        total,
        source,
    };
    let scratch = tempfile::Builder::new()
        .prefix("build-")
        .tempdir_in(store.tmp_dir())
        .at(store.tmp_dir())?;
    let new_layer = match step {
        Step::Env(vars) => {
            next.env = config::set_env(&before.env, vars);
            None
        }
        Step::Workdir(w) => {
            next.working_dir = Some(w.clone());
            None
        }
        Step::Copy { dst, .. } => {
            let upper = scratch.path().join("upper");
            std::fs::create_dir(&upper).at(&upper)?;
            let src = source.expect("a copy step has its source open");
            src.write(&upper, dst, &lower_dirs)
                .map_err(|message| BuildError::Copy {
                    step: n,
                    total,
                    message,
                })?;
            layer_from_changes(store, &upper, IdMap::IDENTITY, None).map_err(layer_err)?
        }
        Step::Run { command, .. } => {
            let request = RunRequest {
                step: n,
                total,
                image: format!("{}, build step {n}", file.from),
                parent: before.key.clone(),
                argv: command.argv(),
                lower_dirs,
                env: before.env.clone(),
                working_dir: before.working_dir.clone(),
                limits: file.limits_of(step),
                scratch: scratch.path(),
            };
            let outcome = runner
                .run(request, &mut |bytes| events(Event::Output(bytes)))
                .map_err(|message| BuildError::Sandbox {
                    step: n,
                    total,
                    message,
                })?;
            match outcome {
                StepOutcome::Failed(verdict) => {
                    return Err(BuildError::StepFailed {
                        step: n,
                        total,
                        verdict,
                    })
                }
                StepOutcome::Succeeded(changes) => {
                    let disk = file.limits_of(step).disk.bytes();
                    let layer = layer_from_changes(store, &changes.upper, changes.ids, Some(disk))
                        .map_err(layer_err)?;
                    drop(changes);
                    layer
                }
            }
        }
    };
    match new_layer {
        Some(l) => next.layers.push(l.layer),
        None => {
            if let Some(h) = next.history.last_mut() {
                *h = config::history_entry(step, true);
            }
        }
    }
    Ok(next)
}
