//! Resource limits: one type for the CLI flags, the `--batch` JSON, the HTTP API and the reported result.
//!
//! Durations are written like `100ms`, `2s`, `1m` (a bare number means seconds); sizes like `512K`,
//! `64M`, `1G` (binary multiples; a bare number means bytes). The same strings come back in results.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::error::SpecError;

/// A size in bytes that serializes as a human string (`64M`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Size(pub u64);

/// A duration that serializes as a human string (`1s`, `100ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Millis(pub Duration);

impl Size {
    pub const fn mib(n: u64) -> Self {
        Size(n * 1024 * 1024)
    }
    pub fn bytes(self) -> u64 {
        self.0
    }
}

impl Millis {
    pub const fn ms(n: u64) -> Self {
        Millis(Duration::from_millis(n))
    }
    pub fn duration(self) -> Duration {
        self.0
    }
}

impl std::str::FromStr for Size {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, SpecError> {
        let t = s.trim();
        if t.is_empty() {
            return Err(SpecError::BadSize(s.to_string()));
        }
        // parse-size reads "64M" as 64 * 10^6; sandboxes speak binary units, so ask for binary.
        let cfg = parse_size::Config::new().with_binary();
        cfg.parse_size(t)
            .map(Size)
            .map_err(|_| SpecError::BadSize(s.to_string()))
    }
}

impl std::str::FromStr for Millis {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, SpecError> {
        let t = s.trim();
        if let Ok(secs) = t.parse::<f64>() {
            if secs.is_finite() && (0.0..1e9).contains(&secs) {
                return Ok(Millis(Duration::from_secs_f64(secs)));
            }
            return Err(SpecError::BadDuration(s.to_string()));
        }
        humantime::parse_duration(t)
            .map(Millis)
            .map_err(|_| SpecError::BadDuration(s.to_string()))
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 4] = [
            (1 << 40, "T"),
            (1 << 30, "G"),
            (1 << 20, "M"),
            (1 << 10, "K"),
        ];
        for (mult, suffix) in UNITS {
            if self.0 >= mult && self.0.is_multiple_of(mult) {
                return write!(f, "{}{}", self.0 / mult, suffix);
            }
        }
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if ms >= 1000 && ms.is_multiple_of(1000) {
            write!(f, "{}s", ms / 1000)
        } else {
            write!(f, "{ms}ms")
        }
    }
}

macro_rules! string_serde {
    ($t:ty, $what:literal) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl Visitor<'_> for V {
                    type Value = $t;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($what)
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$t, E> {
                        v.parse().map_err(E::custom)
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$t, E> {
                        v.to_string().parse().map_err(E::custom)
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$t, E> {
                        if v < 0 {
                            return Err(E::custom(format!("{v} is negative")));
                        }
                        v.to_string().parse().map_err(E::custom)
                    }
                    fn visit_f64<E: de::Error>(self, v: f64) -> Result<$t, E> {
                        v.to_string().parse().map_err(E::custom)
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}
string_serde!(Size, "a size such as \"64M\" or a number of bytes");

/// A count (`pids`, `open_files`): serde's own error for one said `expected u64`.
mod whole {
    use super::*;

    struct Whole(u64);

    impl<'de> Deserialize<'de> for Whole {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl Visitor<'_> for V {
                type Value = Whole;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a whole number such as 64")
                }
                fn visit_u64<E: de::Error>(self, v: u64) -> Result<Whole, E> {
                    Ok(Whole(v))
                }
                fn visit_i64<E: de::Error>(self, v: i64) -> Result<Whole, E> {
                    u64::try_from(v)
                        .map(Whole)
                        .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
                }
            }
            // Not `deserialize_any`: a query string's "64" is still read as a number.
            d.deserialize_u64(V)
        }
    }

    pub fn number<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        Whole::deserialize(d).map(|w| w.0)
    }

    pub fn option<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        Option::<Whole>::deserialize(d).map(|w| w.map(|w| w.0))
    }
}
string_serde!(
    Millis,
    "a duration such as \"100ms\" or \"2s\", or a number of seconds"
);

