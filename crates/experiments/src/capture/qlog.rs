//! qlog files as a capture writes them: noq-proto's trace of one
//! connection (JSON-SEQ, times in milliseconds of virtual time), with its
//! header completed to the draft's required fields, and the check of
//! every record against those fields (`qlog-required.json`).

use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

/// The fields draft-ietf-quic-qlog-main-schema requires, as JSON (the
/// file `crates/experiments/src/capture/qlog-required.json`).
pub const QLOG_REQUIRED: &str = include_str!("qlog-required.json");

/// The record separator that starts every JSON-SEQ record (RFC 7464).
const RS: u8 = 0x1E;

/// The event schema URI of each namespace noq-proto logs
/// (draft-ietf-quic-qlog-quic-events).
fn schema_uri(namespace: &str) -> String {
    format!("urn:ietf:params:qlog:events:{namespace}")
}

/// The records of a JSON-SEQ text: each RS-prefixed record's JSON, in
/// order. An error names the record that is not JSON.
pub fn records(text: &[u8]) -> Result<Vec<Value>, String> {
    text.split(|&b| b == RS)
        .map(|record| record.trim_ascii())
        .filter(|record| !record.is_empty())
        .enumerate()
        .map(|(i, record)| {
            serde_json::from_slice(record).map_err(|e| format!("record {i} is not JSON: {e}"))
        })
        .collect()
}

/// A trace of noq-proto's, from the vantage point `role` (`client`,
/// `server`, or a middle system's endpoint), made a complete qlog file:
/// the header gets the draft's media type, an event schema per namespace
/// its events use, a reference time (virtual time zero shown as the Unix
/// epoch, as in the pcapng files) and the vantage point's name, plus the
/// older `qlog_version`/`qlog_format` fields that some tools still read;
/// every record is framed RS … LF. The events are kept as they are.
/// The output depends only on the trace.
pub fn tidy(trace: &[u8], role: &str) -> Result<Vec<u8>, String> {
    let mut records = records(trace)?;
    let Some((header, events)) = records.split_first_mut() else {
        return Err("the trace is empty".into());
    };
    let namespaces: BTreeSet<String> = events
        .iter()
        .filter_map(|event| event.get("name")?.as_str()?.split_once(':'))
        .map(|(namespace, _)| namespace.to_string())
        .collect();
    let Some(header) = header.as_object_mut() else {
        return Err("the first record is not an object".into());
    };
    // qvis recognises a JSON-SEQ qlog by `qlog_version` and `qlog_format`
    // in its first kilobyte: they come first.
    let mut first = Map::new();
    first.insert("qlog_version".into(), json!("0.3"));
    first.insert("qlog_format".into(), json!("JSON-SEQ"));
    first.insert(
        "file_schema".into(),
        json!("urn:ietf:params:qlog:file:sequential"),
    );
    first.insert(
        "serialization_format".into(),
        json!("application/qlog+json-seq"),
    );
    first.insert("title".into(), json!(format!("pepkit {role}")));
    for (key, value) in std::mem::take(header) {
        first.entry(key).or_insert(value);
    }
    *header = first;
    let trace = header
        .entry("trace")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(trace) = trace.as_object_mut() else {
        return Err("the header's `trace` is not an object".into());
    };
    let schemas: Vec<String> = namespaces.iter().map(|n| schema_uri(n)).collect();
    trace.insert("event_schemas".into(), json!(schemas));
    let common = trace
        .entry("common_fields")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(common) = common.as_object_mut() {
        common.insert(
            "reference_time".into(),
            json!({ "clock_type": "system", "epoch": "1970-01-01T00:00:00.000Z" }),
        );
        common.insert("time_format".into(), json!("relative_to_epoch"));
    }
    let vantage = trace
        .entry("vantage_point")
        .or_insert_with(|| json!({ "type": "unknown" }));
    if let Some(vantage) = vantage.as_object_mut() {
        vantage.insert("name".into(), json!(role));
    }
    let mut out = Vec::new();
    for record in &records {
        out.push(RS);
        // Serializing a Value into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut out, record);
        out.push(b'\n');
    }
    Ok(out)
}

/// Checks one record against the required fields: the header (`header`
/// true) or an event. `required` is [`QLOG_REQUIRED`], parsed. An error
/// says which field is missing or wrong, and the draft's section.
pub fn check_record(record: &Value, header: bool, required: &Value) -> Result<(), String> {
    let entry = if header { "header" } else { "event" };
    check(record, entry, required, entry)
}

