//! Captures of chosen trials (`--capture`): for each, a pcapng per named
//! hop with the endpoints' TLS secrets inside, and a qlog per QUIC
//! endpoint of pepkit's own (`docs/capture.md`).
//!
//! A [`CaptureRequest`] is one `--capture` flag: which hops, which
//! variant and which trials; several flags add up. [`Captures`] is what a
//! run is given (the requests and where files go); each variant resolves
//! it once against its scenario ([`Captures::for_variant`]) into the
//! trials it captures and their hops, so a sweep of a thousand trials
//! writes only what was asked. Capturing observes without changing the
//! run: the trial's results are byte-identical with and without it.

mod qlog;
mod trial;

pub use qlog::{QLOG_REQUIRED, check_record, records, tidy};
pub(crate) use trial::TrialCapture;

use crate::outcome::slug;
use crate::scenario::Scenario;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// A variant as a `--capture` names it: by its name, or by its position
/// among the file's variants (from 1, sweeps expanded, as `summary.md`
/// lists them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VariantRef {
    /// Its exact name.
    Name(String),
    /// Its position, from 1.
    Index(usize),
}

/// One `--capture` flag: `hops=NAME,…;variant=NAME|N;trials=I,J,K-L`, each
/// part optional (all hops; every variant; trial 0, the first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureRequest {
    /// The hops captured (empty: every hop of the path).
    pub hops: Vec<String>,
    /// The variant captured (`None`: every variant).
    pub variant: Option<VariantRef>,
    /// The trials captured, numbered as the trial files are (from 0).
    pub trials: Vec<u32>,
}

impl Default for CaptureRequest {
    fn default() -> Self {
        CaptureRequest {
            hops: Vec::new(),
            variant: None,
            trials: vec![0],
        }
    }
}

/// The most trials one `--capture` may list (a range included).
const MAX_LISTED: u32 = 100_000;

impl FromStr for CaptureRequest {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut request = CaptureRequest::default();
        let mut seen = Vec::new();
        for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((key, value)) = part.split_once('=') else {
                return Err(format!(
                    "`{part}` is not KEY=VALUE (keys: hops, variant, trials)"
                ));
            };
            let (key, value) = (key.trim(), value.trim());
            if seen.contains(&key) {
                return Err(format!("`{key}` is given twice"));
            }
            seen.push(key);
            if value.is_empty() {
                return Err(format!("`{key}` has no value"));
            }
            match key {
                "hops" => {
                    request.hops = value.split(',').map(|h| h.trim().to_string()).collect();
                    if request.hops.iter().any(String::is_empty) {
                        return Err(format!("`hops={value}` has an empty hop name"));
                    }
                }
                "variant" => {
                    request.variant = Some(match value.parse::<usize>() {
                        Ok(0) => return Err("variants are numbered from 1".into()),
                        Ok(index) => VariantRef::Index(index),
                        Err(_) => VariantRef::Name(value.to_string()),
                    });
                }
                "trials" => request.trials = trials(value)?,
                other => {
                    return Err(format!(
                        "unknown key `{other}` (keys: hops, variant, trials)"
                    ));
                }
            }
        }
        Ok(request)
    }
}

/// `1,3,5-7` → [1, 3, 5, 6, 7], sorted, without repeats.
fn trials(value: &str) -> Result<Vec<u32>, String> {
    let number = |text: &str| {
        text.trim().parse::<u32>().map_err(|_| {
            format!(
                "`{}` in `trials={value}` is not a trial number",
                text.trim()
            )
        })
    };
    let mut out = Vec::new();
    for item in value.split(',') {
        let (first, last) = match item.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => (number(item)?, number(item)?),
        };
        if last < first {
            return Err(format!("`{}` in `trials={value}` is empty", item.trim()));
        }
        if last - first >= MAX_LISTED || out.len() as u32 >= MAX_LISTED {
            return Err(format!(
                "`trials={value}` lists more than {MAX_LISTED} trials"
            ));
        }
        out.extend(first..=last);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

impl fmt::Display for CaptureRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if !self.hops.is_empty() {
            parts.push(format!("hops={}", self.hops.join(",")));
        }
        match &self.variant {
            Some(VariantRef::Name(name)) => parts.push(format!("variant={name}")),
            Some(VariantRef::Index(index)) => parts.push(format!("variant={index}")),
            None => {}
        }
        let trials: Vec<String> = self.trials.iter().map(u32::to_string).collect();
        parts.push(format!("trials={}", trials.join(",")));
        f.write_str(&parts.join(";"))
    }
}

/// What a run captures: the requests (one per `--capture`) and the
/// directory the files go under (`<dir>/<variant>/trial-<i>/`).
#[derive(Clone, Debug)]
pub struct Captures {
    /// The requests; a trial is captured if any asks for it, at the union
    /// of their hops.
    pub requests: Vec<CaptureRequest>,
    /// Where the files go (`pepkit run` gives `<out>/captures`).
    pub dir: PathBuf,
}

