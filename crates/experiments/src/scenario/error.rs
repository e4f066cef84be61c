//! Why a scenario file did not load: every error names the file and,
//! where it can, the field, the variant and what is allowed; and taking
//! a refused field out of the document, so that reading goes on to the
//! next error.

use crate::systems::Problem;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A scenario file that failed to load.
#[derive(Debug, Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML.
    #[error("{path}: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A field is missing, unknown, of the wrong type or out of range.
    #[error("{path}: {context}`{field}`: {message}")]
    Field {
        /// The file.
        path: PathBuf,
        /// `"variant \"X\": "` when the error arose in a variant, else empty.
        context: String,
        /// The field's dotted path, such as `hops.near.loss`.
        field: String,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// Several independent errors of one file, each as above, in file
    /// order (a file with one error gets that error alone).
    #[error("{} errors:{}", .0.len(), list(.0))]
    Several(Vec<ScenarioError>),
}

/// The errors, one per line.
fn list(errors: &[ScenarioError]) -> String {
    errors.iter().map(|e| format!("\n  - {e}")).collect()
}

impl ScenarioError {
    /// One error for `errors`: the one, or [`ScenarioError::Several`]
    /// (`errors` is not empty).
    pub(crate) fn from_all(mut errors: Vec<ScenarioError>) -> ScenarioError {
        if errors.len() == 1 {
            errors.remove(0)
        } else {
            ScenarioError::Several(errors)
        }
    }

    /// Its field and message, if it is about one field.
    fn field_and_message(&self) -> Option<(&str, &str)> {
        match self {
            ScenarioError::Field { field, message, .. } => Some((field, message)),
            _ => None,
        }
    }

    /// Whether it says what `other` says about the same field (a base
    /// error repeated in a variant, which merges the base).
    pub(crate) fn repeats(&self, other: &ScenarioError) -> bool {
        self.field_and_message()
            .is_some_and(|mine| other.field_and_message() == Some(mine))
    }
}

/// A field error in `path` (`context` is `variant "X": ` or empty).
pub(crate) fn field_error(path: &Path, context: &str, field: &str, message: &str) -> ScenarioError {
    ScenarioError::Field {
        path: path.to_path_buf(),
        context: context.to_string(),
        field: field.to_string(),
        message: message.to_string(),
    }
}

/// The message without the `in `field`` line the toml crate appends (the
/// error names the field already).
pub(crate) fn first_line(message: &str) -> &str {
    message.lines().next().unwrap_or(message)
}

/// A field path's parts: `hops.near.loss`, `flows[2].name`.
fn keys(field: &str) -> Option<Vec<Result<String, usize>>> {
    let mut parts = Vec::new();
    for dotted in field.split('.') {
        let (key, indices) = dotted
            .split_once('[')
            .map_or((dotted, ""), |(k, rest)| (k, rest));
        if key.is_empty() || key == "?" {
            return None;
        }
        parts.push(Ok(key.to_string()));
        for index in indices.split('[').filter(|i| !i.is_empty()) {
            parts.push(Err(index.strip_suffix(']')?.parse().ok()?));
        }
    }
    Some(parts)
}

/// The path of the table `field` is in (empty at the top).
pub(super) fn parent(field: &str) -> &str {
    field.rsplit_once('.').map_or("", |(parent, _)| parent)
}

/// The last key of `field`.
pub(super) fn last_key(field: &str) -> &str {
    field.rsplit_once('.').map_or(field, |(_, key)| key)
}

/// Takes `field` out of `value`; false if it is not there as a key of a
/// table.
pub(super) fn remove(value: &mut toml::Value, field: &str) -> bool {
    let Some(mut parts) = keys(field) else {
        return false;
    };
    let Some(Ok(last)) = parts.pop() else {
        return false;
    };
    let mut here = value;
    for part in parts {
        let next = match (part, here) {
            (Ok(key), toml::Value::Table(table)) => table.get_mut(&key),
            (Err(index), toml::Value::Array(items)) => items.get_mut(index),
            _ => None,
        };
        let Some(next) = next else {
            return false;
        };
        here = next;
    }
    match here {
        toml::Value::Table(table) => table.remove(&last).is_some(),
        _ => false,
    }
}

/// A problem with `field`: `message`.
pub(super) fn fail<T>(field: &str, message: impl Into<String>) -> Result<T, Problem> {
    Err((field.to_string(), message.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_field_is_taken_out_by_its_path() {
        let mut value: toml::Value =
            toml::from_str("[hops.near]\nloss = 1\n[[flows]]\nname = \"a\"\nx = 2\n").unwrap();
        assert!(remove(&mut value, "hops.near.loss"));
        assert!(remove(&mut value, "flows[0].x"));
        assert!(!remove(&mut value, "flows[3].x"), "no such element");
        assert!(!remove(&mut value, "?"), "an unknown segment");
        assert_eq!(value["hops"]["near"].as_table().unwrap().len(), 0);
        assert_eq!(value["flows"][0].as_table().unwrap().len(), 1);
        assert_eq!(
            (parent("hops.near.loss"), last_key("hops.near.loss")),
            ("hops.near", "loss")
        );
    }
}