/// Every limit a run is held to. Field names match the CLI flags and the HTTP API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// CPU time of the whole process tree.
    pub cpu_time: Millis,
    /// Wall-clock time from start to end.
    pub wall_time: Millis,
    /// Memory (RSS + page cache + kernel memory) of the whole tree; swap is disabled.
    pub memory: Size,
    /// Processes and threads alive at once.
    #[serde(deserialize_with = "whole::number")]
    pub pids: u64,
    /// Captured stdout + stderr; more ends the run with `output_limit`.
    pub output: Size,
    /// Size of the writable working directory (a tmpfs); `/tmp` and `/dev/shm` get the same cap.
    pub disk: Size,
    /// Open file descriptors per process (RLIMIT_NOFILE).
    #[serde(deserialize_with = "whole::number")]
    pub open_files: u64,
    /// Largest file a process may write (RLIMIT_FSIZE).
    pub file_size: Size,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            cpu_time: Millis::ms(5_000),
            wall_time: Millis::ms(10_000),
            memory: Size::mib(256),
            pids: 64,
            output: Size::mib(1),
            disk: Size::mib(64),
            open_files: 256,
            file_size: Size::mib(64),
        }
    }
}

/// A partial set of limits, as a request gives them; missing keys take the defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_time: Option<Millis>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_time: Option<Millis>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Size>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "whole::option"
    )]
    pub pids: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<Size>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "whole::option"
    )]
    pub open_files: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_size: Option<Size>,
}

impl LimitsRequest {
    /// Fills missing values from `defaults`, then checks each value is within sane bounds.
    pub fn resolve(&self, defaults: &Limits) -> Result<Limits, SpecError> {
        let l = Limits {
            cpu_time: self.cpu_time.unwrap_or(defaults.cpu_time),
            wall_time: self.wall_time.unwrap_or(defaults.wall_time),
            memory: self.memory.unwrap_or(defaults.memory),
            pids: self.pids.unwrap_or(defaults.pids),
            output: self.output.unwrap_or(defaults.output),
            disk: self.disk.unwrap_or(defaults.disk),
            open_files: self.open_files.unwrap_or(defaults.open_files),
            file_size: self.file_size.unwrap_or(defaults.file_size),
        };
        l.validate()?;
        Ok(l)
    }
}

impl Limits {
    /// Rejects values no sandbox can honour (zero time, a few bytes of memory, absurd counts).
    pub fn validate(&self) -> Result<(), SpecError> {
        let bad = |key: &'static str, why: &str| {
            Err(SpecError::BadLimit {
                key,
                why: why.to_string(),
            })
        };
        if self.cpu_time.0 < Duration::from_millis(1) {
            return bad("cpu_time", "must be at least 1ms");
        }
        if self.wall_time.0 < Duration::from_millis(1) {
            return bad("wall_time", "must be at least 1ms");
        }
        if self.cpu_time.0 > Duration::from_secs(86_400) {
            return bad("cpu_time", "must be at most 24h");
        }
        if self.wall_time.0 > Duration::from_secs(86_400) {
            return bad("wall_time", "must be at most 24h");
        }
        if self.memory.0 < 4 << 20 {
            return bad("memory", "must be at least 4M");
        }
        if self.pids == 0 || self.pids > 1 << 22 {
            return bad("pids", "must be between 1 and 4194304");
        }
        if self.disk.0 < 64 << 10 {
            return bad("disk", "must be at least 64K");
        }
        if self.open_files < 4 || self.open_files > 1 << 20 {
            return bad("open_files", "must be between 4 and 1048576");
        }
        if self.output.0 > 1 << 30 {
            return bad("output", "must be at most 1G");
        }
        Ok(())
    }

    /// Rejects an `open_files` above `host_max`, the hard limit every sandbox inherits
    /// ([`host_open_files_max`]): its init cannot raise it (setrlimit fails with EPERM and the
    /// sandbox is lost), so such a run is refused before one is built.
    pub fn check_open_files(&self, host_max: u64) -> Result<(), SpecError> {
        if self.open_files <= host_max {
            return Ok(());
        }
        Err(SpecError::BadLimit {
            key: "open_files",
            why: format!(
                "{} is above this host's hard limit on open files, {host_max} (corral's \
                 RLIMIT_NOFILE, which no sandbox may raise): ask for at most {host_max}, or raise \
                 the hard limit of the process that starts corral (`ulimit -Hn`, systemd's \
                 LimitNOFILE=)",
                self.open_files
            ),
        })
    }

    /// Each limit capped at `caps` (a request may ask for less, never more).
    pub fn clamp_to(&self, caps: &Limits) -> Limits {
        Limits {
            cpu_time: self.cpu_time.min(caps.cpu_time),
            wall_time: self.wall_time.min(caps.wall_time),
            memory: self.memory.min(caps.memory),
            pids: self.pids.min(caps.pids),
            output: self.output.min(caps.output),
            disk: self.disk.min(caps.disk),
            open_files: self.open_files.min(caps.open_files),
            file_size: self.file_size.min(caps.file_size),
        }
    }
}