fn check(value: &Value, entry: &str, required: &Value, at: &str) -> Result<(), String> {
    let spec = &required[entry];
    let section = spec["section"].as_str().unwrap_or(entry);
    let fail = |what: String| Err(format!("{at}: {what} (draft section: {section})"));
    let Some(object) = value.as_object() else {
        return fail("not an object".into());
    };
    for (field, kind) in spec["required"].as_object().into_iter().flatten() {
        let Some(found) = object.get(field) else {
            return fail(format!("`{field}` is missing"));
        };
        let fits = match kind.as_str() {
            Some("string") => found.is_string(),
            Some("number") => found.is_number(),
            Some("object") => found.is_object(),
            Some("array") => found.is_array(),
            _ => true,
        };
        if !fits {
            return fail(format!("`{field}` is {found}, not a {kind}"));
        }
    }
    for (field, wanted) in spec["values"].as_object().into_iter().flatten() {
        if object.get(field) != Some(wanted) {
            return fail(format!("`{field}` must be {wanted}"));
        }
    }
    for (field, allowed) in spec["one_of"].as_object().into_iter().flatten() {
        let allowed = allowed.as_array().map(Vec::as_slice).unwrap_or(&[]);
        if let Some(found) = object.get(field).filter(|f| !allowed.contains(f)) {
            return fail(format!("`{field}` is {found}, not one of {allowed:?}"));
        }
    }
    for field in spec["non_empty"].as_array().into_iter().flatten() {
        let field = field.as_str().unwrap_or_default();
        if object
            .get(field)
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty)
        {
            return fail(format!("`{field}` is empty"));
        }
    }
    if spec.get("name_pattern").is_some() {
        let name = object.get("name").and_then(Value::as_str).unwrap_or("");
        let valid = name
            .split_once(':')
            .is_some_and(|(ns, ty)| !ns.is_empty() && !ty.is_empty());
        if !valid {
            return fail(format!("`name` {name:?} is not namespace:event_type"));
        }
    }
    for (field, nested) in spec["objects"].as_object().into_iter().flatten() {
        if let (Some(inner), Some(nested)) = (object.get(field), nested.as_str()) {
            check(inner, nested, required, &format!("{at}.{field}"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn required() -> Value {
        serde_json::from_str(QLOG_REQUIRED).unwrap()
    }

    const RAW: &[u8] = b"\x1e{\"file_schema\":\"urn:ietf:params:qlog:file:sequential\",\"serialization_format\":\"JSON-SEQ\",\"trace\":{\"common_fields\":{\"reference_time\":{\"clock_type\":\"\",\"epoch\":\"\"}},\"vantage_point\":{\"type\":\"client\"},\"event_schemas\":[]}}\n\x1e{\"time\":0.0,\"name\":\"quic:packet_sent\",\"data\":{}}\n\x1e{\"time\":1.5,\"name\":\"recovery:metrics_updated\",\"data\":{\"cwnd\":1}}\n";

    #[test]
    fn tidy_completes_the_header_and_keeps_the_events() {
        let required = required();
        let raw = records(RAW).unwrap();
        assert!(check_record(&raw[0], true, &required).is_err());
        let tidy = tidy(RAW, "client").unwrap();
        assert!(tidy.starts_with(b"\x1e{") && tidy.ends_with(b"}\n"));
        let records = records(&tidy).unwrap();
        assert_eq!(records.len(), 3);
        check_record(&records[0], true, &required).unwrap();
        assert_eq!(
            records[0]["trace"]["event_schemas"],
            json!([
                "urn:ietf:params:qlog:events:quic",
                "urn:ietf:params:qlog:events:recovery"
            ])
        );
        assert_eq!(records[1..], raw[1..]);
        for event in &records[1..] {
            check_record(event, false, &required).unwrap();
        }
    }

    #[test]
    fn missing_or_wrong_fields_are_named() {
        let required = required();
        let event = |v: Value| check_record(&v, false, &required).unwrap_err();
        assert!(event(json!({"name": "quic:x", "data": {}})).contains("`time` is missing"));
        assert!(event(json!({"time": "0", "name": "quic:x", "data": {}})).contains("not a"));
        assert!(
            event(json!({"time": 0, "name": "x", "data": {}})).contains("namespace:event_type")
        );
        let header = json!({
            "file_schema": "urn:ietf:params:qlog:file:sequential",
            "serialization_format": "application/qlog+json-seq",
            "trace": { "event_schemas": ["a"], "vantage_point": { "type": "router" } }
        });
        let error = check_record(&header, true, &required).unwrap_err();
        assert!(error.contains("header.trace.vantage_point"), "{error}");
    }
}
