//! A scenario file: the base document, its `[[variant]]`s merged over it
//! (sweeps expanded into one variant per value), and its `[[check]]`s.

use super::Scenario;
use super::check::Check;
use super::error::{ScenarioError, field_error, first_line, last_key, parent, remove};
use super::overrides::{Override, Shadowed, Target, lookup, set};
use super::raw::RawScenario;
use super::sweep::{Dimension, Sweep, SweepPoint};
use crate::figure::Plot;
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

/// The largest scenario file read (a scenario is a page of TOML; this
/// stops `pepkit run /dev/zero`).
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// The longest variant name (it appears in every table and file name).
const MAX_VARIANT_NAME: usize = 200;

/// One variant of a scenario, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Variant {
    /// Its name, as in tables and legends.
    pub name: String,
    /// The paper's value of each metric, where the scenario gives one.
    pub paper: BTreeMap<String, f64>,
    /// For a point of a sweep: the swept variant's name and the value.
    pub sweep: Option<SweepPoint>,
    /// The scenario with the variant's changes applied.
    pub scenario: Scenario,
}

impl Variant {
    /// Whether `names` names it: its own name, or its swept variant's (a
    /// series names all its points).
    pub fn is_named_by(&self, names: &[String]) -> bool {
        names.contains(&self.name)
            || self
                .sweep
                .as_ref()
                .is_some_and(|point| names.contains(&point.series))
    }
}

/// A loaded scenario file: the base and its variants.
#[derive(Clone, Debug)]
pub struct ScenarioFile {
    /// Where it was read from (traces are relative to its directory).
    pub path: PathBuf,
    /// The base scenario (what a variant without changes runs).
    pub base: Scenario,
    /// The variants, in file order; one called after the scenario when
    /// the file has none.
    pub variants: Vec<Variant>,
    /// The paper's claims to test the results against (`[[check]]`).
    pub checks: Vec<Check>,
    /// How `pepkit reproduce --quick` runs this file (`[quick]`); files
    /// without it are left out of a quick reproduction.
    pub quick: Option<Quick>,
    /// The `--set` overrides it was read with, in order (empty: as
    /// written).
    pub overrides: Vec<Override>,
    /// Overrides of the base that some variants do not see, because they
    /// set the field themselves.
    pub shadowed: Vec<Shadowed>,
    /// Where each override landed, to name it in errors.
    targets: Vec<Target>,
}

/// A file's part in a quick reproduction (`[quick]`): fewer trials, maybe
/// fewer variants, maybe real mode too.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Quick {
    /// Trials per variant (default 1).
    #[serde(default = "one_trial")]
    pub trials: u32,
    /// Only these variants, by name (a swept variant's name: all its
    /// points; default: all).
    #[serde(default)]
    pub variants: Vec<String>,
    /// Also run them in real mode (default false).
    #[serde(default)]
    pub real: bool,
}

fn one_trial() -> u32 {
    1
}

impl ScenarioFile {
    /// Reads and checks a scenario file.
    pub fn load(path: impl AsRef<Path>) -> Result<ScenarioFile, ScenarioError> {
        ScenarioFile::load_with(path, &[])
    }

    /// Reads a scenario file, edits it with `overrides` (`--set`) and
    /// checks it.
    pub fn load_with(
        path: impl AsRef<Path>,
        overrides: &[Override],
    ) -> Result<ScenarioFile, ScenarioError> {
        let path = path.as_ref().to_path_buf();
        let read = |source| ScenarioError::Read {
            path: path.clone(),
            source,
        };
        let text = read_bounded(&path).map_err(read)?;
        ScenarioFile::parse_with(&text, path, overrides)
    }

    /// Parses and checks scenario text; `path` names it in errors and
    /// anchors relative trace paths.
    pub fn parse(text: &str, path: PathBuf) -> Result<ScenarioFile, ScenarioError> {
        ScenarioFile::parse_with(text, path, &[])
    }

    /// Parses scenario text, edits it with `overrides` (`--set`, in order)
    /// and checks it. An error the edits may have caused says so.
    pub fn parse_with(
        text: &str,
        path: PathBuf,
        overrides: &[Override],
    ) -> Result<ScenarioFile, ScenarioError> {
        let mut document: toml::Table =
            toml::from_str(text).map_err(|error| ScenarioError::Syntax {
                path: path.clone(),
                message: error.to_string(),
            })?;
        let mut targets = Vec::with_capacity(overrides.len());
        for set in overrides {
            let target = set.apply(&mut document).map_err(|message| {
                let message = format!("--set {set} cannot be applied: {message}");
                field_error(&path, "", &set.path(), &message)
            })?;
            targets.push(target);
        }
        read(document, path, overrides, &targets)
            .map_err(|error| note_overrides(error, overrides, &targets, true))
    }