/// What one variant captures: its trials and, for each, the hops.
#[derive(Clone, Debug, Default)]
pub(crate) struct VariantCapture {
    /// Trial → hop indices into the path, in path order.
    trials: BTreeMap<u32, Vec<usize>>,
    /// The variant's directory.
    dir: PathBuf,
}

impl VariantCapture {
    /// The hops to capture in trial `trial`, if it is captured.
    pub(crate) fn hops(&self, trial: u32) -> Option<&[usize]> {
        self.trials.get(&trial).map(Vec::as_slice)
    }

    /// The directory of trial `trial`'s files.
    pub(crate) fn dir(&self, trial: u32) -> PathBuf {
        self.dir.join(format!("trial-{trial}"))
    }
}

impl Captures {
    /// Checks every request's variant against `variants` (the file's
    /// names, in order); an error names the request and the choices.
    pub fn check_variants(&self, variants: &[&str]) -> Result<(), String> {
        for request in &self.requests {
            let found = match &request.variant {
                None => true,
                Some(VariantRef::Index(index)) => *index <= variants.len(),
                Some(VariantRef::Name(name)) => variants.contains(&name.as_str()),
            };
            if !found {
                return Err(format!(
                    "--capture {request}: no such variant; the variants are {}",
                    numbered(variants)
                ));
            }
        }
        Ok(())
    }

    /// What variant `name` (number `index` from 1 in the file) of
    /// `scenario` captures: `Ok(None)` if nothing; an error if a request
    /// that applies to it names a hop its path lacks.
    pub(crate) fn for_variant(
        &self,
        index: usize,
        name: &str,
        scenario: &Scenario,
    ) -> Result<Option<VariantCapture>, String> {
        let mut trials: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for request in &self.requests {
            let applies = match &request.variant {
                None => true,
                Some(VariantRef::Index(i)) => *i == index,
                Some(VariantRef::Name(n)) => n == name,
            };
            if !applies {
                continue;
            }
            let mut hops = Vec::new();
            for hop in &request.hops {
                match scenario.path.iter().position(|h| &h.name == hop) {
                    Some(at) => hops.push(at),
                    None => {
                        let names: Vec<&str> =
                            scenario.path.iter().map(|h| h.name.as_str()).collect();
                        return Err(format!(
                            "--capture {request}: variant \"{name}\" has no hop `{hop}`; its hops are {names:?}"
                        ));
                    }
                }
            }
            if request.hops.is_empty() {
                hops = (0..scenario.path.len()).collect();
            }
            for &trial in request.trials.iter().filter(|&&t| t < scenario.trials) {
                let entry = trials.entry(trial).or_default();
                entry.extend(&hops);
                entry.sort_unstable();
                entry.dedup();
            }
        }
        Ok((!trials.is_empty()).then(|| VariantCapture {
            trials,
            dir: self.dir.join(slug(name)),
        }))
    }
}

/// `1 "A", 2 "B"`.
fn numbered(names: &[&str]) -> String {
    let listed: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, n)| format!("{} {n:?}", i + 1))
        .collect();
    listed.join(", ")
}

/// Writes `bytes` to `dir/name`, creating `dir`.
pub(crate) fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(name), bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_and_print_back() {
        let all: CaptureRequest = "".parse().unwrap();
        assert_eq!(all, CaptureRequest::default());
        let r: CaptureRequest = "hops=near,far; variant=QUIC e2e, 1% loss; trials=0,3-5,3"
            .parse()
            .unwrap();
        assert_eq!(r.hops, ["near", "far"]);
        assert_eq!(
            r.variant,
            Some(VariantRef::Name("QUIC e2e, 1% loss".into()))
        );
        assert_eq!(r.trials, [0, 3, 4, 5]);
        assert_eq!(
            r.to_string(),
            "hops=near,far;variant=QUIC e2e, 1% loss;trials=0,3,4,5"
        );
        let r: CaptureRequest = "variant=2".parse().unwrap();
        assert_eq!(r.variant, Some(VariantRef::Index(2)));
    }

    #[test]
    fn malformed_requests_say_what_is_wrong() {
        let error = |text: &str| text.parse::<CaptureRequest>().unwrap_err();
        assert!(error("hops").contains("not KEY=VALUE"));
        assert!(error("trials=1;trials=2").contains("given twice"));
        assert!(error("trials=x").contains("`x` in `trials=x` is not a trial number"));
        assert!(error("trials=5-3").contains("is empty"));
        assert!(error("variant=0").contains("from 1"));
        assert!(error("colour=red").contains("unknown key `colour`"));
        assert!(error("hops=a,,b").contains("empty hop name"));
        assert!(error("trials=0-4000000000").contains("more than"));
    }
}
