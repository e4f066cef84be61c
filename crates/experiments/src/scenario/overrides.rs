//! `pepkit run FILE --set PATH=VALUE`: edits of the scenario document
//! before it is read, so that one field can be ablated without copying the
//! file. A sweep's points set their fields with the same [`set`].
//!
//! An override means what the line `PATH = VALUE` would mean at the top of
//! the file, except that it replaces a value the file already has:
//!
//! - PATH is a TOML dotted key (`hops.near.loss`, `variant."MFT, C1".server`);
//!   a part that meets an array (`variant`, `flows`, `plots`) picks an
//!   element by its index from 0 or by its `name`.
//! - Missing tables on the way are created, as a dotted key in the file
//!   would create them; the scenario reader then rejects what is not a
//!   field. Setting inside a value that is not a table is an error.
//! - VALUE is a TOML value (`0.02`, `"10MB"`, `{ packet_threshold = 300 }`,
//!   `[1, 2]`). A single word that is not TOML (`10MB`, `aioquic`,
//!   `1Mbit/s`) is taken as a string, so units need no quotes; a word TOML
//!   reads (`true`, `12`, `inf`) keeps TOML's meaning.
//! - A table value replaces the table there (set one field of it with a
//!   longer PATH to keep the others).
//!
//! Overrides of the base reach a variant unless the variant sets the same
//! field itself (its own value wins, as for any base field); the file
//! reports which variants kept their own value ([`Shadowed`]).

use std::fmt;
use std::str::FromStr;

/// One `--set PATH=VALUE`.
#[derive(Clone, Debug, PartialEq)]
pub struct Override {
    /// The keys of PATH, unquoted.
    path: Vec<String>,
    /// The value to put there.
    value: toml::Value,
}

/// An override of the base that some variants do not see, because they set
/// the field (or a table above it) themselves.
#[derive(Clone, Debug, PartialEq)]
pub struct Shadowed {
    /// The override.
    pub set: Override,
    /// The variants (a swept variant by its own name) that keep their own
    /// value.
    pub variants: Vec<String>,
}

/// Where an override lands, for telling whether variants see it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Target {
    /// The base at this path: every variant that does not set it.
    Base(Vec<String>),
    /// Inside `[[variant]]` number `index`, at this path of the variant.
    Variant(usize, Vec<String>),
    /// Elsewhere: a whole variant, `[[check]]`s, `[quick]`.
    Other,
}

impl Override {
    /// PATH, as a dotted key (parts quoted where TOML needs it).
    pub fn path(&self) -> String {
        self.path
            .iter()
            .map(|key| quoted_key(key))
            .collect::<Vec<_>>()
            .join(".")
    }

    /// The value.
    pub fn value(&self) -> &toml::Value {
        &self.value
    }

    /// Sets the value in `document` (the whole file, variants included)
    /// and says where it landed; the error says why it cannot be set.
    pub(crate) fn apply(&self, document: &mut toml::Table) -> Result<Target, String> {
        let target = match self.path.as_slice() {
            [first, ..] if first == "check" || first == "quick" => Target::Other,
            [first, element, rest @ ..] if first == "variant" && !rest.is_empty() => {
                match document.get("variant") {
                    Some(toml::Value::Array(variants)) => match element_index(variants, element) {
                        Some(index) => Target::Variant(index, rest.to_vec()),
                        None => Target::Other,
                    },
                    _ => Target::Other,
                }
            }
            [first, ..] if first == "variant" => Target::Other,
            path => Target::Base(path.to_vec()),
        };
        set(document, &self.path, self.value.clone())?;
        Ok(target)
    }

    /// Whether the scenario reader's error at dotted `field` concerns this
    /// override's field (the same field, one inside it or a table above it).
    pub(crate) fn concerns(&self, target: &Target, field: &str) -> bool {
        let path = match target {
            Target::Variant(_, path) => path.join("."),
            _ => self.path.join("."),
        };
        let inside = |outer: &str, inner: &str| {
            inner == outer
                || inner
                    .strip_prefix(outer)
                    .is_some_and(|rest| rest.starts_with(['.', '[']))
        };
        inside(&path, field) || inside(field, &path)
    }
}

impl fmt::Display for Override {
    /// `PATH=VALUE`, which parses back to the same override.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.path(), self.value)
    }
}

impl FromStr for Override {
    type Err = String;