    /// `error` (from running this file: a trace, a controller) with the
    /// `--set` overrides that concern its field named.
    pub fn note_overrides(&self, error: ScenarioError) -> ScenarioError {
        note_overrides(error, &self.overrides, &self.targets, false)
    }

    /// The directory relative paths in the file are resolved against.
    pub fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }
}

/// Reads the document as `overrides` (which landed at `targets`) edited
/// it: the base, its variants, checks and `[quick]`, and which overrides
/// some variants do not see.
fn read(
    mut document: toml::Table,
    path: PathBuf,
    overrides: &[Override],
    targets: &[Target],
) -> Result<ScenarioFile, ScenarioError> {
    let variant_tables = take_array(&mut document, &path, "variant")?;
    let check_tables = take_array(&mut document, &path, "check")?;
    let quick = document.remove("quick");
    // Every independent error is collected, so that one reading names
    // them all; a variant's errors that repeat the base's are not repeated.
    let mut errors: Vec<ScenarioError> = Vec::new();
    let base = match resolve(&path, "", toml::Value::Table(document.clone())) {
        Ok(base) => Some(base),
        Err(found) => {
            errors.extend(found);
            None
        }
    };
    let mut variants = Vec::new();
    let mut names = HashSet::new();
    // The names of variants that failed, which checks may still name.
    let mut failed_names: Vec<String> = Vec::new();
    let mut reach = Reach {
        overrides,
        targets,
        unseen: vec![Vec::new(); overrides.len()],
    };
    for (index, value) in variant_tables.into_iter().enumerate() {
        let before = variants.len();
        let name = value
            .get("name")
            .and_then(toml::Value::as_str)
            .map(str::to_string);
        if let Err(found) = parse_variant(&path, &document, index, value, &mut variants, &mut reach)
        {
            add_new(&mut errors, found);
            failed_names.extend(name);
            continue;
        }
        for variant in &variants[before..] {
            if !names.insert(variant.name.clone()) {
                let context = format!("variant \"{}\": ", variant.name);
                errors.push(field_error(
                    &path,
                    &context,
                    "name",
                    "two variants have this name",
                ));
            }
        }
    }
    if variants.is_empty()
        && failed_names.is_empty()
        && let Some(base) = &base
    {
        variants.push(Variant {
            name: base.name.clone(),
            paper: BTreeMap::new(),
            sweep: None,
            scenario: base.clone(),
        });
    }
    let plots = base.as_ref().map_or(&[][..], |base| &base.plots[..]);
    if let Some(index) = plots
        .iter()
        .position(|plot| matches!(plot, Plot::Lines { .. }))
        && variants.iter().all(|v| v.sweep.is_none())
        && failed_names.is_empty()
    {
        errors.push(field_error(
            &path,
            "",
            &format!("plots[{index}]"),
            "a lines plot needs variants with `sweep = { field, values }`",
        ));
    }
    let mut names: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();
    names.extend(failed_names.iter().map(String::as_str));
    for (index, plot) in plots.iter().enumerate() {
        if let Plot::Series { variants: only, .. } = plot
            && let Some(unknown) = only.iter().find(|name| !names.contains(&name.as_str()))
        {
            errors.push(field_error(
                &path,
                "",
                &format!("plots[{index}].variants"),
                &format!("no variant is called {unknown:?}"),
            ));
        }
    }
    let mut series: Vec<&str> = failed_names.iter().map(String::as_str).collect();
    for variant in &variants {
        if let Some(point) = &variant.sweep
            && !series.contains(&point.series.as_str())
        {
            series.push(&point.series);
        }
    }
    let mut checks = Vec::new();
    for (index, value) in check_tables.into_iter().enumerate() {
        match parse_check(&path, index, value, &names, &series) {
            Ok(check) => checks.push(check),
            Err(error) => errors.push(error),
        }
    }
    let quick =
        match quick.map(|value| parse_quick(&path, value, &[&names[..], &series[..]].concat())) {
            None => None,
            Some(Ok(quick)) => Some(quick),
            Some(Err(error)) => {
                errors.push(error);
                None
            }
        };
    let base = match base {
        Some(base) if errors.is_empty() => base,
        _ => return Err(ScenarioError::from_all(errors)),
    };
    let shadowed = overrides
        .iter()
        .zip(reach.unseen)
        .filter(|(_, variants)| !variants.is_empty())
        .map(|(set, variants)| Shadowed {
            set: set.clone(),
            variants,
        })
        .collect();
    Ok(ScenarioFile {
        path,
        base,
        variants,
        checks,
        quick,
        overrides: overrides.to_vec(),
        shadowed,
        targets: targets.to_vec(),
    })
}

