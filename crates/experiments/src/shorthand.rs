//! A tagged table that may be written as its tag alone:
//! `middle = "split"` for `middle = { kind = "split" }`, `controller =
//! "cubic"` for `controller = { name = "cubic" }`.

use serde::Deserialize;
use serde::de::value::{MapAccessDeserializer, MapDeserializer};
use serde::de::{self, Deserializer, IntoDeserializer, MapAccess, Visitor};
use std::fmt;
use std::marker::PhantomData;

/// A type deserialised from a table tagged by [`Tagged::TAG`].
pub(crate) trait Tagged {
    /// The tag's key: `kind`, `name`.
    const TAG: &'static str;
}

impl Tagged for cc::Controller {
    const TAG: &'static str = "name";
}

/// Deserialises `T` from its table or from its tag alone.
pub(crate) fn tagged<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Tagged + Deserialize<'de>,
{
    struct Either<T>(PhantomData<T>);

    impl<'de, T: Tagged + Deserialize<'de>> Visitor<'de> for Either<T> {
        type Value = T;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "a name, or a table with `{}`", T::TAG)
        }

        fn visit_str<E: de::Error>(self, name: &str) -> Result<T, E> {
            let entries = std::iter::once((T::TAG, name.to_string().into_deserializer()));
            T::deserialize(MapDeserializer::<_, E>::new(entries))
        }

        fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<T, M::Error> {
            T::deserialize(MapAccessDeserializer::new(map))
        }
    }

    deserializer.deserialize_any(Either(PhantomData))
}

/// [`tagged`] for an optional field (with `#[serde(default)]`).
pub(crate) fn tagged_option<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Tagged + Deserialize<'de>,
{
    tagged(deserializer).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Holder {
        #[serde(deserialize_with = "tagged")]
        controller: cc::Controller,
    }

    #[test]
    fn a_name_or_a_table() {
        let short: Holder = toml::from_str("controller = \"newreno\"").unwrap();
        assert_eq!(short.controller, cc::Controller::Newreno);
        let long: Holder =
            toml::from_str("controller = { name = \"pacubic\", quack_acks = true }").unwrap();
        assert_eq!(long.controller.name(), "pacubic");
        let error = toml::from_str::<Holder>("controller = \"cubix\"")
            .err()
            .unwrap()
            .to_string();
        assert!(
            error.contains("cubix") && error.contains("newreno"),
            "{error}"
        );
    }
}
