//! One captured trial: the key log and qlog collections its endpoints are
//! given, and the files written after it ran.

use super::qlog::tidy;
use super::{VariantCapture, write};
use netsim::Pcapng;
use quic::{KeyLog, QlogSet};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What a captured trial collects while it runs.
pub(crate) struct TrialCapture {
    /// Every TLS secret of the trial's QUIC endpoints (ours), in one log.
    pub(crate) keylog: KeyLog,
    /// Each endpoint's qlog traces, by the endpoint's role.
    qlogs: RefCell<BTreeMap<String, QlogSet>>,
    /// The hops captured (indices into the path).
    hops: Vec<usize>,
    /// Where the files go.
    dir: PathBuf,
}

impl TrialCapture {
    /// Trial `trial`'s capture, if `capture` asks for it.
    pub(crate) fn new(capture: Option<&VariantCapture>, trial: u32) -> Option<TrialCapture> {
        let capture = capture?;
        Some(TrialCapture {
            keylog: KeyLog::new(),
            qlogs: RefCell::default(),
            hops: capture.hops(trial)?.to_vec(),
            dir: capture.dir(trial),
        })
    }

    /// The qlog collection of the endpoint `role` (`client`, `server`,
    /// `middle`, a flow's `a-client`…), made on first use.
    pub(crate) fn qlog(&self, role: &str) -> QlogSet {
        self.qlogs
            .borrow_mut()
            .entry(role.to_string())
            .or_default()
            .clone()
    }

    /// The hops captured, as indices into the path.
    pub(crate) fn hops(&self) -> &[usize] {
        &self.hops
    }

    /// Writes `hop-<name>.pcapng` for each captured hop (with the key log
    /// inside), `keys.log`, and a qlog (JSON-SEQ) per connection of each
    /// endpoint:
    /// `<role>.sqlog`, or `<role>-<side>.sqlog` when it had several (the
    /// split proxy's `middle-server.sqlog` faces the client,
    /// `middle-client.sqlog` the server). A file
    /// that cannot be written is reported on standard error and the
    /// trial's results stay as they are.
    pub(crate) fn write(self, pcaps: Vec<(String, Pcapng)>) {
        let keys = self.keylog.contents();
        let mut files: Vec<(String, Vec<u8>)> = Vec::new();
        for (hop, pcap) in pcaps {
            files.push((format!("hop-{hop}.pcapng"), pcap.finish(&keys)));
        }
        files.push(("keys.log".into(), keys.into_bytes()));
        for (role, set) in self.qlogs.into_inner() {
            let traces = set.traces();
            let several = traces.len() > 1;
            let mut names: Vec<String> = Vec::new();
            for (trace_name, trace) in traces {
                // A trace is named `<side>-<initial DCID>`: an endpoint with
                // several connections names each file by its side.
                let side = trace_name.split('-').next().unwrap_or("trace");
                let mut name = match several {
                    false => format!("{role}.sqlog"),
                    true => format!("{role}-{side}.sqlog"),
                };
                let mut n = 1;
                while names.contains(&name) {
                    n += 1;
                    name = format!("{role}-{side}-{n}.sqlog");
                }
                names.push(name.clone());
                match tidy(&trace, &role) {
                    Ok(bytes) => files.push((name, bytes)),
                    Err(error) => eprintln!("warning: capture: {name}: {error}"),
                }
            }
        }
        for (name, bytes) in files {
            if let Err(error) = write(&self.dir, &name, &bytes) {
                let path = self.dir.join(&name);
                eprintln!("warning: capture: writing {}: {error}", path.display());
            }
        }
    }
}
