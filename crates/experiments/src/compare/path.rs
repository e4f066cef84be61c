//! The path `pepkit compare` runs on: hops written on the command line
//! (`--hop rate=20Mbit/s,delay=40ms,loss=2%`), or a scenario file without
//! variants; and, for competing flows, the same path as one shared hop.

use crate::units::{BitRate, Bytes, Span};
use std::path::Path;

/// The keys a `--hop` may give.
const KEYS: &[&str] = &[
    "name",
    "delay",
    "rate",
    "trace",
    "reverse_trace",
    "loss",
    "loss_direction",
    "buffer",
    "jitter",
];

/// Reads one `--hop`: comma-separated `key=value` pairs. `delay` and
/// `rate` (or `trace`) are required; `loss` is a fraction (`0.02`) or a
/// percentage (`2%`); `buffer` is packets (`100`), bytes (`150kB`) or
/// bandwidth-delay products (`1bdp`). Returns the hop's name (if given)
/// and its table as a scenario file writes it.
pub fn parse_hop(text: &str) -> Result<(Option<String>, toml::Table), String> {
    let mut table = toml::Table::new();
    let mut name = None;
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(format!("`{pair}` is not key=value"));
        };
        let (key, value) = (key.trim(), value.trim());
        if !KEYS.contains(&key) {
            return Err(format!(
                "unknown key `{key}`; a hop has {}",
                KEYS.join(", ")
            ));
        }
        if table.contains_key(key) || (key == "name" && name.is_some()) {
            return Err(format!("`{key}` is given twice"));
        }
        let bad = |what: &str| format!("`{key}={value}`: {what}");
        let value = match key {
            "name" if value.is_empty() || value.contains(['.', '"', ' ']) => {
                return Err(bad("a name without dots, quotes or spaces"));
            }
            "name" => {
                name = Some(value.to_string());
                continue;
            }
            "delay" | "jitter" if Span::parse(value).is_none() => {
                return Err(bad("not a time (write e.g. 40ms)"));
            }
            "rate" if BitRate::parse(value).is_none() => {
                return Err(bad("not a rate (write e.g. 20Mbit/s)"));
            }
            "loss" => toml::Value::Float(
                loss(value)
                    .ok_or_else(|| bad("not a loss rate from 0 to 1 (write e.g. 2% or 0.02)"))?,
            ),
            "loss_direction" if !["both", "forward", "reverse"].contains(&value) => {
                return Err(bad("one of both, forward, reverse"));
            }
            "buffer" => toml::Value::Table(buffer(value).ok_or_else(|| {
                bad("packets (100), bytes (150kB) or bandwidth-delay products (1bdp)")
            })?),
            _ => toml::Value::String(value.to_string()),
        };
        table.insert(key.to_string(), value);
    }
    if !table.contains_key("delay") {
        return Err("give its one-way `delay` (e.g. delay=40ms)".into());
    }
    if !table.contains_key("rate") && !table.contains_key("trace") {
        return Err("give its `rate` (e.g. rate=20Mbit/s) or a capacity `trace`".into());
    }
    Ok((name, table))
}

/// A loss rate: `2%` or `0.02`, in [0, 1].
fn loss(text: &str) -> Option<f64> {
    let value = match text.strip_suffix('%') {
        Some(percent) => percent.trim().parse::<f64>().ok()? / 100.0,
        None => text.parse::<f64>().ok()?,
    };
    (0.0..=1.0).contains(&value).then_some(value)
}

/// A drop-tail buffer: packets, bytes or BDPs.
fn buffer(text: &str) -> Option<toml::Table> {
    let mut table = toml::Table::new();
    table.insert("kind".into(), "drop_tail".into());
    if let Some(bdp) = text.strip_suffix("bdp") {
        let bdp: f64 = bdp.trim().parse().ok().filter(|b: &f64| *b > 0.0)?;
        table.insert("bdp".into(), bdp.into());
    } else if let Ok(packets) = text.parse::<i64>() {
        (packets > 0).then_some(())?;
        table.insert("packets".into(), packets.into());
    } else {
        Bytes::parse(text).filter(|b| b.0 > 0)?;
        table.insert("bytes".into(), text.into());
    }
    Some(table)
}

