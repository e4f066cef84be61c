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

/// Whether series `index` is dashed: every other series, so that a line
/// drawn over another with the same values leaves it showing between
/// its dashes; the palette's length is odd, so its second round swaps
/// solid and dashed and no two of the first fourteen look alike.
pub(super) fn dashed(index: usize) -> bool {
    index % 2 == 1
}

/// The outline of series `index`'s marker, pixel offsets around its
/// point: circle-like, triangle, square, diamond, triangle down, hexagon.
pub(super) fn marker_shape(index: usize) -> Vec<(i32, i32)> {
    match index % 6 {
        0 => vec![
            (-2, -5),
            (2, -5),
            (5, -2),
            (5, 2),
            (2, 5),
            (-2, 5),
            (-5, 2),
            (-5, -2),
        ],
        1 => vec![(0, -6), (6, 5), (-6, 5)],
        2 => vec![(-5, -5), (5, -5), (5, 5), (-5, 5)],
        3 => vec![(0, -7), (6, 0), (0, 7), (-6, 0)],
        4 => vec![(-6, -5), (6, -5), (0, 6)],
        _ => vec![(-3, -5), (3, -5), (6, 0), (3, 5), (-3, 5), (-6, 0)],
    }
}

/// Whether series `index`'s marker is hollow: the second round of shapes.
pub(super) fn hollow(index: usize) -> bool {
    !(index / 6).is_multiple_of(2)
}

/// Series `index`'s marker at pixel `at` of `area`'s backend (filled in
/// the first round of shapes, hollow in the next, so 12 differ).
pub(super) fn marker<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    index: usize,
    at: (i32, i32),
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let points: Vec<(i32, i32)> = marker_shape(index)
        .into_iter()
        .map(|(x, y)| (at.0 + x, at.1 + y))
        .collect();
    if !hollow(index) {
        area.draw(&Polygon::new(points, colour(index).filled()))
    } else {
        let mut closed = points.clone();
        closed.push(points[0]);
        area.draw(&PathElement::new(closed, colour(index).stroke_width(2)))
    }
}

/// The width of the legend column beside a chart, pixels, for these names
/// (none without names).
pub(super) fn legend_width(names: &[&str]) -> u32 {
    let longest = names.iter().map(|name| name.chars().count()).max();
    longest.map_or(0, |chars| (chars as u32 * 7 + 46).clamp(120, 320))
}

/// A legend in its own area beside the chart: a short line of each
/// series' colour (dashed where the series is) and its name, with the
/// series' marker where the chart draws markers.
pub(super) fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    names: &[&str],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    legend_with(area, names, false)
}

/// [`legend`], with each series' marker on its line if `markers`.
pub(super) fn legend_with<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    names: &[&str],
    markers: bool,
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
        if markers {
            marker(area, index, (18, y))?;
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

/// A log axis's tick at 10^`exponent`: the power of ten where the
/// exponent is whole (1, 10, 100), else the value to two significant
/// digits (3.2 for 10^0.5, not 3.16227766).
pub(super) fn log_tick(exponent: &f64) -> String {
    let value = 10f64.powf(*exponent);
    if (exponent - exponent.round()).abs() < 1e-6 {
        return tick(&10f64.powf(exponent.round()));
    }
    let digits = 1 - value.log10().floor() as i32;
    let factor = 10f64.powi(digits);
    tick(&((value * factor).round() / factor))
}

/// Where an axis over data from `low` to `high` starts and ends: 3% beyond
/// the data, or, for one value (a sweep of one point), a tenth of it
/// either side (one either side of 0), so its ticks read 4.5 … 5.5 rather
/// than 4.999999989 … 5.00000001.
pub(super) fn padded(low: f64, high: f64) -> (f64, f64) {
    if high > low {
        let pad = (high - low) * 0.03;
        return (low - pad, high + pad);
    }
    let pad = if low == 0.0 { 1.0 } else { low.abs() * 0.1 };
    (low - pad, high + pad)
}

/// The top of a y axis whose largest value is `max`: a tenth above it,
/// or 1 when nothing is above 0 (a figure with no values in this mode
/// gets ticks 0, 0.2, … rather than 0.000000001).
pub(super) fn headroom(max: f64) -> f64 {
    if max > 0.0 { max * 1.1 } else { 1.0 }
}

/// A bar's label in lines of at most `width` characters, broken after
/// commas and at spaces (a longer word keeps a line of its own), so
/// that labels of neighbouring bars do not run into each other.
pub(super) fn wrap(label: &str, width: usize) -> Vec<String> {
    // Whole phrases ("QUIC e2e,", "1% loss,") where they fit, else words.
    let phrases: Vec<String> = label
        .split_inclusive(", ")
        .map(|p| p.trim().to_string())
        .collect();
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for phrase in phrases {
        let pieces: Vec<&str> = if phrase.chars().count() <= width {
            vec![&phrase]
        } else {
            phrase.split(' ').collect()
        };
        for piece in pieces {
            let fits = line.is_empty() || line.chars().count() + 1 + piece.chars().count() <= width;
            if !fits {
                lines.push(std::mem::take(&mut line));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(piece);
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
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
    fn log_ticks_read_as_round_numbers() {
        assert_eq!(log_tick(&0.0), "1");
        assert_eq!(log_tick(&1.0), "10");
        assert_eq!(log_tick(&3.0), "1000");
        assert_eq!(log_tick(&-1.0), "0.1");
        assert_eq!(log_tick(&0.5), "3.2");
        assert_eq!(log_tick(&1.5), "32");
        assert_eq!(log_tick(&2.5), "320");
        assert_eq!(log_tick(&(2.0_f64.log10())), "2");
    }

    #[test]
    fn one_point_gets_an_axis_with_plain_ticks() {
        let (low, high) = padded(5.0, 5.0);
        assert_eq!((low, high), (4.5, 5.5));
        assert_eq!((tick(&low), tick(&high)), ("4.5".into(), "5.5".into()));
        assert_eq!(padded(0.0, 0.0), (-1.0, 1.0));
        assert_eq!(headroom(0.0), 1.0);
        assert!((headroom(10.0) - 11.0).abs() < 1e-9);
        let (low, high) = padded(0.0, 100.0);
        assert!((low + 3.0).abs() < 1e-9 && (high - 103.0).abs() < 1e-9);
    }

    #[test]
    fn bar_labels_wrap_to_their_width() {
        let lines = wrap("QUIC e2e, 1% loss, ACK every packet", 20);
        assert_eq!(lines, ["QUIC e2e, 1% loss,", "ACK every packet"]);
        let lines = wrap("QUIC + PEMI, 1% loss, ACK every packet", 25);
        assert_eq!(lines, ["QUIC + PEMI, 1% loss,", "ACK every packet"]);
        assert!(wrap("QUIC + PEMI, 1% loss", 30).len() == 1);
        assert_eq!(
            wrap("averyveryverylongword x", 5),
            ["averyveryverylongword", "x"]
        );
    }

    #[test]
    fn markers_differ_for_twelve_series() {
        let looks: std::collections::BTreeSet<_> =
            (0..12).map(|i| (marker_shape(i), hollow(i))).collect();
        assert_eq!(looks.len(), 12);
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