/// The keys of a `[[variant]]` that are the variant's own rather than
/// scenario fields: `parse_variant` takes them out before merging.
const VARIANT_KEYS: [&str; 3] = ["name", "paper", "sweep"];

/// Which variants each override reaches: a variant's value of the field,
/// after its own settings and its sweep, is the override's or it is not.
struct Reach<'a> {
    overrides: &'a [Override],
    targets: &'a [Target],
    /// Per override, the variants that keep their own value.
    unseen: Vec<Vec<String>>,
}

impl Reach<'_> {
    /// Notes the overrides `[[variant]]` number `index`, called `name`,
    /// does not see in `table` (it, or one point of its sweep, merged).
    fn check(&mut self, index: usize, name: &str, table: &toml::Table) {
        for set in 0..self.overrides.len() {
            let field = match &self.targets[set] {
                Target::Base(field) => field,
                // The variant's own keys (its name, paper values and
                // sweep) are taken out before merging, and always reach it.
                Target::Variant(of, field)
                    if *of == index
                        && field
                            .first()
                            .is_some_and(|key| VARIANT_KEYS.contains(&key.as_str())) =>
                {
                    continue;
                }
                Target::Variant(of, field) if *of == index => field,
                _ => continue,
            };
            let unseen = &mut self.unseen[set];
            if lookup(table, field) != Some(self.overrides[set].value())
                && unseen.last().is_none_or(|last| last != name)
            {
                unseen.push(name.to_string());
            }
        }
    }
}

