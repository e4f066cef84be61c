//! One captured trial: the key log and qlog collections its endpoints are
//! given, and the files written after it ran.

use super::{VariantCapture, write};
use netsim::Pcapng;
use quic::{KeyLog, QuicConfig};
use std::path::PathBuf;

/// What a captured trial collects while it runs.
pub(crate) struct TrialCapture {
    /// Every TLS secret of the trial's QUIC endpoints (ours), in one log.
    pub(crate) keylog: KeyLog,
    /// Each endpoint's qlog traces, by the endpoint's role.
    #[cfg(feature = "qlog")]
    qlogs: std::cell::RefCell<std::collections::BTreeMap<String, quic::QlogSet>>,
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
            #[cfg(feature = "qlog")]
            qlogs: Default::default(),
            hops: capture.hops(trial)?.to_vec(),
            dir: capture.dir(trial),
        })
    }

    /// `config` collecting the endpoint `role`'s qlog traces (`client`,
    /// `server`, `middle`, a flow's `a-client`…; without the `qlog`
    /// feature, `config` as it is).
    pub(crate) fn observe(&self, config: QuicConfig, role: &str) -> QuicConfig {
        #[cfg(feature = "qlog")]
        {
            let set = self
                .qlogs
                .borrow_mut()
                .entry(role.to_string())
                .or_default()
                .clone();
            config.with_qlog(set)
        }
        #[cfg(not(feature = "qlog"))]
        {
            let _ = role;
            config
        }
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
        #[cfg(feature = "qlog")]
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
                match super::qlog::tidy(&trace, &role) {
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
