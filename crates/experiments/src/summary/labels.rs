//! Metric names as people read them: `goodput_mbps` → "goodput (Mbit/s)".

/// A metric's label with its unit, for tables and axes.
pub fn metric_label(metric: &str) -> String {
    let known = [
        ("goodput_mbps", "goodput (Mbit/s)"),
        ("completion_s", "completion time (s)"),
        ("dejitter_ms", "de-jitter delay (ms)"),
        ("frame_delay_ms", "frame delay (ms)"),
        ("frame_jitter_ms", "frame-level jitter (ms)"),
        ("fct_ms", "flow completion time (ms)"),
        ("sender_lost_packets", "packets the sender declared lost"),
        ("sender_sent_packets", "packets sent"),
        (
            "sender_spurious_losses",
            "packets the sender declared lost, then saw acknowledged",
        ),
        ("played_fraction", "fraction of packets played"),
        ("frames_received_fraction", "fraction of frames received"),
        ("retransmissions", "retransmissions"),
        ("jain_index", "Jain's fairness index"),
        ("throughput_mbps", "throughput in the window (Mbit/s)"),
        ("jain_index_window", "Jain's index in the window"),
        ("utilization", "joint utilisation"),
    ];
    if let Some(flow) = metric.strip_prefix("goodput_mbps_") {
        return format!("goodput of {flow} (Mbit/s)");
    }
    if let Some(flow) = metric.strip_prefix("throughput_mbps_") {
        return format!("throughput of {flow} in the window (Mbit/s)");
    }
    if let Some(flow) = metric.strip_prefix("share_") {
        return format!("share of {flow}");
    }
    if let Some((_, label)) = known.iter().find(|(name, _)| *name == metric) {
        return label.to_string();
    }
    // `frame_delay_p90_ms` → "frame delay p90 (ms)".
    if let Some(stem) = metric.strip_suffix("_ms")
        && let Some((base, percentile)) = stem.rsplit_once('_')
    {
        let base = metric_label(&format!("{base}_ms"));
        if let Some(name) = base.strip_suffix(" (ms)") {
            return format!("{name}, {percentile} (ms)");
        }
    }
    metric.replace('_', " ")
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
}
