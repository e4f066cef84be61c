//! A system's settings, declared once: [`settings!`] declares the table a
//! scenario variant and a router daemon (`pepkit middle`) both write —
//! every field optional, its default given once beside its doc — and
//! derives from the same declaration the accessors that fill in the
//! defaults and the list that `pepkit middle --help` prints
//! ([`Documented`]).

/// One setting as `--help` lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct Setting {
    /// Its name in the table.
    pub name: &'static str,
    /// Its default as a scenario would write it (`None`: no default; the
    /// doc says when it is needed).
    pub default: Option<String>,
    /// What it means (the field's doc comment).
    pub doc: String,
}

impl Setting {
    /// `name` with its doc lines and its default value, rendered as TOML.
    pub fn new<T: serde::Serialize>(
        name: &'static str,
        doc: &[&str],
        default: Option<T>,
    ) -> Setting {
        let default = default.map(|value| match toml::Value::try_from(&value) {
            Ok(value) => value.to_string(),
            Err(_) => "?".to_string(),
        });
        Setting {
            name,
            default,
            doc: doc
                .iter()
                .map(|line| line.trim())
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// A settings table that can list its settings.
pub(crate) trait Documented {
    /// Every setting, in declaration order.
    fn settings() -> Vec<Setting>;
}

/// Declares a settings table: `name: Type = default,` (or `name: Type,`
/// for a setting without a default), each with a doc comment, optionally
/// followed by `; deserialize_with = "path"` for serde. It makes the
/// struct (every field an `Option`, left out when serialised if unset),
/// one accessor per defaulted field that fills in its default, and the
/// [`Documented`] list.
macro_rules! settings {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[doc = $doc:literal])+
                $field:ident : $ty:ty $(= $default:expr)? $(; deserialize_with = $with:literal)?,
            )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, serde::Deserialize, serde::Serialize, PartialEq)]
        #[serde(deny_unknown_fields)]
        $vis struct $name {
            $(
                $(#[doc = $doc])+
                $(#[serde(deserialize_with = $with)])?
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub(crate) $field: Option<$ty>,
            )*
        }

        impl $name {
            $( settings!(@accessor $field $ty $(= $default)?); )*
        }

        impl $crate::systems::settings::Documented for $name {
            fn settings() -> Vec<$crate::systems::settings::Setting> {
                vec![$(
                    $crate::systems::settings::Setting::new(
                        stringify!($field),
                        &[$($doc),+],
                        settings!(@default $ty $(= $default)?),
                    ),
                )*]
            }
        }
    };
    (@accessor $field:ident $ty:ty = $default:expr) => {
        /// The setting, or its default.
        #[allow(dead_code)]
        pub(crate) fn $field(&self) -> $ty {
            self.$field.clone().unwrap_or_else(|| $default)
        }
    };
    (@accessor $field:ident $ty:ty) => {};
    (@default $ty:ty = $default:expr) => {
        Some::<$ty>($default)
    };
    (@default $ty:ty) => {
        None::<$ty>
    };
}

pub(crate) use settings;
