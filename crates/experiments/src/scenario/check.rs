//! A scenario's claims: `[[check]]` tables that state what the paper found
//! as a bound on a variant's median, alone or relative to another variant's,
//! so that every run says whether the paper's result held.
//!
//! ```toml
//! [[check]]
//! claim = "with 1% near loss, Sidekick gets at least 3x QUIC's goodput"
//! metric = "goodput_mbps"
//! variant = "QUIC + Sidekick, 1% loss"
//! ratio_to = "QUIC e2e, 1% loss"   # optional: bound median(variant) / median(ratio_to)
//! # minus = "..."                  # or: bound median(variant) − median(minus)
//! at_least = 3.0                   # and/or at_most
//! # statistic = "max"              # bound the largest trial's value instead
//! # gap = "docs/results/tecc.md#table-2-client-delays"  # where a failure is explained
//! ```
//!
//! Over a swept variant's points (its *series*): `across = "min"`,
//! `"max"` or `"median"` bounds that statistic of the points' medians,
//! and `crossing = 45` bounds the smallest swept value at which the median
//! reaches 45 (no value if it never does); `variant` and `ratio_to` then
//! name series.

use serde::{Deserialize, Serialize};

/// One claim, as the scenario file states it.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Check {
    /// The claim in words, as the report prints it.
    pub claim: String,
    /// The metric whose median is bounded.
    pub metric: String,
    /// The variant it is read from.
    pub variant: String,
    /// If given, the bound applies to the ratio of the two medians.
    #[serde(default)]
    pub ratio_to: Option<String>,
    /// If given, the bound applies to the difference of the two medians
    /// (what `variant` adds to a baseline measured the same way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minus: Option<String>,
    /// The smallest value that passes.
    #[serde(default)]
    pub at_least: Option<f64>,
    /// The largest value that passes.
    #[serde(default)]
    pub at_most: Option<f64>,
    /// Only evaluate in this mode (`simulator` or `real`; default both).
    #[serde(default)]
    pub mode: Option<crate::outcome::Mode>,
    /// Which value of each variant is bounded (default: the median).
    #[serde(default, skip_serializing_if = "Statistic::is_median")]
    pub statistic: Statistic,
    /// Read this statistic of a series' point medians instead of one
    /// variant's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub across: Option<Statistic>,
    /// Read the smallest swept value at which a series' median reaches
    /// this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crossing: Option<f64>,
    /// Where a failure of this claim is explained (a doc's section,
    /// `docs/results/tecc.md#figure-2-…`): the report names it beside the
    /// verdict, so a reader of a failed run finds why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap: Option<String>,
}

/// Which value of a variant's trials a check bounds (`statistic`), or of
/// a series' point medians (`across`).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Statistic {
    /// The median.
    #[default]
    Median,
    /// The smallest value (of trials: a claim on every run with `at_least`).
    Min,
    /// The largest value (of trials: a claim on every run with `at_most`).
    Max,
}

impl Statistic {
    fn is_median(&self) -> bool {
        *self == Statistic::Median
    }
}

impl Check {
    /// Whether `variant` and `ratio_to` name series (swept variants).
    pub fn over_series(&self) -> bool {
        self.across.is_some() || self.crossing.is_some()
    }

    /// The other variant the value is relative to (`ratio_to` or
    /// `minus`), if any.
    pub fn baseline(&self) -> Option<&str> {
        self.ratio_to.as_deref().or(self.minus.as_deref())
    }
}

impl Check {
    /// What is wrong with this check against the file's variant and
    /// series names, if anything: `(field, message)`.
    pub fn problem(&self, variants: &[&str], series: &[&str]) -> Option<(&'static str, String)> {
        if self.at_least.is_none() && self.at_most.is_none() {
            return Some(("at_least", "give `at_least`, `at_most` or both".into()));
        }
        if self.ratio_to.is_some() && self.minus.is_some() {
            return Some(("minus", "give `ratio_to` or `minus`, not both".into()));
        }
        if self.across.is_some() && self.crossing.is_some() {
            return Some(("crossing", "give `across` or `crossing`, not both".into()));
        }
        if self.over_series() && self.statistic != Statistic::Median {
            return Some((
                "statistic",
                "a check over a series reads its points' medians; use `across`".into(),
            ));
        }
        let names = if self.over_series() { series } else { variants };
        let known = |name: &str| names.contains(&name);
        let what = if self.over_series() {
            "swept variant (series)"
        } else {
            "variant"
        };
        if !known(&self.variant) {
            return Some(("variant", format!("no {what} is called {:?}", self.variant)));
        }
        let field = if self.minus.is_some() {
            "minus"
        } else {
            "ratio_to"
        };
        match self.baseline() {
            Some(other) if !known(other) => Some((field, format!("no {what} is called {other:?}"))),
            _ => None,
        }
    }

    /// The bound in words: "≥ 3× QUIC e2e", "≤ 25", "0.95–1.05× …",
    /// "max ≤ 1.1".
    pub fn bound(&self) -> String {
        let of = match (&self.ratio_to, &self.minus) {
            (Some(other), _) => format!("× {other}"),
            (None, Some(other)) => format!(" above {other}"),
            (None, None) => String::new(),
        };
        let which = match self.statistic {
            Statistic::Median => "",
            Statistic::Min => "min ",
            Statistic::Max => "max ",
        };
        let bound = match (self.at_least, self.at_most) {
            (Some(low), Some(high)) => format!("{low}–{high}{of}"),
            (Some(low), None) => format!("≥ {low}{of}"),
            (None, Some(high)) => format!("≤ {high}{of}"),
            (None, None) => String::new(),
        };
        format!("{which}{bound}")
    }
}