/// The scenario document of a path given as `--hop`s: `path` and `hops`,
/// the hops named `h1`, `h2`, … unless they name themselves.
pub fn from_hops(hops: &[String]) -> Result<toml::Table, String> {
    if hops.is_empty() {
        return Err("give the path: --hop … once per hop, client side first".into());
    }
    let mut path = Vec::new();
    let mut tables = toml::Table::new();
    for (index, text) in hops.iter().enumerate() {
        let (name, table) =
            parse_hop(text).map_err(|error| format!("--hop {}: {error}", index + 1))?;
        let name = name.unwrap_or_else(|| format!("h{}", index + 1));
        if tables.contains_key(&name) {
            return Err(format!("--hop {}: two hops are called {name:?}", index + 1));
        }
        path.push(toml::Value::String(name.clone()));
        tables.insert(name, toml::Value::Table(table));
    }
    let mut document = toml::Table::new();
    document.insert("path".into(), toml::Value::Array(path));
    document.insert("hops".into(), toml::Value::Table(tables));
    Ok(document)
}

/// The scenario document of a file without variants: everything it says
/// (its path, hops, endpoints, workload, seed, time limit) except what
/// compare decides (its name, title, middle system, plots and checks).
pub fn from_file(file: &Path) -> Result<toml::Table, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut document: toml::Table =
        toml::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    if document.contains_key("variant") || document.contains_key("flows") {
        return Err(format!(
            "{}: compare takes a path without [[variant]]s or [[flows]]; it makes the variants",
            file.display()
        ));
    }
    for key in [
        "check",
        "quick",
        "plots",
        "middle",
        "middle_after",
        "name",
        "title",
    ] {
        document.remove(key);
    }
    Ok(document)
}

/// The path of `document` collapsed into one hop `shared` behind a fast
/// access hop `access`, for competing flows: delays summed, the slowest
/// rate (or the one trace) with its buffer, Bernoulli losses combined.
/// `Err` says what cannot be collapsed.
pub(crate) fn shared_hop(document: &toml::Table) -> Result<toml::Table, String> {
    let hops = document.get("hops").and_then(toml::Value::as_table);
    let path = document.get("path").and_then(toml::Value::as_array);
    let (Some(hops), Some(path)) = (hops, path) else {
        return Err("no path".into());
    };
    let hops: Vec<&toml::Table> = path
        .iter()
        .filter_map(|name| hops.get(name.as_str()?)?.as_table())
        .collect();
    let text =
        |hop: &toml::Table, key: &str| hop.get(key).and_then(|v| v.as_str().map(String::from));
    let mut delay = std::time::Duration::ZERO;
    for hop in &hops {
        delay += text(hop, "delay")
            .and_then(|d| Span::parse(&d))
            .map_or(Default::default(), |s| s.0);
    }
    let traced: Vec<&&toml::Table> = hops.iter().filter(|h| h.contains_key("trace")).collect();
    let narrow = match traced.as_slice() {
        [one] => **one,
        [] => hops
            .iter()
            .min_by_key(|hop| {
                text(hop, "rate")
                    .and_then(|r| BitRate::parse(&r))
                    .map_or(u64::MAX, |r| r.0.bits_per_sec())
            })
            .copied()
            .ok_or("no hops")?,
        _ => return Err("more than one hop has a capacity trace".into()),
    };
    let lossy: Vec<&&toml::Table> = hops
        .iter()
        .filter(|h| {
            h.contains_key("gilbert_elliott") || h.get("loss").and_then(as_f64).unwrap_or(0.0) > 0.0
        })
        .collect();
    let mut shared = toml::Table::new();
    shared.insert("delay".into(), format!("{}ns", delay.as_nanos()).into());
    for key in ["rate", "trace", "reverse_trace", "buffer"] {
        if let Some(value) = narrow.get(key) {
            shared.insert(key.into(), value.clone());
        }
    }
    match lossy.as_slice() {
        [] => {}
        [one] => {
            for key in ["loss", "gilbert_elliott", "loss_direction"] {
                if let Some(value) = one.get(key) {
                    shared.insert(key.into(), value.clone());
                }
            }
        }
        many => {
            if many.iter().any(|h| h.contains_key("gilbert_elliott")) {
                return Err("bursty loss on one of several lossy hops".into());
            }
            let direction = |h: &toml::Table| text(h, "loss_direction").unwrap_or("both".into());
            if many.iter().any(|h| direction(h) != direction(many[0])) {
                return Err("lossy hops that lose in different directions".into());
            }
            let kept: f64 = many
                .iter()
                .map(|h| 1.0 - h.get("loss").and_then(as_f64).unwrap_or(0.0))
                .product();
            shared.insert("loss".into(), (1.0 - kept).into());
            shared.insert("loss_direction".into(), direction(many[0]).into());
        }
    }
    if hops.iter().filter(|h| h.contains_key("jitter")).count() > 1 {
        return Err("jitter on more than one hop".into());
    }
    if let Some(jitter) = hops.iter().find_map(|h| h.get("jitter")) {
        shared.insert("jitter".into(), jitter.clone());
    }
    let mut access = toml::Table::new();
    access.insert("delay".into(), "10us".into());
    access.insert("rate".into(), "10Gbit/s".into());
    let mut tables = toml::Table::new();
    tables.insert("access".into(), access.into());
    tables.insert("shared".into(), shared.into());
    let mut overlay = toml::Table::new();
    overlay.insert(
        "path".into(),
        toml::Value::Array(vec!["access".into(), "shared".into()]),
    );
    overlay.insert("hops".into(), tables.into());
    Ok(overlay)
}

