//! `corral run --batch`: many runs from one process, through the warm pool, results in input order.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};

use corral_sandbox::{LimitsRequest, Pool, PoolConfig, Root, RunSpecJson, Runtime};

use crate::image_choice::Images;

/// How a batch's lines are spread over sandboxes.
pub struct Workers {
    /// Lines running at once.
    pub parallel: usize,
    /// Warm sandboxes kept.
    pub pool_size: usize,
    /// A new sandbox per line instead of the pool.
    pub fresh: bool,
}

/// Runs every line of `file`; prints one JSON line per input line. Returns the exit code.
pub fn main(
    file: &Path,
    workers: Workers,
    runtime: Runtime,
    defaults: &LimitsRequest,
    image: Option<&str>,
    images: Images,
) -> i32 {
    let reader: Box<dyn BufRead + Send> = if file == Path::new("-") {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        match std::fs::File::open(file) {
            Ok(f) => Box::new(std::io::BufReader::new(f)),
            Err(e) => {
                eprintln!("corral run: --batch {}: {e}", file.display());
                return crate::exit::USAGE;
            }
        }
    };
    let base = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let defaults = match defaults.resolve(&corral_sandbox::Limits::default()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("corral run: {e}");
            return crate::exit::USAGE;
        }
    };
    // `--image` is the default image of every line (a line's own "image" wins).
    let default_root = match image.map(|r| images.root(r)).transpose() {
        Ok(root) => root.unwrap_or_default(),
        Err(e) => {
            eprintln!("corral run: {e}");
            return crate::exit::USAGE;
        }
    };
    let images = Arc::new(images);
    let host = match crate::sandboxes::host_or_exit("run") {
        Ok(h) => h,
        Err(code) => return code,
    };
    let Workers {
        parallel,
        pool_size,
        fresh,
    } = workers;
    let parallel = parallel.max(1);
    // Spares: while a sandbox resets after its run, its worker takes another that is ready.
    let pool = Pool::new(
        host,
        PoolConfig {
            max_idle: pool_size.max(1),
            fresh,
            ..Default::default()
        },
    );
    if !fresh {
        // Warm sandboxes of the default shape; lines with another shape build their own.
        let mut probe = corral_sandbox::RunSpec::new(vec!["true".into()]);
        probe.limits = defaults.clone();
        probe.root = default_root.clone();
        probe.runtime = runtime;
        let shape = corral_sandbox::SandboxConfig::for_spec(&probe);
        if let Err(e) = pool.prewarm(&shape, pool_size.max(1)) {
            eprintln!("corral run: sandbox error: {e}");
            return crate::exit::SANDBOX_ERROR;
        }
    }

    // Lines are read lazily by the workers, so a huge file is never held in memory at once.
    let lines = Arc::new(Mutex::new(reader.lines().enumerate()));
    // None for a blank line: it has no result line, but its place in the order is kept.
    let (tx, rx) = mpsc::channel::<(usize, Option<String>)>();
    let mut workers = Vec::new();
    for _ in 0..parallel {
        let (lines, tx, pool, base, defaults) = (
            lines.clone(),
            tx.clone(),
            pool.clone(),
            base.clone(),
            defaults.clone(),
        );
        let (images, default_root) = (images.clone(), default_root.clone());
        workers.push(std::thread::spawn(move || loop {
            let next = lines.lock().ok().and_then(|mut it| it.next());
            let Some((i, line)) = next else { break };
            let result = match line {
                // A blank line (a trailing newline too many, a spacer) is no run spec.
                Ok(line) if line.trim().is_empty() => None,
                Ok(line) => {
                    let ctx = LineContext {
                        base: &base,
                        defaults: &defaults,
                        images: &images,
                        default_root: &default_root,
                        runtime,
                    };
                    Some(run_line(&pool, &line, i + 1, &ctx))
                }
                Err(e) => Some(bad_line(i + 1, &format!("cannot read the line: {e}"))),
            };
            if tx.send((i, result)).is_err() {
                break;
            }
        }));
    }
    drop(tx);
    let mut pending = BTreeMap::new();
    let mut next = 0usize;
    let mut out = std::io::stdout().lock();
    let mut code = 0;
    'results: for (i, result) in rx {
        pending.insert(i, result);
        while let Some(r) = pending.remove(&next) {
            next += 1;
            let Some(r) = r else { continue };
            if let Err(e) = writeln!(out, "{r}").and_then(|_| out.flush()) {
                // Nobody is listening (a closed pipe, a full disk): the results are lost. The
                // workers stop at their next result (the channel is gone) and the pool is
                // dropped on the way out: exiting here left gVisor spares half-made.
                code = crate::exit::stdout_failed(&e, || {
                    format!("corral run: cannot write to standard output: {e}")
                });
                break 'results;
            }
        }
    }
    for w in workers {
        let _ = w.join();
    }
    code
}

/// What every line of one batch shares.
struct LineContext<'a> {
    base: &'a Path,
    defaults: &'a corral_sandbox::Limits,
    images: &'a Images,
    default_root: &'a Root,
    /// The runtime of lines that do not name one (`--runtime`).
    runtime: Runtime,
}

fn run_line(pool: &Arc<Pool>, line: &str, number: usize, ctx: &LineContext<'_>) -> String {
    // A struct only from an object, as the HTTP API reads one (serde would take an array).
    let mut parsed: RunSpecJson =
        match corral_server::http::objects_only::from_slice_naming_field(line.as_bytes()) {
            Ok(p) => p,
            Err(e) => return bad_line(number, &e),
        };
    let image = parsed.image.clone();
    parsed.runtime.get_or_insert(ctx.runtime);
    let mut spec = match parsed.into_spec(ctx.base, ctx.defaults) {
        Ok(s) => s,
        Err(e) => return bad_line(number, &e.to_string()),
    };
    // As `corral run --dir` says it: the line's folder cannot fit its working directory.
    if let Some(dir) = &spec.dir {
        if let Err(e) = crate::dir_size::DirTooBig::check(dir, spec.limits.disk) {
            let why = e.describe(spec.limits.disk, "limits.disk");
            return bad_line(number, &format!("dir: {why}; ask a larger limits.disk"));
        }
    }
    spec.root = match image.map(|r| ctx.images.root(&r)).transpose() {
        Ok(Some(root)) => root,
        Ok(None) => ctx.default_root.clone(),
        Err(e) => return bad_line(number, &e),
    };
    let outcome = pool.run(&spec, &mut corral_sandbox::NoSink);
    crate::image_choice::result_json(&outcome, &spec).to_string()
}

/// The result line of an input line that is not a valid run spec: the batch goes on.
fn bad_line(number: usize, error: &str) -> String {
    serde_json::json!({"status": "invalid_spec", "line": number, "error": format!("line {number}: {error}")}).to_string()
}
