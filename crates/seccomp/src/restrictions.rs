//! Stricter layers on top of the default profile, named per language, suite, check or run.
//!
//! Written as a profile name: `default`, `no_spawn`, `no_sockets`, `allow:NAME,NAME,…`, or
//! several joined by `+` (`no_spawn+no_sockets`). Every layer only denies more: the default
//! profile's own rules stay in force underneath.
//!
//! Configuration (a language, a suite, a check) may also hold [grants](crate::grants), written
//! as a mapping: `{profile: no_spawn, grant: [list_interfaces]}` (`profile` optional). A name
//! never holds one, so what a run request sends can only deny more.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use crate::grants::{Grant, Grants};

/// What a stricter profile denies on top of the default one, and the narrow grants its
/// configuration gives. The default value denies nothing more and grants nothing.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Restrictions {
    /// `no_spawn`: once the run's program has been exec'd, no new process or program: `fork`,
    /// `vfork`, `clone` without `CLONE_THREAD`, `execve` and `execveat` are killed and reported
    /// (`clone3` already fails with `ENOSYS`, so runtimes fall back to `clone`). Threads still
    /// work. The program's own exec is let through by the sandbox's PID 1, which answers the
    /// notifications of the program's process until its exec has happened (see the sandbox's
    /// `inside::pid1`).
    pub no_spawn: bool,
    /// `no_sockets`: `socket` and `socketpair` of every family are killed and reported.
    pub no_sockets: bool,
    /// `allow:…`: allow-list mode. Only these syscalls, [`STARTUP`] (what loading and ending a
    /// program needs) and those the default profile answers with a quiet errno are allowed; any
    /// other syscall, known to libseccomp or not, is killed and reported.
    pub allow: Option<BTreeSet<String>>,
    /// Grants (see [`crate::grants`]): from configuration only, never from a profile's name.
    /// Every layer above still applies on top of them.
    pub grants: Grants,
}

/// What every program needs to be loaded (the dynamic loader, libc's start-up), to end, and what
/// the sandbox itself calls between installing the filter and `execve` (sending the listener,
/// closing descriptors): allowed in allow-list mode whatever the list says.
pub const STARTUP: &[&str] = &[
    // The sandbox's own last steps before exec.
    "sendmsg",
    "close_range",
    "close",
    // Loading: ld.so and libc's initialisation.
    "brk",
    "arch_prctl",
    "mmap",
    "munmap",
    "mprotect",
    "openat",
    "open",
    "read",
    "pread64",
    "fstat",
    "newfstatat",
    "stat",
    "access",
    "faccessat",
    "faccessat2",
    "readlink",
    "readlinkat",
    "set_tid_address",
    "set_robust_list",
    "rseq",
    "prlimit64",
    "getrandom",
    "rt_sigaction",
    "rt_sigprocmask",
    "rt_sigreturn",
    "sigaltstack",
    // Writing the output, ending.
    "write",
    "writev",
    "exit",
    "exit_group",
];

/// A profile name that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestrictionsError {
    #[error("unknown seccomp profile {0:?}: use default, no_spawn, no_sockets or allow:NAME,NAME,… (several joined by '+')")]
    UnknownLayer(String),
    #[error("seccomp profile {0:?}: `allow:` needs at least one syscall name")]
    EmptyAllowList(String),
    #[error("seccomp profile: {0:?} is not a syscall on this architecture")]
    UnknownSyscall(String),
    #[error("seccomp profile {0:?}: `allow:` may appear once")]
    TwoAllowLists(String),
    #[error("seccomp profile {0:?}: {1} is a grant, which only a language, suite or check can give (seccomp: {{grant: [{1}]}}); a run's profile can only deny more")]
    GrantInName(String, String),
}

impl Restrictions {
    /// Nothing beyond the default profile.
    pub fn is_default(&self) -> bool {
        *self == Restrictions::default()
    }

    /// `no_spawn`.
    pub fn no_spawn() -> Self {
        Restrictions {
            no_spawn: true,
            ..Default::default()
        }
    }

    /// `no_sockets`.
    pub fn no_sockets() -> Self {
        Restrictions {
            no_sockets: true,
            ..Default::default()
        }
    }