fn as_f64(value: &toml::Value) -> Option<f64> {
    value
        .as_float()
        .or_else(|| value.as_integer().map(|i| i as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hop_reads_units_and_percentages() {
        let (name, hop) = parse_hop("rate=20Mbit/s,delay=40ms,loss=2%,buffer=1bdp").unwrap();
        assert_eq!(name, None);
        assert_eq!(hop["rate"].as_str(), Some("20Mbit/s"));
        assert_eq!(hop["loss"].as_float(), Some(0.02));
        assert_eq!(hop["buffer"]["bdp"].as_float(), Some(1.0));
        let (name, hop) = parse_hop("name=sat, delay=300ms, rate=50Mbit/s, loss=0.01").unwrap();
        assert_eq!(
            (name.as_deref(), hop["loss"].as_float()),
            (Some("sat"), Some(0.01))
        );
    }

    #[test]
    fn a_bad_hop_says_what_is_wrong() {
        for (text, says) in [
            ("rate=20Mbit/s", "delay"),
            ("delay=40ms", "rate"),
            ("rate=20Mbit/s,delay=40", "not a time"),
            ("rate=20Mbps/s,delay=40ms", "not a rate"),
            ("rate=20Mbit/s,delay=40ms,loss=200%", "loss rate"),
            ("rate=20Mbit/s,delay=40ms,lost=2%", "unknown key `lost`"),
            ("rate=20Mbit/s,delay=40ms,delay=1ms", "twice"),
            ("rate=20Mbit/s,delay 40ms", "not key=value"),
            ("rate=20Mbit/s,delay=4ms,buffer=lots", "packets"),
        ] {
            let error = parse_hop(text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
        let error = from_hops(&[
            "delay=1ms,rate=1Mbit/s,name=a".to_string(),
            "delay=1ms,rate=1Mbit/s,name=a".to_string(),
        ])
        .unwrap_err();
        assert!(error.contains("two hops"), "{error}");
        assert!(from_hops(&[]).unwrap_err().contains("--hop"));
    }

    #[test]
    fn the_shared_hop_sums_delays_and_keeps_the_narrowest_rate() {
        let path = from_hops(&[
            "rate=20Mbit/s,delay=40ms,loss=2%".into(),
            "rate=100Mbit/s,delay=10ms".into(),
        ])
        .unwrap();
        let overlay = shared_hop(&path).unwrap();
        let shared = &overlay["hops"]["shared"];
        assert_eq!(shared["delay"].as_str(), Some("50000000ns"));
        assert_eq!(shared["rate"].as_str(), Some("20Mbit/s"));
        assert_eq!(shared["loss"].as_float(), Some(0.02));
    }
}
