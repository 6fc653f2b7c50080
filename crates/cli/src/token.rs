//! `corral token create --data DIR --role ROLE`: a new API token, printed on stdout.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

use crate::errors::OrUsage;
use clap::{Args, Subcommand};
use corral_server::Config;
use corral_store::{Role, Store};

#[derive(Args, Debug)]
pub struct TokenArgs {
    #[command(subcommand)]
    command: TokenCommand,
}

#[derive(Subcommand, Debug)]
enum TokenCommand {
    /// Create a token and print it (it is stored only as a hash: keep it).
    Create(CreateArgs),
    /// Revoke a token by its public id.
    Revoke(RevokeArgs),
}

#[derive(Args, Debug)]
struct StoreArgs {
    /// A TOML configuration file (for data_dir / database_url).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The server's data folder, with the store its first start made [default: CORRAL_DATA, else ./corral-data].
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Database URL: sqlite://PATH or postgres://USER@HOST/DB [default: sqlite://DATA/corral.db].
    #[arg(long, visible_alias = "database", value_name = "URL")]
    database_url: Option<String>,
}

#[derive(Args, Debug)]
struct CreateArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// admin (tokens, suites), staff (suites, hidden results), student (upload, run, check, submit)
    /// or worker (a remote `corral worker`: claim submissions and post their results, nothing else).
    #[arg(long, value_name = "ROLE")]
    role: Role,
    /// A label for people: who holds it.
    #[arg(long, default_value = "")]
    name: String,
}

#[derive(Args, Debug)]
struct RevokeArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// The token's public id.
    id: String,
}

pub fn main(args: TokenArgs) -> i32 {
    crate::errors::report("token", run(args))
}

async fn open(s: &StoreArgs) -> anyhow::Result<Arc<dyn Store>> {
    // A --config file or CORRAL_* variable that cannot be read is the caller's to fix.
    let mut c = Config::load(s.config.as_deref()).usage()?;
    if let Some(d) = &s.data {
        c.data_dir = d.clone();
    }
    if let Some(u) = &s.database_url {
        c.database_url = Some(u.clone());
    }
    // Tokens belong to a server's store: one that is not there yet is not made here, where
    // no server would read it (a token would be printed that works nowhere).
    if let Some(db) = crate::data_folder::sqlite_file(&c.database_url()) {
        crate::data_folder::require_store(&db, &c.data_dir)?;
    }
    crate::data_folder::prepare(&c.data_dir)?;
    corral_store::open(&c.database_url(), &c.blobs_dir())
        .await
        .with_context(|| {
            format!(
                "opening the store {}",
                corral_store::shown_url(&c.database_url())
            )
        })
}

fn run(args: TokenArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        match args.command {
            TokenCommand::Create(a) => {
                let store = open(&a.store).await?;
                let t = store.create_token(a.role, &a.name).await?;
                store.close().await;
                eprintln!("corral token: created {} token {}", t.info.role, t.info.id);
                println!("{}", t.secret);
            }
            TokenCommand::Revoke(a) => {
                let store = open(&a.store).await?;
                let found = store.revoke_token(&a.id).await?;
                store.close().await;
                if !found {
                    return Err(crate::errors::usage(format!(
                        "no live token with id {} (the id `corral token create` said: \
                         \"created ROLE token ID\")",
                        a.id
                    )));
                }
                eprintln!("corral token: revoked {}", a.id);
            }
        }
        Ok(())
    })
}