/// `error` with the `--set` overrides that concern its field named; when
/// none does, all of them if `edited_file` (the edited file failed to
/// read), else none (a run's error, such as `--only` matching nothing).
fn note_overrides(
    error: ScenarioError,
    overrides: &[Override],
    targets: &[Target],
    edited_file: bool,
) -> ScenarioError {
    if let ScenarioError::Several(errors) = error {
        return ScenarioError::Several(
            errors
                .into_iter()
                .map(|error| note_overrides(error, overrides, targets, edited_file))
                .collect(),
        );
    }
    let ScenarioError::Field {
        path,
        context,
        field,
        message,
    } = error
    else {
        return error;
    };
    let concerned: Vec<&Override> = overrides
        .iter()
        .zip(targets)
        .filter(|(set, target)| set.concerns(target, &field))
        .map(|(set, _)| set)
        .collect();
    if overrides.is_empty() || (concerned.is_empty() && !edited_file) {
        return ScenarioError::Field {
            path,
            context,
            field,
            message,
        };
    }
    let list = |sets: Vec<&Override>| {
        sets.iter()
            .map(|set| format!("--set {set}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let note = if concerned.is_empty() {
        format!("the file edited with {}", list(overrides.iter().collect()))
    } else {
        format!("from {}", list(concerned))
    };
    ScenarioError::Field {
        path,
        context,
        field,
        message: format!("{message} ({note})"),
    }
}

/// Reads at most [`MAX_FILE_BYTES`] of `path` as text.
fn read_bounded(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    let file = std::fs::File::open(path)?;
    file.take(MAX_FILE_BYTES + 1).read_to_string(&mut text)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(std::io::Error::other(format!(
            "larger than {} KiB; a scenario file is a page of TOML",
            MAX_FILE_BYTES >> 10
        )));
    }
    Ok(text)
}

/// Removes `[[key]]` from the document: its tables, in order.
fn take_array(
    document: &mut toml::Table,
    path: &Path,
    key: &str,
) -> Result<Vec<toml::Value>, ScenarioError> {
    match document.remove(key) {
        None => Ok(Vec::new()),
        Some(toml::Value::Array(tables)) => Ok(tables),
        Some(_) => Err(field_error(
            path,
            "",
            key,
            &format!("must be an array of tables, written [[{key}]]"),
        )),
    }
}

/// Variant `index`, merged over `document`: one variant, or one per value
/// of its sweep, appended to `variants`.
fn parse_variant(
    path: &Path,
    document: &toml::Table,
    index: usize,
    value: toml::Value,
    variants: &mut Vec<Variant>,
    reach: &mut Reach<'_>,
) -> Result<(), Vec<ScenarioError>> {
    let fallback = format!("variant[{index}]");
    let toml::Value::Table(mut table) = value else {
        return Err(vec![field_error(path, "", &fallback, "must be a table")]);
    };
    let name = match table.remove("name") {
        Some(toml::Value::String(name)) => name,
        Some(_) => {
            let field = format!("{fallback}.name");
            return Err(vec![field_error(path, "", &field, "must be a string")]);
        }
        None => {
            let field = format!("{fallback}.name");
            return Err(vec![field_error(
                path,
                "",
                &field,
                "every variant needs a name",
            )]);
        }
    };
    if name.chars().count() > MAX_VARIANT_NAME {
        let field = format!("{fallback}.name");
        let message = format!("has more than {MAX_VARIANT_NAME} characters");
        return Err(vec![field_error(path, "", &field, &message)]);
    }
    let context = format!("variant \"{name}\": ");
    let paper = match table.remove("paper") {
        None => BTreeMap::new(),
        Some(value) => deserialize::<BTreeMap<String, f64>>(value, |field, message| {
            let hint = "(the paper's value of each metric, a number)";
            field_error(
                path,
                &context,
                &format!("paper.{field}"),
                &format!("{message} {hint}"),
            )
        })
        .map_err(|e| vec![e])?,
    };
    let sweep = match table.remove("sweep") {
        None => None,
        Some(value) => Some(parse_sweep(path, &context, value).map_err(|e| vec![e])?),
    };
    let mut merged = document.clone();
    merge(&mut merged, table);
    let Some(sweep) = sweep else {
        reach.check(index, &name, &merged);
        let scenario = resolve(path, &context, toml::Value::Table(merged))?;
        variants.push(Variant {
            name,
            paper,
            sweep: None,
            scenario,
        });
        return Ok(());
    };
    if !paper.is_empty() {
        return Err(vec![field_error(
            path,
            &context,
            "paper",
            "a swept variant has no single paper value; give the paper's points as separate \
             variants",
        )]);
    }
    let name_of_series = name;
    let mut errors = Vec::new();
    for point in sweep.points() {
        let name = format!("{name_of_series}, {}", point.label);
        let point_context = format!("variant \"{name}\": ");
        let mut swept = merged.clone();
        for (field, value) in point.fields {
            let keys: Vec<String> = field.split('.').map(str::to_string).collect();
            set(&mut swept, &keys, value).map_err(|message| {
                let message = format!("the sweep cannot set it: {message}");
                vec![field_error(path, &point_context, &field, &message)]
            })?;
        }
        reach.check(index, &name_of_series, &swept);
        let scenario = match resolve(path, &point_context, toml::Value::Table(swept)) {
            Ok(scenario) => scenario,
            Err(found) => {
                add_new(&mut errors, found);
                continue;
            }
        };
        variants.push(Variant {
            name,
            paper: BTreeMap::new(),
            sweep: Some(SweepPoint {
                series: name_of_series.clone(),
                field: sweep.field().to_string(),
                x: point.x,
                rest: point.rest,
            }),
            scenario,
        });
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

fn parse_sweep(path: &Path, context: &str, value: toml::Value) -> Result<Sweep, ScenarioError> {
    let hint = "(sweep = { field = \"hops.near.loss\", values = [0, 0.01] }: a dotted field, \
                its values (numbers, optionally with their `unit`, such as \"ms\", or \
                strings) and fields set \
                `with` them; or a list of such tables, one per dimension)";
    let dimension = |value: toml::Value, at: String| {
        deserialize::<Dimension>(value, |field, message| {
            field_error(
                path,
                context,
                &format!("{at}.{field}"),
                &format!("{message} {hint}"),
            )
        })
    };
    let sweep = match value {
        toml::Value::Array(items) => Sweep::Product(
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| dimension(item, format!("sweep[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        other => Sweep::One(dimension(other, "sweep".into())?),
    };
    if let Some((field, message)) = sweep.problem() {
        let dot = if field.starts_with('[') || field.is_empty() {
            ""
        } else {
            "."
        };
        return Err(field_error(
            path,
            context,
            &format!("sweep{dot}{field}"),
            &message,
        ));
    }
    Ok(sweep)
}

/// Check `index`, with the variant names it may refer to.
fn parse_check(
    path: &Path,
    index: usize,
    value: toml::Value,
    names: &[&str],
    series: &[&str],
) -> Result<Check, ScenarioError> {
    let field = format!("check[{index}]");
    let check = deserialize::<Check>(value, |inner, message| {
        field_error(
            path,
            "",
            &format!("{field}.{inner}"),
            &format!(
                "{message} (a check has claim, metric, variant, optional ratio_to or minus, \
                 at_least and/or at_most, across or crossing)"
            ),
        )
    })?;
    if let Some((name, message)) = check.problem(names, series) {
        return Err(field_error(path, "", &format!("{field}.{name}"), &message));
    }
    Ok(check)
}

/// The `[quick]` table, with the variant names it may refer to.
fn parse_quick(path: &Path, value: toml::Value, names: &[&str]) -> Result<Quick, ScenarioError> {
    let quick = deserialize::<Quick>(value, |field, message| {
        field_error(
            path,
            "",
            &format!("quick.{field}"),
            &format!("{message} ([quick] has trials, variants and real)"),
        )
    })?;
    if quick.trials == 0 || quick.trials > super::MAX_TRIALS {
        let message = format!("{} is outside 1..={}", quick.trials, super::MAX_TRIALS);
        return Err(field_error(path, "", "quick.trials", &message));
    }
    if let Some(unknown) = quick.variants.iter().find(|v| !names.contains(&v.as_str())) {
        let message = format!("no variant is called {unknown:?}");
        return Err(field_error(path, "", "quick.variants", &message));
    }
    Ok(quick)
}

/// Deserialises `value`, or makes an error with `error(field path, message)`.
fn deserialize<T: for<'de> Deserialize<'de>>(
    value: toml::Value,
    error: impl FnOnce(&str, &str) -> ScenarioError,
) -> Result<T, ScenarioError> {
    let mut track = serde_path_to_error::Track::new();
    let de = serde_path_to_error::Deserializer::new(value, &mut track);
    T::deserialize(de).map_err(|e| error(&track.path().to_string(), first_line(&e.to_string())))
}

/// Overlays `over` onto `base`, table by table; other values are replaced,
/// and so is a tagged table whose tag changes (`middle = { kind = "split"
/// }` over a sidekick's table does not inherit the sidekick's settings).
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(inner)), toml::Value::Table(over_inner))
                if same_tag(inner, &over_inner) =>
            {
                merge(inner, over_inner)
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// Whether two tables agree on their tags (`kind`, `name`) where `over`
/// gives one.
fn same_tag(base: &toml::Table, over: &toml::Table) -> bool {
    ["kind", "name"].iter().all(|tag| {
        over.get(*tag)
            .is_none_or(|value| base.get(*tag) == Some(value))
    })
}

/// The most errors one document reports (past it, the first ones are
/// enough to go on).
const MAX_ERRORS: usize = 20;

/// Deserialises a merged document and validates it, reporting every
/// error it can tell apart: a field the reader refuses is taken out and
/// the rest read again, so that the next one shows too; the checks that
/// span fields run when the fields taken out were all unknown (taking
/// those out changes no value, so whatever else they find is real).
fn resolve(
    path: &Path,
    context: &str,
    mut value: toml::Value,
) -> Result<Scenario, Vec<ScenarioError>> {
    let mut errors = Vec::new();
    let mut removed_only_unknown = true;
    let mut removed: Vec<String> = Vec::new();
    let raw = loop {
        let mut field = String::new();
        let mut message = String::new();
        match deserialize::<RawScenario>(value.clone(), |f, m| {
            field = f.to_string();
            message = m.to_string();
            field_error(path, context, f, m)
        }) {
            Ok(raw) => break Some(raw),
            Err(error) => {
                // A field missing because it was taken out is no news.
                let consequence = message.starts_with("missing field")
                    && removed
                        .iter()
                        .any(|gone| parent(gone) == field.trim_start_matches('.'));
                if !consequence {
                    errors.push(error);
                }
                let unknown = message.starts_with("unknown field")
                    && message.contains(&format!("`{}`", last_key(&field)));
                removed_only_unknown &= unknown;
                if consequence
                    || message.starts_with("missing field")
                    || errors.len() >= MAX_ERRORS
                    || removed.contains(&field)
                    || !remove(&mut value, &field)
                {
                    break None;
                }
                removed.push(field);
            }
        }
    };
    if let Some(raw) = raw
        && removed_only_unknown
    {
        match raw.validate() {
            Ok(scenario) if errors.is_empty() => return Ok(scenario),
            Ok(_) => {}
            Err((field, message)) => errors.push(field_error(path, context, &field, &message)),
        }
    }
    Err(errors)
}

/// Adds the errors of `found` that do not repeat one of `errors`.
fn add_new(errors: &mut Vec<ScenarioError>, found: Vec<ScenarioError>) {
    for error in found {
        if !errors.iter().any(|known| known.repeats(&error)) {
            errors.push(error);
        }
    }
}
