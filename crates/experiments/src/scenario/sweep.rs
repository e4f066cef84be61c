//! A variant's sweep: `sweep = { field, values }` makes one variant per
//! value; a list of such tables makes one per combination (the first
//! dimension outermost); a dimension's `with` sets further fields to the
//! value at the same position (`sweep = { field = "flows.0.count", values =
//! [2, 3], with = [{ field = "hops.far.rate", values = [40, 60], unit =
//! "Mbit/s" }] }`). Fields are dotted paths, set as `--set` sets them
//! (`overrides::set`): in an array a part is an index or a `name`
//! (`flows.0.count`), and a path into a value that is not a table is an
//! error. Values are numbers, or strings set as written
//! (`values = ["cellular/ATT-LTE-driving.down", …]`, without a `unit`):
//! a string's x coordinate is its position in the list (0, 1, …).

use serde::{Deserialize, Serialize};

/// Where a variant lies in a sweep: one line of a `lines` plot is a swept
/// variant (with its other dimensions' values), one point is a value.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct SweepPoint {
    /// The swept variant's name (the line).
    pub series: String,
    /// The first dimension's dotted field.
    pub field: String,
    /// Its value here (the x coordinate).
    pub x: f64,
    /// The other dimensions' values in words (`"delay = 30ms, bdp = 2"`;
    /// absent for a sweep of one dimension).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rest: String,
}

/// One dimension of a sweep, as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Dimension {
    field: String,
    values: Vec<Value>,
    #[serde(default)]
    unit: Option<String>,
    /// Fields set along with this one, value for value.
    #[serde(default)]
    with: Vec<Linked>,
}

/// A field set along with a dimension's.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Linked {
    field: String,
    values: Vec<Value>,
    #[serde(default)]
    unit: Option<String>,
}

/// One value of a dimension: a number (with the dimension's `unit`, if
/// any) or a string, set as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum Value {
    /// A number.
    Number(f64),
    /// A string (a trace's name, a controller's).
    Text(String),
}

impl Value {
    /// Its x coordinate at position `i` of its list: the number, or `i`.
    fn x(&self, i: usize) -> f64 {
        match self {
            Value::Number(value) => *value,
            Value::Text(_) => i as f64,
        }
    }

    fn is_text(&self) -> bool {
        matches!(self, Value::Text(_))
    }
}

/// A sweep: one dimension or several.
#[derive(Clone, Debug)]
pub(crate) enum Sweep {
    /// `sweep = { … }`.
    One(Dimension),
    /// `sweep = [{ … }, { … }]`.
    Product(Vec<Dimension>),
}

/// One point of a sweep: its name suffix, the fields to set, and where it
/// lies.
pub(crate) struct Point {
    /// `"rate = 20Mbit/s, delay = 15ms"`.
    pub label: String,
    /// (dotted field, value) to set.
    pub fields: Vec<(String, toml::Value)>,
    /// The first dimension's value.
    pub x: f64,
    /// The other dimensions' labels.
    pub rest: String,
}

impl Sweep {
    /// Its dimensions.
    fn dimensions(&self) -> &[Dimension] {
        match self {
            Sweep::One(dimension) => std::slice::from_ref(dimension),
            Sweep::Product(dimensions) => dimensions,
        }
    }

    /// The first dimension's field.
    pub(crate) fn field(&self) -> &str {
        self.dimensions().first().map_or("", |d| d.field.as_str())
    }

    /// What is wrong with it, if anything: (field within `sweep`, message).
    pub(crate) fn problem(&self) -> Option<(String, String)> {
        let dimensions = self.dimensions();
        if dimensions.is_empty() {
            return Some((String::new(), "has no dimension".into()));
        }
        let bad_field = |field: &str| field.is_empty() || field.split('.').any(str::is_empty);
        for (i, dimension) in dimensions.iter().enumerate() {
            let at = |inner: &str| match self {
                Sweep::One(_) => inner.to_string(),
                Sweep::Product(_) => format!("[{i}].{inner}"),
            };
            if dimension.values.is_empty() {
                return Some((at("values"), "is empty".into()));
            }
            if bad_field(&dimension.field) {
                return Some((
                    at("field"),
                    "must be a dotted field such as \"hops.near.loss\"".into(),
                ));
            }
            if dimension.unit.is_some() && dimension.values.iter().any(Value::is_text) {
                return Some((
                    at("unit"),
                    "applies to numbers; these values include a string".into(),
                ));
            }
            for (j, linked) in dimension.with.iter().enumerate() {
                if linked.unit.is_some() && linked.values.iter().any(Value::is_text) {
                    return Some((
                        at(&format!("with[{j}].unit")),
                        "applies to numbers; these values include a string".into(),
                    ));
                }
                if linked.values.len() != dimension.values.len() {
                    return Some((
                        at(&format!("with[{j}].values")),
                        format!(
                            "needs {} values, one per value swept",
                            dimension.values.len()
                        ),
                    ));
                }
                if bad_field(&linked.field) {
                    return Some((
                        at(&format!("with[{j}].field")),
                        "must be a dotted field".into(),
                    ));
                }
            }
        }
        let points: usize = dimensions.iter().map(|d| d.values.len()).product();
        if points > MAX_POINTS {
            return Some((
                String::new(),
                format!("has {points} points; at most {MAX_POINTS}"),
            ));
        }
        None
    }