/// The most open files a run can be given on this host: this process's hard `RLIMIT_NOFILE`,
/// which every sandbox inherits (the limits' own bound, 1048576, when it is higher or unknown).
pub fn host_open_files_max() -> u64 {
    const BOUND: u64 = 1 << 20;
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(BOUND, |(_, hard)| hard.min(BOUND))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_units() {
        assert_eq!("64M".parse::<Size>().unwrap(), Size(64 << 20));
        assert_eq!("512K".parse::<Size>().unwrap(), Size(512 << 10));
        assert_eq!("1000".parse::<Size>().unwrap(), Size(1000));
        assert_eq!(Size(64 << 20).to_string(), "64M");
        assert_eq!(Size(1000).to_string(), "1000");
        assert_eq!("100ms".parse::<Millis>().unwrap(), Millis::ms(100));
        assert_eq!("2s".parse::<Millis>().unwrap(), Millis::ms(2000));
        assert_eq!("1.5".parse::<Millis>().unwrap(), Millis::ms(1500));
        assert_eq!(Millis::ms(2000).to_string(), "2s");
        assert_eq!(Millis::ms(150).to_string(), "150ms");
        assert!("fast".parse::<Millis>().is_err());
        assert!("-1".parse::<Millis>().is_err());
        assert!("lots".parse::<Size>().is_err());
    }

    #[test]
    fn request_json_roundtrip() {
        let r: LimitsRequest = serde_json::from_str(
            r#"{"cpu_time":"1s","wall_time":"100ms","memory":"64M","pids":16,"output":"1M"}"#,
        )
        .unwrap();
        let l = r.resolve(&Limits::default()).unwrap();
        assert_eq!(l.cpu_time, Millis::ms(1000));
        assert_eq!(l.memory, Size::mib(64));
        let back = serde_json::to_value(&l).unwrap();
        assert_eq!(back["wall_time"], "100ms");
        assert_eq!(back["memory"], "64M");
        assert_eq!(back["pids"], 16);
        assert!(serde_json::from_str::<LimitsRequest>(r#"{"cpu":"1s"}"#).is_err());
        assert!(serde_json::from_str::<LimitsRequest>(r#"{"memory":-5}"#).is_err());
    }

    /// A count that is not one says what is wanted: serde's own message said `expected u64`.
    #[test]
    fn a_count_that_is_not_a_whole_number_says_so() {
        for (json, shown) in [
            (r#"{"pids":"many"}"#, r#"string "many""#),
            (r#"{"pids":-1}"#, "integer `-1`"),
            (r#"{"open_files":1.5}"#, "floating point `1.5`"),
        ] {
            let e = serde_json::from_str::<LimitsRequest>(json)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(shown) && e.contains("expected a whole number such as 64"),
                "{json}: {e}"
            );
        }
        let full = serde_json::to_value(Limits::default()).unwrap();
        let mut bad = full.clone();
        bad["pids"] = "64".into();
        let e = serde_json::from_value::<Limits>(bad)
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected a whole number such as 64"), "{e}");
        assert_eq!(
            serde_json::from_value::<Limits>(full).unwrap(),
            Limits::default()
        );
    }

    #[test]
    fn a_limit_out_of_bounds_is_named() {
        let day_and_more = Millis(Duration::from_secs(25 * 3600));
        for (key, l) in [
            (
                "cpu_time",
                Limits {
                    cpu_time: day_and_more,
                    ..Limits::default()
                },
            ),
            (
                "wall_time",
                Limits {
                    wall_time: day_and_more,
                    ..Limits::default()
                },
            ),
        ] {
            let e = l.validate().unwrap_err().to_string();
            assert_eq!(e, format!("invalid limit {key}: must be at most 24h"));
        }
    }

    #[test]
    fn open_files_above_the_hosts_hard_limit_are_refused_naming_it() {
        let l = Limits {
            open_files: 20_001,
            ..Limits::default()
        };
        assert!(l.check_open_files(20_001).is_ok());
        let e = l.check_open_files(20_000).unwrap_err().to_string();
        assert!(
            e.starts_with("invalid limit open_files: 20001 is above"),
            "{e}"
        );
        assert!(e.contains("hard limit on open files, 20000"), "{e}");
        assert!(host_open_files_max() >= 4);
    }

    #[test]
    fn rejects_absurd_limits_and_clamps() {
        let l = Limits {
            memory: Size(1000),
            ..Limits::default()
        };
        assert!(l.validate().is_err());
        let caps = Limits {
            pids: 8,
            ..Limits::default()
        };
        let big = Limits {
            pids: 1000,
            ..Limits::default()
        };
        assert_eq!(big.clamp_to(&caps).pids, 8);
    }
}
