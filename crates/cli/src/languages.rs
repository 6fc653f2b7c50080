//! `corral languages`: the language registry and what this host can run.

use std::sync::Arc;

use clap::Args;
use corral_sandbox::{Host, InitProgram, Pool, PoolConfig};

#[derive(Args, Debug)]
pub struct LanguagesArgs {
    /// Print a JSON array instead of a table.
    #[arg(long)]
    json: bool,
    /// An operator's language registry file (TOML) added to the built-in one (or $CORRAL_LANGUAGES).
    #[arg(long, value_name = "FILE")]
    languages: Option<std::path::PathBuf>,
    /// Where the image store of languages that run in an image is.
    #[command(flatten)]
    data: crate::check::DataFolderArgs,
}

pub fn main(args: LanguagesArgs) -> i32 {
    let registry = match crate::check::registry(args.languages.as_deref()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("corral languages: {}", crate::errors::chain(&e));
            return crate::exit::USAGE;
        }
    };
    let images = match args.data.image_store() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("corral languages: {}", crate::errors::chain(&e));
            return crate::exit::USAGE;
        }
    };
    // Versions are read inside a sandbox; without one, only the host-side checks are made.
    let (pool, note) = match InitProgram::current_exe().and_then(Host::new) {
        Ok(h) => (
            Some(Pool::new(
                Arc::new(h),
                PoolConfig {
                    max_idle: 0,
                    ..Default::default()
                },
            )),
            None,
        ),
        Err(e) => (None, Some(format!("versions not read: {e}"))),
    };
    let statuses = registry.probe(pool.as_ref(), images.as_ref());
    let exposures: Vec<_> = registry.iter().map(|l| l.exposure()).collect();
    if args.json {
        let list: Vec<serde_json::Value> = statuses
            .iter()
            .zip(&exposures)
            .map(|(s, e)| {
                let mut v = serde_json::to_value(s).expect("serializable");
                v["exposes"] = serde_json::to_value(e).expect("serializable");
                v
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&list).expect("serializable")
        );
    } else {
        println!(
            "{:<12} {:<22} {:<12} {:<20} version, or why unavailable",
            "id", "name", "state", "seccomp profile"
        );
        for s in &statuses {
            let state = if s.available {
                "available"
            } else {
                "unavailable"
            };
            let detail = s
                .version
                .clone()
                .or_else(|| s.reason.clone())
                .unwrap_or_default();
            println!(
                "{:<12} {:<22} {:<12} {:<20} {}",
                s.id, s.name, state, s.seccomp, detail
            );
            if let Some(image) = &s.image {
                let digest = image.digest.as_deref().unwrap_or("not in the image store");
                println!("{:<12}   in image {} ({digest})", "", image.name);
            }
        }
        print_exposures(registry.iter().map(|l| l.id.as_str()).zip(&exposures));
        if let Some(n) = note {
            eprintln!("corral languages: {n}");
        }
    }
    0
}

/// What each language shows its programs of the host beyond the base system, with warnings.
pub fn print_exposures<'a>(
    list: impl Iterator<Item = (&'a str, &'a Vec<corral_checks::Exposure>)>,
) {
    let mut header = false;
    for (id, exposures) in list {
        for e in exposures {
            if !header {
                println!("\nhost paths visible to programs (read-only), beyond /usr, /bin, /lib:");
                header = true;
            }
            println!("  {id:<12} {}", e.path);
            for w in &e.warnings {
                println!("  {:<12}   warning: {w}", "");
            }
        }
    }
}

/// The seccomp profile of each language's program runs (compiles run under the default one).
pub fn print_seccomp_profiles<'a>(list: impl Iterator<Item = &'a corral_checks::Language>) {
    println!("\nseccomp profile of each language's program runs (on top of the default profile):");
    for l in list {
        println!("  {:<12} {}", l.id, l.seccomp);
    }
}