    fn from_str(text: &str) -> Result<Override, String> {
        let Some(at) = unquoted_equals(text) else {
            return Err(format!(
                "{text:?} has no `=`; write PATH=VALUE, such as hops.near.loss=0.02"
            ));
        };
        let (path_text, value_text) = (text[..at].trim(), text[at + 1..].trim());
        if path_text.is_empty() {
            return Err(format!(
                "{text:?} has no field before `=`; write PATH=VALUE, such as hops.near.loss=0.02"
            ));
        }
        let path = parse_path(path_text)?;
        if value_text.is_empty() {
            return Err(format!(
                "`{path_text}` has no value after `=` (a string is written \"\")"
            ));
        }
        let value = match value_text.parse::<toml::Value>() {
            Ok(value) => value,
            Err(_) if is_word(value_text) => toml::Value::String(value_text.to_string()),
            Err(error) => {
                let reason = error.message().trim().replace('\n', "; ");
                // A string with spaces or symbols needs TOML's quotes.
                let hint = if value_text.starts_with(['{', '[', '"', '\'']) {
                    String::new()
                } else {
                    format!("; quote a string: {path_text}='\"{value_text}\"'")
                };
                return Err(format!(
                    "`{path_text}`: {value_text:?} is not a TOML value ({reason}){hint}"
                ));
            }
        };
        Ok(Override { path, value })
    }
}

/// The position of the first `=` outside a quoted key.
fn unquoted_equals(text: &str) -> Option<usize> {
    let mut quote = None;
    let mut escaped = false;
    for (at, c) in text.char_indices() {
        match (quote, c) {
            (Some('"'), '\\') if !escaped => {
                escaped = true;
                continue;
            }
            (Some(q), c) if c == q && !escaped => quote = None,
            (None, '"' | '\'') => quote = Some(c),
            (None, '=') => return Some(at),
            _ => {}
        }
        escaped = false;
    }
    None
}

/// The keys of a TOML dotted key, read by the TOML parser itself (so
/// quoting works as in the file).
fn parse_path(text: &str) -> Result<Vec<String>, String> {
    let bad = || {
        format!(
            "`{text}` is not a dotted field such as hops.near.loss (quote a key with spaces: \
             variant.\"MFT, C1\".server.controller)"
        )
    };
    if text.contains(['\n', '\r', '#']) {
        return Err(bad());
    }
    let document: toml::Table = toml::from_str(&format!("{text} = 0")).map_err(|_| bad())?;
    let mut keys = Vec::new();
    let mut here = &document;
    loop {
        let mut entries = here.iter();
        let (Some((key, value)), None) = (entries.next(), entries.next()) else {
            return Err(bad());
        };
        keys.push(key.clone());
        match value {
            toml::Value::Table(inner) => here = inner,
            toml::Value::Integer(0) => return Ok(keys),
            _ => return Err(bad()),
        }
    }
}

/// Whether `text` is one word that may stand for a string without quotes:
/// letters, digits and `_ - . : / + %` (quantities, names, trace paths).
fn is_word(text: &str) -> bool {
    text.chars()
        .all(|c| c.is_alphanumeric() || "_-.:/+%".contains(c))
}

/// `key` as a part of a dotted key: bare if TOML allows, else quoted.
fn quoted_key(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        key.to_string()
    } else {
        toml::Value::String(key.to_string()).to_string()
    }
}

/// The element of `array` a key names: its index, or the table whose `name`
/// it is.
fn element_index(array: &[toml::Value], key: &str) -> Option<usize> {
    if let Ok(index) = key.parse::<usize>() {
        return (index < array.len()).then_some(index);
    }
    array.iter().position(|element| {
        element
            .get("name")
            .and_then(toml::Value::as_str)
            .is_some_and(|name| name == key)
    })
}

/// What a value is, in an error.
fn kind(value: &toml::Value) -> String {
    match value {
        toml::Value::Table(_) => "a table".into(),
        toml::Value::Array(_) => "an array".into(),
        other => format!("{} ({other})", other.type_str()),
    }
}

