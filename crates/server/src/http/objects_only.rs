//! A deserializer that reads a struct only from a JSON object. Serde's derived `Deserialize`
//! also reads a struct from an array of its field values in order (serde-rs/serde#1587), so
//! `"limits": ["1s", "2s"]` would silently be a CPU and a wall time limit. The API documents
//! objects; anything else is a 422 naming the field.
//!
//! Written by hand because no crate does it (serde's maintainers point to a wrapper like this
//! one). Every nested value goes through the wrapper too: seeds, map values, sequence elements,
//! `Option`s, newtypes and enum variants carry it down. Values serde buffers itself (untagged
//! and internally tagged enums, `flatten`) are read by serde's own deserializer, so a struct
//! inside those stays lenient; corral's request types do not nest structs there.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, Visitor};

/// Wraps a deserializer: every struct (and struct variant) beneath it must be a map.
pub struct ObjectsOnly<D>(pub D);

/// `T` from a JSON value, its structs from objects only.
pub fn from_value<T: de::DeserializeOwned>(v: serde_json::Value) -> Result<T, serde_json::Error> {
    T::deserialize(ObjectsOnly(v))
}

/// `T` from JSON text, its structs from objects only.
pub fn from_slice<T: de::DeserializeOwned>(bytes: &[u8]) -> Result<T, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let v = T::deserialize(ObjectsOnly(&mut de))?;
    de.end()?;
    Ok(v)
}

/// [`from_slice`] whose error names the field it is about (`limits: invalid type: …`), as the
/// HTTP API's 422 does.
pub fn from_slice_naming_field<T: de::DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let v = serde_path_to_error::deserialize(ObjectsOnly(&mut de)).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(v)
}

macro_rules! forward {
    ($($method:ident),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
            self.0.$method(Wrap(visitor))
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for ObjectsOnly<D> {
    type Error = D::Error;

    forward!(
        deserialize_any,
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_option,
        deserialize_unit,
        deserialize_seq,
        deserialize_map,
        deserialize_identifier,
        deserialize_ignored_any,
    );

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_unit_struct(name, Wrap(visitor))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_newtype_struct(name, Wrap(visitor))
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple(len, Wrap(visitor))
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple_struct(name, len, Wrap(visitor))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_struct(name, fields, MapOnly(visitor))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_enum(name, variants, Wrap(visitor))
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

/// A visitor whose nested values are read through [`ObjectsOnly`].
struct Wrap<V>(V);

/// The visitor of a struct: a map as usual, never a sequence.
struct MapOnly<V>(V);

macro_rules! visit_scalars {
    ($($method:ident($ty:ty)),* $(,)?) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
            self.0.$method(v)
        }
    )*};
}

macro_rules! visitor_impl {
    ($name:ident) => {
        impl<'de, V: Visitor<'de>> Visitor<'de> for $name<V> {
            type Value = V::Value;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                self.0.expecting(f)
            }

            visit_scalars!(
                visit_bool(bool),
                visit_i8(i8),
                visit_i16(i16),
                visit_i32(i32),
                visit_i64(i64),
                visit_i128(i128),
                visit_u8(u8),
                visit_u16(u16),
                visit_u32(u32),
                visit_u64(u64),
                visit_u128(u128),
                visit_f32(f32),
                visit_f64(f64),
                visit_char(char),
                visit_str(&str),
                visit_borrowed_str(&'de str),
                visit_string(String),
                visit_bytes(&[u8]),
                visit_borrowed_bytes(&'de [u8]),
                visit_byte_buf(Vec<u8>),
            );

            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                self.0.visit_none()
            }

            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                self.0.visit_some(ObjectsOnly(d))
            }

            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                self.0.visit_unit()
            }

            fn visit_newtype_struct<D: Deserializer<'de>>(
                self,
                d: D,
            ) -> Result<Self::Value, D::Error> {
                self.0.visit_newtype_struct(ObjectsOnly(d))
            }

            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                $name::seq(self, seq)
            }

            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                self.0.visit_map(Map(map))
            }

            fn visit_enum<A: de::EnumAccess<'de>>(self, e: A) -> Result<Self::Value, A::Error> {
                self.0.visit_enum(Enum(e))
            }
        }
    };
}

visitor_impl!(Wrap);
visitor_impl!(MapOnly);

impl<V> Wrap<V> {
    fn seq<'de, A: de::SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error>
    where
        V: Visitor<'de>,
    {
        self.0.visit_seq(Seq(seq))
    }
}

