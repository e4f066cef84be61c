//! TLS key log in memory, in the SSLKEYLOGFILE format, so that a netsim
//! pcap of a run can be decrypted later
//! (`tshark -o tls.keylog_file:KEYS -r run.pcap`).

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

/// An in-memory SSLKEYLOGFILE. Clones share the same log, so one log can
/// collect the secrets of both endpoints of a run.
#[derive(Clone, Debug, Default)]
pub struct KeyLog {
    text: Arc<Mutex<String>>,
}

impl KeyLog {
    /// An empty log.
    pub fn new() -> KeyLog {
        KeyLog::default()
    }

    /// The log so far: one `LABEL <client_random hex> <secret hex>` line per
    /// secret.
    pub fn contents(&self) -> String {
        self.text.lock().map(|t| t.clone()).unwrap_or_default()
    }
}

impl rustls::KeyLog for KeyLog {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        let Ok(mut text) = self.text.lock() else {
            return;
        };
        text.push_str(label);
        text.push(' ');
        for b in client_random {
            let _ = write!(text, "{b:02x}");
        }
        text.push(' ');
        for b in secret {
            let _ = write!(text, "{b:02x}");
        }
        text.push('\n');
    }

    fn will_log(&self, _label: &str) -> bool {
        true
    }
}
