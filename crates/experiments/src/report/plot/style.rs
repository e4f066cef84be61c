//! How every figure looks: a colour-blind-safe palette that also reads in
//! print, legends beside the data instead of over it, axis units scaled
//! to readable numbers, and tick labels without float noise.

use plotters::coord::Shift;
use plotters::prelude::*;

/// The Okabe–Ito palette without its yellow (too light on white): eight
/// hues that people with the common colour-vision deficiencies tell
/// apart, and that stay distinct in greyscale print by lightness.
pub(super) const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(230, 159, 0),   // orange
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(0, 0, 0),       // black
];

/// Series `index`'s colour (the palette repeats after seven).
pub(super) fn colour(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// Whether series `index` is dashed: after the palette runs out, the
/// second round of colours is dashed so no two series look alike.
pub(super) fn dashed(index: usize) -> bool {
    index / PALETTE.len() % 2 == 1
}

/// The width of the legend column beside a chart, pixels, for these names
/// (none without names).
pub(super) fn legend_width(names: &[&str]) -> u32 {
    let longest = names.iter().map(|name| name.chars().count()).max();
    longest.map_or(0, |chars| (chars as u32 * 7 + 46).clamp(120, 320))
}

/// A legend in its own area beside the chart: a short line of each
/// series' colour (dashed where the series is) and its name.
pub(super) fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    names: &[&str],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let top = 48;
    for (index, name) in names.iter().enumerate() {
        let y = top + 22 * index as i32;
        let style = colour(index).stroke_width(3);
        let points: Vec<(i32, i32)> = if dashed(index) {
            vec![(6, y), (14, y)]
        } else {
            vec![(6, y), (30, y)]
        };
        area.draw(&PathElement::new(points, style))?;
        if dashed(index) {
            area.draw(&PathElement::new(vec![(22, y), (30, y)], style))?;
        }
        area.draw(&Text::new(
            name.to_string(),
            (36, y - 7),
            ("sans-serif", 13).into_font().color(&BLACK),
        ))?;
    }
    Ok(())
}

/// How to show values of a variable: divide by `scale`, say `unit`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Unit {
    /// Values are divided by this.
    pub scale: f64,
    /// The unit after scaling, for the axis label.
    pub unit: &'static str,
}

/// A readable unit for byte counts whose largest value is `max`.
pub(super) fn byte_unit(max: f64) -> Unit {
    match max {
        m if m >= 2e6 => Unit {
            scale: 1e6,
            unit: "MB",
        },
        m if m >= 2e3 => Unit {
            scale: 1e3,
            unit: "kB",
        },
        _ => Unit {
            scale: 1.0,
            unit: "B",
        },
    }
}

/// A sampled variable's axis label and unit: `cwnd_bytes` → "congestion
/// window (kB)".
pub(super) fn series_label(field: &str, max: f64) -> (String, Unit) {
    let plain = Unit {
        scale: 1.0,
        unit: "",
    };
    let (name, unit) = match field {
        "cwnd_bytes" => ("congestion window", byte_unit(max)),
        "bytes_in_flight" => ("bytes in flight", byte_unit(max)),
        "srtt_ms" => ("smoothed RTT (ms)", plain),
        "pacing_mbps" => ("pacing rate (Mbit/s)", plain),
        "lost_packets" => ("packets declared lost", plain),
        "spurious_congestion_events" => ("spurious congestion events", plain),
        other => return (other.replace('_', " "), plain),
    };
    if unit.unit.is_empty() {
        (name.to_string(), unit)
    } else {
        (format!("{name} ({})", unit.unit), unit)
    }
}

/// Axis labels without float noise or a trailing `.0`.
pub(super) fn tick(value: &f64) -> String {
    // Tick steps such as 0.1 add up to 0.7999999999999999: round to ten
    // significant digits (values that print short are unchanged).
    let value: f64 = format!("{value:.9e}").parse().unwrap_or(*value);
    let text = format!("{value}");
    text.strip_suffix(".0").map_or(text.clone(), str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_keep_axes_readable() {
        assert_eq!(byte_unit(500_000.0).unit, "kB");
        assert_eq!(byte_unit(5e6).unit, "MB");
        let (label, unit) = series_label("cwnd_bytes", 300_000.0);
        assert_eq!(
            (label.as_str(), unit.scale),
            ("congestion window (kB)", 1e3)
        );
        assert_eq!(tick(&0.7999999999999999), "0.8");
        assert_eq!(tick(&3.0), "3");
    }

    #[test]
    fn no_yellow_and_no_two_series_alike_for_fourteen() {
        assert!(
            PALETTE
                .iter()
                .all(|c| !(c.0 > 200 && c.1 > 200 && c.2 < 100))
        );
        let looks: std::collections::BTreeSet<_> = (0..14)
            .map(|i| (colour(i).0, colour(i).1, colour(i).2, dashed(i)))
            .collect();
        assert_eq!(looks.len(), 14);
    }
}
