//! Metric names as people read them: `goodput_mbps` → "goodput (Mbit/s)",
//! `bitrate_mbps_4k` → "average video bitrate of 4k (Mbit/s)".
//!
//! A metric's name is a known quantity, perhaps with a percentile, then
//! perhaps the flow, group or phase it was measured for (`_4k`,
//! `_yield_primary`); or words ending in a unit (`_mbps`, `_ms`, `_s`,
//! `_pct`), perhaps followed by whom it is of.

/// Metrics by their exact names, with their labels and units.
const KNOWN: [(&str, &str); 33] = [
    ("goodput_mbps", "goodput (Mbit/s)"),
    ("completion_s", "completion time (s)"),
    ("dejitter_ms", "de-jitter delay (ms)"),
    ("frame_delay_ms", "frame delay (ms)"),
    ("frame_jitter_ms", "frame-level jitter (ms)"),
    ("fct_ms", "flow completion time (ms)"),
    ("fct_mean_ms", "mean flow completion time (ms)"),
    ("fct_pages_ms", "page load time (ms)"),
    ("sender_lost_packets", "packets the sender declared lost"),
    ("sender_sent_packets", "packets sent"),
    (
        "sender_spurious_losses",
        "packets the sender declared lost, then saw acknowledged",
    ),
    (
        "receiver_sent_packets",
        "packets the receiver sent (its ACKs)",
    ),
    ("played_fraction", "fraction of packets played"),
    ("frames_received_fraction", "fraction of frames received"),
    ("retransmissions", "retransmissions"),
    ("retransmission_rate", "retransmission rate"),
    ("jain_index", "Jain's fairness index"),
    ("throughput_mbps", "throughput in the window (Mbit/s)"),
    ("jain_index_window", "Jain's index in the window"),
    ("utilization", "joint utilisation"),
    ("bitrate_mbps", "average video bitrate (Mbit/s)"),
    ("rebuffer_ratio", "rebuffer ratio"),
    ("throughput_ratio", "throughput with the others / alone"),
    ("rtt_p95_ratio", "p95 RTT with the others / alone"),
    ("rtt_ms", "RTT (ms)"),
    ("inflation_p95", "p95 RTT inflation (RTT / base RTT)"),
    ("pemi_precision", "PEMI's loss inference: precision"),
    ("pemi_recall", "PEMI's loss inference: recall"),
    ("pemi_repaired_share", "share of losses PEMI repaired"),
    ("pemi_reply_ratio", "reply / sent packet ratio"),
    ("pemi_queue_delay_ms", "PEMI's queueing delay (ms)"),
    ("middle_engine_share", "the middle engine's share of a CPU"),
    ("tunnel_setup_ms", "tunnel setup time (ms)"),
];

/// Units a metric's name may end in (before whom it is of).
const UNITS: [(&str, &str); 7] = [
    ("mbps", "Mbit/s"),
    ("ms", "ms"),
    ("s", "s"),
    ("pct", "%"),
    ("bytes", "bytes"),
    ("packets", "packets"),
    ("kb", "kB"),
];

/// A metric's label with its unit, for tables and axes.
pub fn metric_label(metric: &str) -> String {
    if let Some((_, label)) = KNOWN.iter().find(|(name, _)| *name == metric) {
        return label.to_string();
    }
    if let Some(flow) = metric.strip_prefix("throughput_mbps_") {
        return format!("throughput of {} in the window (Mbit/s)", words(flow));
    }
    if let Some(flow) = metric.strip_prefix("share_") {
        return format!("share of {}", words(flow));
    }
    if let Some(label) = link(metric) {
        return label;
    }
    // `frame_delay_p90_ms` → "frame delay, p90 (ms)".
    if let Some(stem) = metric.strip_suffix("_ms")
        && let Some((base, percentile)) = stem.rsplit_once('_')
        && is_percentile(percentile)
    {
        let base = metric_label(&format!("{base}_ms"));
        if let Some(name) = base.strip_suffix(" (ms)") {
            return format!("{name}, {percentile} (ms)");
        }
    }
    // A known metric of a flow, group or phase: `bitrate_mbps_4k`.
    let longest = KNOWN
        .iter()
        .filter_map(|(name, label)| {
            let rest = metric.strip_prefix(name)?.strip_prefix('_')?;
            Some((name.len(), *label, rest))
        })
        .max_by_key(|(length, ..)| *length);
    if let Some((_, label, rest)) = longest {
        return of(label, &words(rest));
    }
    // Words, a unit, and whom it is of: `rtt_p95_ms_flow`.
    let parts: Vec<&str> = metric.split('_').collect();
    if let Some(at) = parts
        .iter()
        .position(|part| UNITS.iter().any(|(suffix, _)| suffix == part))
        .filter(|&at| at > 0)
    {
        let head = parts[..=at].join("_");
        if at + 1 < parts.len() {
            return of(&metric_label(&head), &parts[at + 1..].join(" "));
        }
        let unit = UNITS.iter().find(|(suffix, _)| *suffix == parts[at]);
        if let Some((_, unit)) = unit {
            return format!("{} ({unit})", parts[..at].join(" "));
        }
    }
    words(metric)
}

