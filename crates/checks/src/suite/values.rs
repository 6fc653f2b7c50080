//! Readers of a suite's plain values (points, switches, exit codes) whose errors say what is
//! wanted in course staff's words: serde's own say `expected f64` or `expected i32`.
//! Used as `#[serde(deserialize_with = "…")]` on the raw model's fields.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// Points (or a weight): any number; whether it may be negative is said after parsing.
struct Points(f64);

impl<'de> Deserialize<'de> for Points {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Points;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number of points such as 1 or 2.5")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Points, E> {
                Ok(Points(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Points, E> {
                Ok(Points(v as f64))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Points, E> {
                Ok(Points(v as f64))
            }
        }
        d.deserialize_f64(V)
    }
}

/// `true` or `false`.
struct Flag(bool);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Flag;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("true or false")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Flag, E> {
                Ok(Flag(v))
            }
        }
        d.deserialize_bool(V)
    }
}

/// A list of check ids (`depends`).
struct Ids(Vec<String>);

impl<'de> Deserialize<'de> for Ids {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Ids;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of check ids such as [compiles]")
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Ids, A::Error> {
                let mut ids = Vec::new();
                while let Some(id) = seq.next_element()? {
                    ids.push(id);
                }
                Ok(Ids(ids))
            }
        }
        d.deserialize_seq(V)
    }
}

/// A process's exit code.
pub(crate) struct ExitCode(pub i32);

impl<'de> Deserialize<'de> for ExitCode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ExitCode;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an exit code: a whole number such as 0 or 1")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ExitCode, E> {
                i32::try_from(v)
                    .map(ExitCode)
                    .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ExitCode, E> {
                i32::try_from(v)
                    .map(ExitCode)
                    .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
            }
        }
        d.deserialize_i32(V)
    }
}

pub(crate) fn opt_points<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    Option::<Points>::deserialize(d).map(|p| p.map(|p| p.0))
}

/// `{test_or_check: points, …}`.
pub(crate) fn points_map<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, f64>, D::Error> {
    BTreeMap::<String, Points>::deserialize(d)
        .map(|m| m.into_iter().map(|(k, p)| (k, p.0)).collect())
}

pub(crate) fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Flag::deserialize(d).map(|f| f.0)
}

pub(crate) fn opt_flag<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    Option::<Flag>::deserialize(d).map(|f| f.map(|f| f.0))
}

pub(crate) fn ids<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ids::deserialize(d).map(|i| i.0)
}