    /// Every point, the first dimension outermost.
    pub(crate) fn points(&self) -> Vec<Point> {
        let dimensions = self.dimensions();
        let mut points = vec![Point {
            label: String::new(),
            fields: Vec::new(),
            x: 0.0,
            rest: String::new(),
        }];
        for (d, dimension) in dimensions.iter().enumerate() {
            let mut next = Vec::with_capacity(points.len() * dimension.values.len());
            for point in &points {
                for (i, value) in dimension.values.iter().enumerate() {
                    let unit = dimension.unit.as_deref();
                    let words = format!("{} = {}", leaf(&dimension.field), text(value, unit));
                    let mut fields = point.fields.clone();
                    fields.push((dimension.field.clone(), toml_value(value, unit)));
                    for linked in &dimension.with {
                        let linked_unit = linked.unit.as_deref();
                        fields.push((
                            linked.field.clone(),
                            toml_value(&linked.values[i], linked_unit),
                        ));
                    }
                    let join = |a: &str, b: &str| {
                        if a.is_empty() {
                            b.to_string()
                        } else {
                            format!("{a}, {b}")
                        }
                    };
                    next.push(Point {
                        label: join(&point.label, &words),
                        fields,
                        x: if d == 0 { value.x(i) } else { point.x },
                        rest: if d == 0 {
                            String::new()
                        } else {
                            join(&point.rest, &words)
                        },
                    });
                }
            }
            points = next;
        }
        points
    }
}

/// The most points one swept variant may have.
pub(crate) const MAX_POINTS: usize = 100_000;

/// The last part of a dotted field.
fn leaf(field: &str) -> &str {
    field.rsplit('.').next().unwrap_or(field)
}

/// A value as a name shows it: `20Mbit/s`, `0.2`, `cellular/ATT-LTE-driving.down`.
fn text(value: &Value, unit: Option<&str>) -> String {
    match value {
        Value::Number(value) => format!("{value}{}", unit.unwrap_or("")),
        Value::Text(text) => text.clone(),
    }
}

/// A value as the file would write it: a quantity with its unit, a whole
/// number as an integer (so integer fields can be swept), else a float; a
/// string as it is.
fn toml_value(value: &Value, unit: Option<&str>) -> toml::Value {
    let value = match value {
        Value::Text(text) => return toml::Value::String(text.clone()),
        Value::Number(value) => *value,
    };
    match unit {
        Some(unit) => toml::Value::String(format!("{value}{unit}")),
        None if value.fract() == 0.0 && value.abs() < 1e15 => toml::Value::Integer(value as i64),
        None => toml::Value::Float(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_product_of_two_dimensions_with_a_linked_field() {
        let table: toml::Table = toml::from_str(
            r#"sweep = [
                { field = "flows.0.count", values = [2, 3], with = [{ field = "hops.far.rate", values = [40, 60], unit = "Mbit/s" }] },
                { field = "hops.far.buffer.bdp", values = [0.5, 2] },
            ]"#,
        )
        .unwrap();
        let toml::Value::Array(items) = table["sweep"].clone() else {
            panic!("an array");
        };
        let dimensions = items.into_iter().map(|v| v.try_into().unwrap()).collect();
        let sweep = Sweep::Product(dimensions);
        assert!(sweep.problem().is_none());
        let points = sweep.points();
        let labels: Vec<&str> = points.iter().map(|p| p.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "count = 2, bdp = 0.5",
                "count = 2, bdp = 2",
                "count = 3, bdp = 0.5",
                "count = 3, bdp = 2"
            ]
        );
        assert_eq!(points[3].x, 3.0);
        assert_eq!(points[3].rest, "bdp = 2");
        assert_eq!(
            points[2].fields[1].1,
            toml::Value::String("60Mbit/s".into())
        );
    }

    #[test]
    fn strings_are_set_as_written_at_their_positions() {
        let table: toml::Table = toml::from_str(
            r#"sweep = { field = "hops.c.trace", values = ["a.up", "b.down"], with = [{ field = "hops.c.reverse_trace", values = ["a.down", "b.up"] }, { field = "hops.w.delay", values = [5, 20], unit = "ms" }] }"#,
        )
        .unwrap();
        let sweep = Sweep::One(table["sweep"].clone().try_into().unwrap());
        assert!(sweep.problem().is_none());
        let points = sweep.points();
        assert_eq!(points[1].label, "trace = b.down");
        assert_eq!(points[1].x, 1.0);
        assert_eq!(points[1].fields[0].1, toml::Value::String("b.down".into()));
        assert_eq!(points[1].fields[1].1, toml::Value::String("b.up".into()));
        assert_eq!(points[0].fields[2].1, toml::Value::String("5ms".into()));
        let with_unit: toml::Table =
            toml::from_str(r#"sweep = { field = "hops.c.trace", values = ["a", 2], unit = "ms" }"#)
                .unwrap();
        let sweep = Sweep::One(with_unit["sweep"].clone().try_into().unwrap());
        assert_eq!(sweep.problem().map(|(field, _)| field), Some("unit".into()));
    }
}