    /// What both deny: every layer of either, and only the syscalls both allow-lists name. A
    /// request adding its profile to a language's can only make it stricter this way.
    pub fn and(&self, other: &Restrictions) -> Restrictions {
        let allow = match (&self.allow, &other.allow) {
            (Some(a), Some(b)) => Some(a.intersection(b).cloned().collect()),
            (a, b) => a.clone().or_else(|| b.clone()),
        };
        Restrictions {
            no_spawn: self.no_spawn || other.no_spawn,
            no_sockets: self.no_sockets || other.no_sockets,
            allow,
            // A grant comes from configuration (a request's name holds none), and what either
            // side denies still applies on top of it.
            grants: self.grants.union(&other.grants).copied().collect(),
        }
    }

    /// These layers with `grants` added.
    pub fn granting(mut self, grants: impl IntoIterator<Item = Grant>) -> Self {
        self.grants.extend(grants);
        self
    }

    /// The layers alone, as a name (what `Display` shows before any grants).
    fn name(&self) -> String {
        let mut parts = Vec::new();
        if self.no_spawn {
            parts.push("no_spawn".to_string());
        }
        if self.no_sockets {
            parts.push("no_sockets".to_string());
        }
        if let Some(allow) = &self.allow {
            parts.push(format!(
                "allow:{}",
                allow.iter().cloned().collect::<Vec<_>>().join(",")
            ));
        }
        if parts.is_empty() {
            "default".to_string()
        } else {
            parts.join("+")
        }
    }
}

impl FromStr for Restrictions {
    type Err = RestrictionsError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut r = Restrictions::default();
        for part in s.split('+').map(str::trim) {
            match part {
                "default" => {}
                "no_spawn" => r.no_spawn = true,
                "no_sockets" => r.no_sockets = true,
                _ if part.parse::<Grant>().is_ok() || part.starts_with("grant:") => {
                    let grant = part.trim_start_matches("grant:").to_string();
                    return Err(RestrictionsError::GrantInName(s.to_string(), grant));
                }
                _ => {
                    let Some(list) = part.strip_prefix("allow:") else {
                        return Err(RestrictionsError::UnknownLayer(part.to_string()));
                    };
                    if r.allow.is_some() {
                        return Err(RestrictionsError::TwoAllowLists(s.to_string()));
                    }
                    let names: BTreeSet<String> = list
                        .split(',')
                        .map(str::trim)
                        .filter(|n| !n.is_empty())
                        .map(str::to_string)
                        .collect();
                    if names.is_empty() {
                        return Err(RestrictionsError::EmptyAllowList(s.to_string()));
                    }
                    for n in &names {
                        if crate::syscalls::resolve_owned(n).is_none() {
                            return Err(RestrictionsError::UnknownSyscall(n.clone()));
                        }
                    }
                    r.allow = Some(names);
                }
            }
        }
        Ok(r)
    }
}

impl fmt::Display for Restrictions {
    /// The name, then any grants: `no_spawn (grant: list_interfaces)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())?;
        if !self.grants.is_empty() {
            let grants: Vec<&str> = self.grants.iter().map(|g| g.name()).collect();
            write!(f, " (grant: {})", grants.join(", "))?;
        }
        Ok(())
    }
}

/// Written as its name (`"no_spawn+no_sockets"`), or with grants as a mapping
/// (`{"profile": "no_spawn", "grant": ["list_interfaces"]}`).
impl serde::Serialize for Restrictions {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        if self.grants.is_empty() {
            return s.collect_str(self);
        }
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("profile", &self.name())?;
        m.serialize_entry("grant", &self.grants)?;
        m.end()
    }
}

/// Read from a name (`"no_spawn+no_sockets"`), a list of layers (`["no_spawn", "no_sockets"]`),
/// or a mapping with grants: `{profile: NAME or LIST (optional), grant: [GRANT, …]}`.
impl<'de> serde::Deserialize<'de> for Restrictions {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Visitor)
    }
}

/// Hand-written rather than an untagged enum, so a bad key or grant gets its own message.
struct Visitor;

