//! Parsers for cgroupfs's text formats (numbers, `key value` files, pid lists, controller
//! lists). No I/O: the callers read the files and name them in errors.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::Error;

/// Parses a single unsigned integer file (e.g. `cpuacct.usage`, `memory.peak`).
pub(crate) fn parse_u64(path: &Path, text: &str) -> Result<u64, Error> {
    let t = text.trim();
    t.parse::<u64>().map_err(|_| Error::Parse {
        path: path.to_owned(),
        reason: format!("expected an unsigned integer, got {t:?}"),
    })
}

/// A "flat keyed" file (`key value` per line: memory.events, pids.events, cpu.stat,
/// memory.oom_control). Values are kept as text and parsed on lookup, so an unexpected new line
/// in some future kernel cannot break reading the keys we do understand.
pub(crate) struct KeyedFile<'a> {
    path: &'a Path,
    entries: BTreeMap<&'a str, &'a str>,
}

impl<'a> KeyedFile<'a> {
    pub(crate) fn parse(path: &'a Path, text: &'a str) -> Result<Self, Error> {
        let mut entries = BTreeMap::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let mut it = line.split_whitespace();
            match (it.next(), it.next(), it.next()) {
                (Some(k), Some(v), None) => {
                    entries.insert(k, v);
                }
                _ => {
                    return Err(Error::Parse {
                        path: path.to_owned(),
                        reason: format!("expected `key value`, got {line:?}"),
                    })
                }
            }
        }
        Ok(KeyedFile { path, entries })
    }

    /// The value of `key` as u64; `None` if the key is absent (older kernels lack some keys).
    pub(crate) fn get(&self, key: &str) -> Result<Option<u64>, Error> {
        match self.entries.get(key) {
            None => Ok(None),
            Some(v) => v.parse::<u64>().map(Some).map_err(|_| Error::Parse {
                path: self.path.to_owned(),
                reason: format!("value of {key:?} is not an unsigned integer: {v:?}"),
            }),
        }
    }

    /// Like [`get`](Self::get) with absent keys read as 0.
    pub(crate) fn get_or_zero(&self, key: &str) -> Result<u64, Error> {
        Ok(self.get(key)?.unwrap_or(0))
    }
}

/// Parses `cgroup.procs` content: one pid per line.
pub(crate) fn parse_pids(path: &Path, text: &str) -> Result<Vec<i32>, Error> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| match l.parse::<i32>() {
            // Never let 0 or a negative number through: kill(0)/kill(-1) would hit our own
            // process group or every process we may signal.
            Ok(pid) if pid > 0 => Ok(pid),
            _ => Err(Error::Parse {
                path: path.to_owned(),
                reason: format!("bad pid {l:?}"),
            }),
        })
        .collect()
}

/// Splits a space-separated controller list (`cgroup.controllers`, `cgroup.subtree_control`).
/// A leading '+' is tolerated so a fake tree holding what we wrote reads back the same.
pub(crate) fn controller_list(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|c| c.trim_start_matches('+').to_owned())
        .collect()
}
