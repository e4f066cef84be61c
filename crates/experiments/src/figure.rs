//! The figures a scenario asks for (`[[plots]]`); `report::plot` draws
//! them.

use serde::{Deserialize, Serialize};

/// A figure to draw from the results.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Plot {
    /// The median of a metric per variant, with p25–p75 error bars.
    Bars {
        /// The metric.
        metric: String,
        /// The figure's title (default: the scenario's title).
        #[serde(default)]
        title: Option<String>,
    },
    /// A sampled connection variable over time (needs `sample_interval`),
    /// one line per variant, from one trial.
    Series {
        /// The variable: a `series` key of the trial files, such as
        /// `cwnd_bytes`.
        field: String,
        /// Which trial (default 0).
        #[serde(default)]
        trial: u32,
        /// Only these variants (default: all).
        #[serde(default)]
        variants: Vec<String>,
        /// The figure's title.
        #[serde(default)]
        title: Option<String>,
    },
    /// A metric against a swept field: per swept variant, a line through
    /// the medians with p25–p75 error bars (like Sidekick's Figure 6).
    Lines {
        /// The metric.
        metric: String,
        /// The figure's title.
        #[serde(default)]
        title: Option<String>,
        /// The x axis's label (default: the swept field).
        #[serde(default)]
        x_label: Option<String>,
        /// Multiply x values by this for the axis (e.g. 100 for percent).
        /// An x value is the swept number as the sweep writes it, in its
        /// `unit` if it has one (70 for `values = [70], unit =
        /// "Mbit/s"`), so a sweep with a unit rarely needs it.
        #[serde(default = "one")]
        x_scale: f64,
        /// A logarithmic x axis.
        #[serde(default)]
        x_log: bool,
    },
    /// Per swept variant, the distribution of a metric's medians over its
    /// points (like Proteus's Figure 8: the CDF across configurations).
    SweepCdf {
        /// The metric.
        metric: String,
        /// The figure's title.
        #[serde(default)]
        title: Option<String>,
    },
    /// Each flow's throughput over time (100 ms bins; needs `measure`), a
    /// panel per variant (like Proteus's Figure 14).
    Flows {
        /// Which trial (default 0).
        #[serde(default)]
        trial: u32,
        /// Only these variants (default: all).
        #[serde(default)]
        variants: Vec<String>,
        /// The figure's title.
        #[serde(default)]
        title: Option<String>,
    },
    /// The distribution of per-packet or per-frame values, one line per
    /// variant, all trials pooled.
    Cdf {
        /// The distribution (a `distributions` key of the trial files).
        distribution: String,
        /// The figure's title.
        #[serde(default)]
        title: Option<String>,
        /// Start the CDF axis here (default 0) to show a tail.
        #[serde(default)]
        y_from: f64,
    },
    /// The same as a histogram (the share of values per bin), one line per
    /// variant, all trials pooled (like Proteus's Figure 2).
    Pdf {
        /// The distribution.
        distribution: String,
        /// Another distribution pooled over every variant, drawn as one
        /// more line (a baseline all variants share).
        #[serde(default)]
        baseline: Option<String>,
        /// The baseline's name in the legend (default: its key).
        #[serde(default)]
        baseline_label: Option<String>,
        /// The figure's title.
        #[serde(default)]
        title: Option<String>,
    },
}

fn one() -> f64 {
    1.0
}

impl Plot {
    /// The stem of its files: `<index>-<what it shows>`.
    pub fn stem(&self, index: usize) -> String {
        match self {
            Plot::Bars { metric, .. } => format!("{index}-{metric}"),
            Plot::Cdf { distribution, .. } => format!("{index}-{distribution}-cdf"),
            Plot::Pdf { distribution, .. } => format!("{index}-{distribution}-pdf"),
            Plot::Series { field, trial, .. } => format!("{index}-{field}-trial{trial}"),
            Plot::Lines { metric, .. } => format!("{index}-{metric}-lines"),
            Plot::SweepCdf { metric, .. } => format!("{index}-{metric}-sweep-cdf"),
            Plot::Flows { trial, .. } => format!("{index}-flows-trial{trial}"),
        }
    }

    /// Its own title, if the scenario gives one.
    pub fn title(&self) -> Option<&str> {
        match self {
            Plot::Bars { title, .. }
            | Plot::Cdf { title, .. }
            | Plot::Pdf { title, .. }
            | Plot::Series { title, .. }
            | Plot::Lines { title, .. }
            | Plot::SweepCdf { title, .. }
            | Plot::Flows { title, .. } => title.as_deref(),
        }
    }
}