/// Sets `path` of `table` to `value`, creating missing tables on the way;
/// in an array, a key picks an element ([`element_index`]).
pub(crate) fn set(
    table: &mut toml::Table,
    path: &[String],
    value: toml::Value,
) -> Result<(), String> {
    let dotted = |depth: usize| path[..depth].join(".");
    let mut here = table;
    let mut depth = 0;
    loop {
        let Some(key) = path.get(depth) else {
            return Err("an empty field".into());
        };
        depth += 1;
        if depth == path.len() {
            here.insert(key.clone(), value);
            return Ok(());
        }
        let entry = here
            .entry(key.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        here = match entry {
            toml::Value::Table(inner) => inner,
            toml::Value::Array(array) => {
                let next = &path[depth];
                let Some(index) = element_index(array, next) else {
                    return Err(no_element(&dotted(depth), array, next));
                };
                depth += 1;
                if depth == path.len() {
                    array[index] = value;
                    return Ok(());
                }
                match &mut array[index] {
                    toml::Value::Table(inner) => inner,
                    other => {
                        let at = dotted(depth);
                        return Err(format!("`{at}` is {}, not a table", kind(other)));
                    }
                }
            }
            other => {
                let at = dotted(depth);
                return Err(format!("`{at}` is {}, not a table", kind(other)));
            }
        };
    }
}

/// Why `key` picks no element of `array` (at `at`): what it has.
fn no_element(at: &str, array: &[toml::Value], key: &str) -> String {
    let names: Vec<String> = array
        .iter()
        .filter_map(|e| e.get("name").and_then(toml::Value::as_str))
        .map(|name| format!("{name:?}"))
        .collect();
    let named = if names.is_empty() {
        String::new()
    } else {
        format!(" or a name: {}", names.join(", "))
    };
    format!(
        "`{at}` has no element {key:?}: it has {} (an index from 0{named})",
        array.len()
    )
}

/// The value at `path` of `table`, if there is one (arrays by index or
/// name, as [`set`] finds them).
pub(crate) fn lookup<'a>(table: &'a toml::Table, path: &[String]) -> Option<&'a toml::Value> {
    let (first, rest) = path.split_first()?;
    let mut here = table.get(first)?;
    for key in rest {
        here = match here {
            toml::Value::Table(table) => table.get(key)?,
            toml::Value::Array(array) => &array[element_index(array, key)?],
            _ => return None,
        };
    }
    Some(here)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(text: &str) -> Override {
        text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn error(text: &str) -> String {
        match text.parse::<Override>() {
            Ok(set) => panic!("{text} parsed as {set:?}"),
            Err(error) => error,
        }
    }

    #[test]
    fn values_are_toml_and_single_words_are_strings() {
        assert_eq!(set("hops.near.loss=0.02").value, toml::Value::Float(0.02));
        assert_eq!(set("trials = 3").value, toml::Value::Integer(3));
        assert_eq!(
            set("workload.size=\"10MB\"").value,
            toml::Value::String("10MB".into())
        );
        // Not TOML, one word: a string, so quantities need no quotes.
        for word in [
            "10MB",
            "aioquic",
            "1Mbit/s",
            "cellular/ATT-LTE-driving.up",
            "1%",
        ] {
            let value = set(&format!("x={word}")).value;
            assert_eq!(value, toml::Value::String(word.into()), "{word}");
        }
        // Words TOML reads keep TOML's meaning.
        assert_eq!(set("x=true").value, toml::Value::Boolean(true));
        assert_eq!(set("x=inf").value, toml::Value::Float(f64::INFINITY));
        let table = set("server.loss_detection={ packet_threshold = 300, time_threshold = 2.0 }");
        assert_eq!(table.path, ["server", "loss_detection"]);
        assert_eq!(table.value["packet_threshold"].as_integer(), Some(300));
        assert_eq!(set("x=[1, 2]").value.as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn malformed_overrides_say_what_is_wrong() {
        assert!(error("hops.near.loss").contains("no `=`"));
        assert!(error("=3").contains("no field before `=`"));
        assert!(error("hops..loss=3").contains("not a dotted field"));
        assert!(error("a b=3").contains("not a dotted field"));
        assert!(error("x=").contains("no value"));
        let message = error("server.loss_detection={ packet_threshold = 300");
        assert!(message.contains("is not a TOML value"), "{message}");
        assert!(error("x=two words").contains("is not a TOML value"));
        // Another key smuggled into the path or the value.
        assert!(error("a\nb=2").contains("not a dotted field"));
        assert!(error("a=1\nb = 2").contains("not a TOML value"));
    }

    #[test]
    fn quoted_keys_may_hold_dots_and_equals_signs() {
        let quoted = set("variant.\"MFT, loss = 0.1\".hops.far.loss=0");
        assert_eq!(
            quoted.path,
            ["variant", "MFT, loss = 0.1", "hops", "far", "loss"]
        );
        assert_eq!(quoted.value, toml::Value::Integer(0));
    }

    #[test]
    fn the_written_form_reads_back_as_the_same_override() {
        for text in [
            "hops.near.loss=0.02",
            "client.stack=aioquic",
            "variant.\"MFT, C1\".server.loss_detection={packet_threshold=300,time_threshold=2.0}",
            "x=[1, \"a\"]",
            "seed=7",
        ] {
            let once = set(text);
            let again = set(&once.to_string());
            assert_eq!(once, again, "{text} → {once}");
        }
        assert_eq!(
            set("client.stack=aioquic").to_string(),
            "client.stack=\"aioquic\""
        );
        assert_eq!(set("a.\"b c\".d = 1").to_string(), "a.\"b c\".d=1");
    }

    fn document() -> toml::Table {
        toml::from_str(
            r#"
            trials = 2
            [workload]
            size = "1MB"
            [[variant]]
            name = "A"
            [[variant]]
            name = "B, C"
            hops.near.loss = 0.1
            "#,
        )
        .unwrap()
    }

    #[test]
    fn sets_replace_create_tables_and_find_array_elements() {
        let mut doc = document();
        assert_eq!(
            set("workload.size=2MB").apply(&mut doc),
            Ok(Target::Base(vec!["workload".into(), "size".into()]))
        );
        assert_eq!(doc["workload"]["size"].as_str(), Some("2MB"));
        // Missing tables are made, as a dotted key in the file makes them.
        set("server.loss_detection.packet_threshold=300")
            .apply(&mut doc)
            .unwrap();
        assert_eq!(
            doc["server"]["loss_detection"]["packet_threshold"].as_integer(),
            Some(300)
        );
        // A variant by name or by index.
        let target = set("variant.\"B, C\".hops.near.loss=0.2").apply(&mut doc);
        assert_eq!(
            target,
            Ok(Target::Variant(
                1,
                vec!["hops".into(), "near".into(), "loss".into()]
            ))
        );
        set("variant.0.trials=5").apply(&mut doc).unwrap();
        assert_eq!(doc["variant"][0]["trials"].as_integer(), Some(5));
        assert_eq!(
            doc["variant"][1]["hops"]["near"]["loss"].as_float(),
            Some(0.2)
        );
        assert_eq!(
            set("variant.1={ name = \"D\" }").apply(&mut doc),
            Ok(Target::Other)
        );
        assert_eq!(doc["variant"][1]["name"].as_str(), Some("D"));
        let path: Vec<String> = vec!["variant".into(), "D".into(), "name".into()];
        assert_eq!(lookup(&doc, &path).and_then(|v| v.as_str()), Some("D"));
    }

    #[test]
    fn setting_inside_a_value_or_a_missing_element_is_refused() {
        let mut doc = document();
        let message = set("workload.size.unit=1").apply(&mut doc).unwrap_err();
        assert!(message.contains("`workload.size` is string"), "{message}");
        assert!(message.contains("not a table"), "{message}");
        let message = set("trials.x=1").apply(&mut doc).unwrap_err();
        assert!(
            message.contains("`trials` is integer (2), not a table"),
            "{message}"
        );
        let message = set("variant.Z.trials=1").apply(&mut doc).unwrap_err();
        assert!(
            message.contains("`variant` has no element \"Z\""),
            "{message}"
        );
        assert!(message.contains("\"A\", \"B, C\""), "{message}");
        let message = set("variant.7.trials=1").apply(&mut doc).unwrap_err();
        assert!(message.contains("it has 2"), "{message}");
        // Nothing was changed by the refused edits.
        assert_eq!(doc, document());
    }

    #[test]
    fn dotted_fields_index_arrays_as_sweeps_write_them() {
        let mut table: toml::Table =
            toml::from_str("flows = [{ name = \"a\" }, { name = \"b\" }]").unwrap();
        let keys = |field: &str| field.split('.').map(str::to_string).collect::<Vec<_>>();
        super::set(&mut table, &keys("flows.1.count"), toml::Value::Integer(4)).unwrap();
        super::set(&mut table, &keys("flows.a.count"), toml::Value::Integer(2)).unwrap();
        let rate = toml::Value::String("1Mbit/s".into());
        super::set(&mut table, &keys("hops.far.rate"), rate).unwrap();
        assert_eq!(table["flows"][1]["count"].as_integer(), Some(4));
        assert_eq!(table["flows"][0]["count"].as_integer(), Some(2));
        assert_eq!(table["hops"]["far"]["rate"].as_str(), Some("1Mbit/s"));
        let beyond = super::set(&mut table, &keys("flows.2.count"), toml::Value::Integer(1));
        assert!(beyond.unwrap_err().contains("`flows` has no element \"2\""));
    }

    #[test]
    fn errors_concern_the_field_inside_above_or_at_the_override() {
        let deep = set("server.loss_detection={ packet_threshold = 0 }");
        let base = Target::Base(deep.path.clone());
        assert!(deep.concerns(&base, "server.loss_detection.packet_threshold"));
        assert!(deep.concerns(&base, "server.loss_detection"));
        assert!(deep.concerns(&base, "server"));
        assert!(!deep.concerns(&base, "server.controller"));
        assert!(!deep.concerns(&base, "server.loss"));
        let variant = Target::Variant(0, vec!["hops".into(), "near".into()]);
        assert!(set("variant.A.hops.near={}").concerns(&variant, "hops.near.rate"));
    }
}