/// `label` of `who`: before the unit if it has one ("goodput of a
/// (Mbit/s)").
fn of(label: &str, who: &str) -> String {
    match label.rsplit_once(" (") {
        Some((name, unit)) if unit.ends_with(')') => format!("{name} of {who} ({unit}"),
        _ => format!("{label} of {who}"),
    }
}

/// `link_<hop>_<forward|reverse>_<packets|bytes>` in words.
fn link(metric: &str) -> Option<String> {
    let rest = metric.strip_prefix("link_")?;
    let (rest, what) = rest.rsplit_once('_')?;
    let (hop, direction) = rest.rsplit_once('_')?;
    let towards = match direction {
        "forward" => "client → server",
        "reverse" => "server → client",
        _ => return None,
    };
    Some(format!("{what} on hop {hop} ({towards})"))
}

/// Whether `part` is a percentile's name such as `p90`.
fn is_percentile(part: &str) -> bool {
    part.strip_prefix('p')
        .is_some_and(|digits| !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()))
}

/// Underscores as spaces.
fn words(text: &str) -> String {
    text.replace('_', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_the_unit() {
        assert_eq!(metric_label("goodput_mbps"), "goodput (Mbit/s)");
        assert_eq!(metric_label("frame_delay_p90_ms"), "frame delay, p90 (ms)");
        assert_eq!(metric_label("dejitter_p99_ms"), "de-jitter delay, p99 (ms)");
        assert_eq!(metric_label("something_else"), "something else");
    }

    #[test]
    fn no_shipped_plot_is_labelled_with_a_raw_metric_name() {
        let cases = [
            ("bitrate_mbps_4k", "average video bitrate of 4k (Mbit/s)"),
            ("rebuffer_ratio_4k", "rebuffer ratio of 4k"),
            ("goodput_mbps_a", "goodput of a (Mbit/s)"),
            (
                "throughput_ratio_yield_primary",
                "throughput with the others / alone of yield primary",
            ),
            ("rtt_p95_ms", "RTT, p95 (ms)"),
            ("rtt_p95_ms_flow", "RTT, p95 of flow (ms)"),
            ("fct_p99_ms", "flow completion time, p99 (ms)"),
            ("fct_pages_p50_ms", "page load time, p50 (ms)"),
            ("pemi_queue_delay_p50_ms", "PEMI's queueing delay, p50 (ms)"),
            (
                "link_near_reverse_packets",
                "packets on hop near (server → client)",
            ),
            (
                "rtt_confusion_deviation_pct_load_probe",
                "rtt confusion deviation of load probe (%)",
            ),
            ("inflation_p95", "p95 RTT inflation (RTT / base RTT)"),
            ("share_a", "share of a"),
        ];
        for (metric, label) in cases {
            assert_eq!(metric_label(metric), label, "{metric}");
        }
    }

    /// Every metric a shipped scenario plots gets a label of its own, not
    /// its name with spaces; and every lines plot's x axis, after its
    /// `x_scale`, reads in plain numbers (not 0.00011 for 110 Mbit/s).
    #[test]
    fn shipped_plots_have_labels_and_readable_x_axes() {
        use crate::figure::Plot;
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
        let mut seen = 0;
        for paper in std::fs::read_dir(&root).unwrap() {
            for entry in std::fs::read_dir(paper.unwrap().path()).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_none_or(|e| e != "toml") {
                    continue;
                }
                let file = crate::ScenarioFile::load(&path).unwrap();
                for plot in &file.base.plots {
                    let metric = match plot {
                        Plot::Bars { metric, .. }
                        | Plot::Lines { metric, .. }
                        | Plot::SweepCdf { metric, .. } => metric,
                        _ => continue,
                    };
                    seen += 1;
                    let known = KNOWN.iter().any(|(name, _)| name == metric);
                    assert!(
                        known || metric_label(metric) != words(metric),
                        "{}: {metric}",
                        path.display()
                    );
                    if let Plot::Lines { x_scale, .. } = plot {
                        for variant in &file.variants {
                            let Some(point) = &variant.sweep else {
                                continue;
                            };
                            let x = (point.x * x_scale).abs();
                            assert!(
                                x == 0.0 || (1e-3..1e7).contains(&x),
                                "{}: x = {} shown as {x}",
                                path.display(),
                                point.x
                            );
                        }
                    }
                }
            }
        }
        assert!(seen > 50, "{seen} plots");
    }
}
