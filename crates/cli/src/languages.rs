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
}

pub fn main(args: LanguagesArgs) -> i32 {
    let registry = match crate::check::registry(args.languages.as_deref()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("corral languages: {e:#}");
            return crate::run::USAGE_EXIT;
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
    let statuses = registry.probe(pool.as_ref());
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&statuses).expect("serializable")
        );
    } else {
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
            println!("{:<12} {:<22} {:<12} {}", s.id, s.name, state, detail);
        }
        if let Some(n) = note {
            eprintln!("corral languages: {n}");
        }
    }
    0
}
