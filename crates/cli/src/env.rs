//! `corral env …`: container images (environments) in the data folder's image store — pull from a
//! registry, import an archive or root filesystem, build from a build file (`env_build`), list,
//! inspect, tag, remove, collect garbage.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use corral_images::{ImageRecord, Store};

use crate::errors::OrUsage;

#[derive(Args, Debug)]
#[command(
    after_help = "A REF is a name (NAME[:TAG], `:latest` by default), NAME@sha256:…, a full digest \
    (sha256:…), or at least 12 hex digits of one.\n\nImages live in DATA/images (the data folder of \
    `corral serve`: --data, else data_dir in --config, else CORRAL_DATA, else ./corral-data)."
)]
pub struct EnvArgs {
    #[command(subcommand)]
    command: EnvCommand,
    /// Data folder holding the image store [default: as `corral serve`: ./corral-data].
    #[arg(long, value_name = "DIR", global = true)]
    data: Option<PathBuf>,
    /// The TOML configuration file of `corral serve`, for its data_dir.
    #[arg(long, value_name = "FILE", global = true)]
    config: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum EnvCommand {
    /// Pull an image from an OCI registry: HOST[:PORT]/REPO[:TAG] or HOST[:PORT]/REPO@sha256:….
    #[command(
        after_help = "Credentials are never given on the command line: CORRAL_REGISTRY_USER and \
        CORRAL_REGISTRY_PASSWORD for the one registry CORRAL_REGISTRY_HOST names (HOST[:PORT] as in \
        REF; without it they are sent to no registry), else the registry's entry in a Docker \
        config.json-format file \
        (--auth-file, else CORRAL_REGISTRY_AUTH, else ~/.docker/config.json). A pull that was cut off \
        continues where it stopped when run again."
    )]
    Pull {
        /// The image to pull.
        #[arg(value_name = "REF")]
        reference: String,
        /// Allow plain HTTP to this registry (registries listed in the --config file's [images] insecure_registries or in CORRAL_INSECURE_REGISTRIES always are).
        #[arg(long)]
        insecure: bool,
        /// A Docker config.json-format credentials file.
        #[arg(long, value_name = "FILE")]
        auth_file: Option<PathBuf>,
    },
    /// Import an OCI image layout (folder or tar), a docker-archive tar, or a root-filesystem tar.
    #[command(
        after_help = "A gzip or zstd file, or a tar without a top-level index.json or manifest.json, \
        is a root filesystem (what mmdebstrap or debootstrap write) and becomes a one-layer image."
    )]
    Import {
        /// The folder or file to import.
        path: PathBuf,
        /// Name for the image, replacing what it named before [default: the name recorded in the archive, if any, unless that names another image already: then the import is refused].
        #[arg(long)]
        name: Option<String>,
    },
    /// Build an image from a build file: a base (`from`) and steps (run, copy, env, workdir).
    #[command(
        after_help = "Each `run` step runs in a build sandbox (the same isolation as every run; root \
        in a user namespace of its own, with network) over the image so far, and what it changes \
        becomes a layer. Steps are cached: an unchanged step (same parent, same text, for `copy` \
        the same content) is not run again. The image is named only when every step succeeded."
    )]
    Build(crate::env_build::BuildArgs),
    /// List images: names, digest, size, created.
    Ls {
        /// One JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show everything the store knows about an image, as JSON.
    Inspect {
        /// The image to show.
        #[arg(value_name = "REF")]
        reference: String,
    },
    /// Give an image another name.
    Tag {
        /// The image to name.
        #[arg(value_name = "REF")]
        reference: String,
        /// The new name (NAME[:TAG]).
        name: String,
    },
    /// Remove a name (the image goes with its last name), or an image by digest with all its names.
    Rm {
        /// What to remove, each a name (that name goes; the image with its last one) or a
        /// digest (the image and all its names).
        #[arg(value_name = "REF", required = true)]
        references: Vec<String>,
    },
    /// Delete layers and blobs no image uses any more. Those of a removed image that a live
    /// sandbox (a run, a server's kept or pooled sandbox, a worker's) still uses are kept until a
    /// gc after it ends (see the README's "Environments").
    Gc,
    /// Report the disk space images, blobs and unpacked layers use.
    Du {
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub fn main(args: EnvArgs) -> i32 {
    crate::errors::report("env", run(args))
}

/// The data folder as `corral serve` finds it: `--data`, else `data_dir` in `--config`, else
/// `CORRAL_DATA`, else `./corral-data`. Shared with `corral run --image`.
pub fn data_dir(
    data: Option<&std::path::Path>,
    config: Option<&std::path::Path>,
) -> anyhow::Result<PathBuf> {
    if let Some(d) = data {
        return Ok(d.to_path_buf());
    }
    // A --config file or CORRAL_* variable that cannot be read is the caller's to fix.
    Ok(corral_server::Config::load(config).usage()?.data_dir)
}

/// An image store's error, marked as a usage error when it is about what the command line
/// names (a reference or name that is malformed, unknown or ambiguous, a name another image
/// has, a file to import that is not there or is no image, a credentials file that cannot be
/// read) rather than about the work (a registry, the network, the disk, a damaged store or
/// archive): as `corral run --image` with an unknown image, those exit 2.
pub fn image_error(e: corral_images::Error, named: Option<&std::path::Path>) -> anyhow::Error {
    use corral_images::Error as E;
    let callers = match &e {
        E::BadReference(_)
        | E::BadDigest(_)
        | E::NotFound(_)
        | E::Ambiguous { .. }
        | E::NameTaken { .. }
        | E::UnknownImport { .. }
        | E::Credentials(_) => true,
        E::Io { path, source } => {
            source.kind() == std::io::ErrorKind::NotFound && named == Some(path.as_path())
        }
        _ => false,
    };
    if callers {
        crate::errors::usage(e)
    } else {
        e.into()
    }
}

fn run(args: EnvArgs) -> anyhow::Result<()> {
    let data = data_dir(args.data.as_deref(), args.config.as_deref())?;
    // Only pull, import and build make a store: a command that reads one (or removes from it)
    // leaves a folder that has none as it is.
    let adds = matches!(
        args.command,
        EnvCommand::Pull { .. } | EnvCommand::Import { .. } | EnvCommand::Build(_)
    );
    if !adds && !data.join("images").is_dir() {
        return no_store(&args.command, &data);
    }
    crate::data_folder::prepare(&data)?;
    let store = Store::open(&data)
        .with_context(|| format!("opening the image store in {}", data.display()))?;
    match args.command {
        EnvCommand::Pull {
            reference,
            insecure,
            auth_file,
        } => {
            // One line per blob on a terminal; nothing in scripts and logs.
            let progress: Option<corral_images::Progress> =
                if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                    Some(std::sync::Arc::new(|line: &str| eprintln!("{line}")))
                } else {
                    None
                };
            // The server configuration's insecure registries, when there is one to read.
            let insecure_registries = corral_server::Config::load(args.config.as_deref())
                .usage()?
                .images
                .insecure_registries;
            let opts = corral_images::PullOptions {
                insecure,
                insecure_registries,
                auth_file,
                progress,
                stall: None,
            };
            let r = corral_images::pull(&store, &reference, &opts)
                .map_err(|e| image_error(e, None))
                .with_context(|| format!("pulling {reference}"))?;
            println!("{} {}", r.digest, reference);
        }
        EnvCommand::Import { path, name } => {
            let r = corral_images::import(&store, &path, name.as_deref())
                .map_err(|e| image_error(e, Some(&path)))
                .with_context(|| format!("importing {}", path.display()))?;
            let names = store.names_of(&r.digest)?;
            println!("{}", crate::env_build::digest_line(&r.digest, &names));
        }
        EnvCommand::Build(args) => crate::env_build::run(&store, args)?,
        EnvCommand::Ls { json } => {
            let list = store.list()?;
            if json {
                let v: Vec<_> = list
                    .iter()
                    .map(|l| {
                        serde_json::json!({"names": l.names, "digest": l.record.digest.to_string(), "size": l.record.size,
                                           "created": l.record.created, "platform": l.record.platform})
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                println!("{:<40} {:<19} {:>10}  CREATED", "NAME", "DIGEST", "SIZE");
                for l in &list {
                    let names = if l.names.is_empty() {
                        vec!["<none>".to_string()]
                    } else {
                        l.names.clone()
                    };
                    for n in names {
                        println!(
                            "{:<40} {:<19} {:>10}  {}",
                            n,
                            short(&l.record),
                            human(l.record.size),
                            l.record.created.as_deref().unwrap_or("-")
                        );
                    }
                }
            }
        }
        EnvCommand::Inspect { reference } => {
            let (_, r) = store
                .resolve(&reference)
                .map_err(|e| image_error(e, None))?;
            let names = store.names_of(&r.digest)?;
            let mut v = serde_json::to_value(&r)?;
            v["names"] = serde_json::json!(names);
            v["layer_dirs"] = serde_json::json!(r
                .layers
                .iter()
                .map(|l| store.layer_path(&l.diff_id))
                .collect::<Vec<_>>());
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        EnvCommand::Tag { reference, name } => {
            let (name, digest) = store
                .tag(&reference, &name)
                .map_err(|e| image_error(e, None))?;
            println!("{name} -> {digest}");
        }
        EnvCommand::Rm { references } => {
            for reference in references {
                let (names, gone) = store.remove(&reference).map_err(|e| image_error(e, None))?;
                for n in names {
                    println!("untagged {n}");
                }
                if let Some(d) = gone {
                    println!("removed {d} (run `corral env gc` to free its space)");
                }
            }
        }
        EnvCommand::Gc => {
            let r = store.gc()?;
            println!(
                "removed {} layers, {} blobs and {} build-cache entries, freed {}",
                r.layers_removed,
                r.blobs_removed,
                r.cache_entries_removed,
                human(r.bytes_freed)
            );
            if r.layers_in_use + r.blobs_in_use > 0 {
                println!(
                    "kept {} layers and {} blobs of removed images that live sandboxes still use (a gc after they end removes them)",
                    r.layers_in_use, r.blobs_in_use
                );
            }
        }
        EnvCommand::Du { json } => {
            let du = store.disk_usage()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&du)?);
            } else {
                println!("images: {}", du.images);
                println!("blobs:  {} ({})", du.blobs, human(du.blob_bytes));
                println!(
                    "layers: {} ({}, unpacked)",
                    du.layers,
                    human(du.layer_bytes)
                );
                println!("temp:   {}", human(du.tmp_bytes));
                println!(
                    "total:  {}",
                    human(du.blob_bytes + du.layer_bytes + du.tmp_bytes)
                );
            }
        }
    }
    Ok(())
}

/// A reading command where the data folder has no image store yet: an empty list, nothing to
/// collect, or an error naming the folder.
fn no_store(command: &EnvCommand, data: &std::path::Path) -> anyhow::Result<()> {
    let none = format!(
        "no image store in {} (nothing was pulled, imported or built there; --data or --config \
         name another data folder)",
        data.display()
    );
    match command {
        EnvCommand::Ls { json: true } => println!("[]"),
        EnvCommand::Ls { json: false } => {
            println!("{:<40} {:<19} {:>10}  CREATED", "NAME", "DIGEST", "SIZE");
            eprintln!("corral env: {none}");
        }
        EnvCommand::Gc | EnvCommand::Du { .. } => println!("{none}"),
        _ => return Err(crate::errors::usage(none)),
    }
    Ok(())
}

fn short(r: &ImageRecord) -> String {
    format!("sha256:{}", &r.digest.hex()[..12])
}

fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}