fn from_layers<E: serde::de::Error>(layers: Vec<String>) -> Result<Restrictions, E> {
    let name = if layers.is_empty() {
        "default".to_string()
    } else {
        layers.join("+")
    };
    name.parse().map_err(E::custom)
}

/// A `profile:` value: a name or a list of layers.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Layers {
    Name(String),
    List(Vec<String>),
}

impl<'de> serde::de::Visitor<'de> for Visitor {
    type Value = Restrictions;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a seccomp profile name (no_spawn+no_sockets), a list of layers, or {profile: NAME, grant: [list_interfaces]}")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Restrictions, E> {
        v.parse().map_err(E::custom)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Restrictions, A::Error> {
        let mut layers = Vec::new();
        while let Some(l) = seq.next_element::<String>()? {
            layers.push(l);
        }
        from_layers(layers)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Restrictions, A::Error> {
        use serde::de::Error;
        let mut layers: Option<Vec<String>> = None;
        let mut grants: Option<Vec<Grant>> = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "profile" if layers.is_none() => {
                    layers = Some(match map.next_value::<Layers>()? {
                        Layers::Name(n) => vec![n],
                        Layers::List(l) => l,
                    })
                }
                "grant" if grants.is_none() => grants = Some(map.next_value()?),
                "profile" | "grant" => return Err(A::Error::duplicate_field("profile or grant")),
                other => return Err(A::Error::unknown_field(other, &["profile", "grant"])),
            }
        }
        let r: Restrictions = from_layers(layers.unwrap_or_default())?;
        Ok(r.granting(grants.unwrap_or_default()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn and_denies_what_either_denies() {
        let p = |s: &str| s.parse::<Restrictions>().unwrap();
        assert_eq!(
            p("no_spawn").and(&p("no_sockets")),
            p("no_spawn+no_sockets")
        );
        assert_eq!(p("default").and(&p("no_spawn")), p("no_spawn"));
        assert_eq!(
            p("allow:read,write,openat").and(&p("allow:write,openat,close+no_spawn")),
            p("allow:write,openat+no_spawn")
        );
        assert_eq!(
            p("allow:read").and(&p("no_sockets")),
            p("allow:read+no_sockets")
        );
    }

    #[test]
    fn names_round_trip() {
        for s in [
            "default",
            "no_spawn",
            "no_sockets",
            "no_spawn+no_sockets",
            "allow:exit_group,read,write",
            "no_spawn+allow:read",
        ] {
            let r: Restrictions = s.parse().unwrap();
            assert_eq!(r.to_string(), s);
        }
        assert!("default".parse::<Restrictions>().unwrap().is_default());
        assert_eq!(
            "no_sockets + no_spawn".parse::<Restrictions>().unwrap(),
            Restrictions {
                no_spawn: true,
                no_sockets: true,
                ..Default::default()
            }
        );
    }

    #[test]
    fn serde_takes_a_name_or_a_list() {
        let r: Restrictions = serde_json::from_str(r#""no_spawn+no_sockets""#).unwrap();
        let l: Restrictions = serde_json::from_str(r#"["no_spawn", "no_sockets"]"#).unwrap();
        assert_eq!(r, l);
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#""no_spawn+no_sockets""#
        );
        let e = serde_json::from_str::<Restrictions>(r#""nope""#).unwrap_err();
        assert!(e.to_string().contains("unknown seccomp profile"), "{e}");
    }

    #[test]
    fn bad_names_are_errors() {
        assert!(matches!(
            "nospawn".parse::<Restrictions>(),
            Err(RestrictionsError::UnknownLayer(_))
        ));
        assert!(matches!(
            "allow:".parse::<Restrictions>(),
            Err(RestrictionsError::EmptyAllowList(_))
        ));
        assert!(matches!(
            "allow:read,not_a_syscall".parse::<Restrictions>(),
            Err(RestrictionsError::UnknownSyscall(n)) if n == "not_a_syscall"
        ));
        assert!(matches!(
            "allow:read+allow:write".parse::<Restrictions>(),
            Err(RestrictionsError::TwoAllowLists(_))
        ));
    }
}