impl<V> MapOnly<V> {
    fn seq<'de, A: de::SeqAccess<'de>>(self, _: A) -> Result<V::Value, A::Error>
    where
        V: Visitor<'de>,
    {
        Err(de::Error::invalid_type(de::Unexpected::Seq, &self.0))
    }
}

/// A seed whose value is read through [`ObjectsOnly`].
struct Seed<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Seed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(ObjectsOnly(d))
    }
}

struct Seq<A>(A);

impl<'de, A: de::SeqAccess<'de>> de::SeqAccess<'de> for Seq<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(Seed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

struct Map<A>(A);

impl<'de, A: de::MapAccess<'de>> de::MapAccess<'de> for Map<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(Seed(seed))
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.0.next_value_seed(Seed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

struct Enum<A>(A);

impl<'de, A: de::EnumAccess<'de>> de::EnumAccess<'de> for Enum<A> {
    type Error = A::Error;
    type Variant = Variant<A::Variant>;

    fn variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<(T::Value, Self::Variant), A::Error> {
        let (v, variant) = self.0.variant_seed(Seed(seed))?;
        Ok((v, Variant(variant)))
    }
}

struct Variant<A>(A);

impl<'de, A: de::VariantAccess<'de>> de::VariantAccess<'de> for Variant<A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.0.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.0.newtype_variant_seed(Seed(seed))
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.0.tuple_variant(len, Wrap(visitor))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.0.struct_variant(fields, MapOnly(visitor))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Limits {
        cpu: Option<String>,
        wall: Option<String>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "snake_case")]
    enum Mode {
        Plain,
        Shaped { depth: u32 },
        Wrapped(Limits),
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Request {
        cmd: Vec<String>,
        #[serde(default)]
        limits: Option<Limits>,
        #[serde(default)]
        env: BTreeMap<String, String>,
        #[serde(default)]
        many: Vec<Limits>,
        #[serde(default)]
        mode: Option<Mode>,
        #[serde(default)]
        pair: Option<(u32, String)>,
    }

    fn read(text: &str) -> Result<Request, String> {
        let mut de = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(ObjectsOnly(&mut de)).map_err(|e| e.to_string())
    }

    #[test]
    fn objects_arrays_and_everything_else_read_as_before() {
        let r = read(
            r#"{"cmd": ["a", "b"], "limits": {"cpu": "1s"}, "env": {"K": "v"},
                "many": [{"wall": "2s"}, {}], "mode": {"shaped": {"depth": 3}}, "pair": [1, "x"]}"#,
        )
        .unwrap();
        assert_eq!(r.cmd, ["a", "b"]);
        assert_eq!(r.limits.unwrap().cpu.as_deref(), Some("1s"));
        assert_eq!(r.env["K"], "v");
        assert_eq!(r.many[0].wall.as_deref(), Some("2s"));
        assert_eq!(r.mode, Some(Mode::Shaped { depth: 3 }));
        assert_eq!(r.pair, Some((1, "x".into())));
        assert_eq!(
            read(r#"{"cmd": [], "mode": "plain"}"#).unwrap().mode,
            Some(Mode::Plain)
        );
        let wrapped = read(r#"{"cmd": [], "mode": {"wrapped": {"cpu": "3s"}}}"#).unwrap();
        assert!(matches!(
            wrapped.mode,
            Some(Mode::Wrapped(Limits { cpu: Some(_), .. }))
        ));
    }

    #[test]
    fn a_struct_written_as_an_array_is_refused_where_it_is() {
        for (text, at) in [
            (r#"[["a"]]"#, "invalid type"),
            (r#"{"cmd": [], "limits": ["1s", "2s"]}"#, "limits"),
            (r#"{"cmd": [], "many": [{}, ["1s"]]}"#, "many[1]"),
            (r#"{"cmd": [], "mode": {"shaped": [3]}}"#, "mode"),
            (r#"{"cmd": [], "mode": {"wrapped": ["3s"]}}"#, "mode"),
        ] {
            let e = read(text).unwrap_err();
            assert!(
                e.starts_with(at) && e.contains("invalid type: sequence"),
                "{text}: {e}"
            );
        }
        // The same texts read leniently without the wrapper: the wrapper is what refuses them.
        let lenient: Request =
            serde_json::from_str(r#"{"cmd": [], "limits": ["1s", "2s"]}"#).unwrap();
        assert_eq!(lenient.limits.unwrap().wall.as_deref(), Some("2s"));
    }
}
