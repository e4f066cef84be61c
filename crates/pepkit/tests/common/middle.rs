//! `pepkit middle` as the router daemon tests run it: a child process that
//! enters a testbed node's namespace itself (`--netns`), signalled as an
//! operator would, its counters read from its last line.

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The namespace of the testbed's router (its first middle node), where
/// the daemon runs.
pub(crate) fn router(testbed: &emu::Testbed) -> String {
    testbed.middle(0).expect("a middle node").netns.clone()
}

/// The daemon, with its standard error collected as it writes.
pub(crate) struct Daemon {
    child: Child,
    stderr: Arc<Mutex<String>>,
    reader: JoinHandle<()>,
}

/// What a stopped daemon left.
pub(crate) struct Stopped {
    /// How it exited.
    pub status: ExitStatus,
    /// Its final counters (`{"system": …, "driver": …}`).
    pub stats: serde_json::Value,
    /// Everything it logged.
    pub log: String,
}

impl Daemon {
    /// Starts `pepkit middle ARGS --netns NETNS` and waits until it has
    /// had time to open its sockets (it must still be running then).
    pub(crate) fn start(netns: &str, args: &[&str]) -> Daemon {
        let mut child = Command::new(env!("CARGO_BIN_EXE_pepkit"))
            .arg("middle")
            .args(args)
            .args(["--netns", netns])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the daemon starts");
        let stderr = Arc::new(Mutex::new(String::new()));
        let reader = {
            let stderr = Arc::clone(&stderr);
            let mut pipe = child.stderr.take().expect("piped");
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                    stderr.lock().unwrap().push_str(&text);
                }
            })
        };
        std::thread::sleep(Duration::from_millis(700));
        let early = child.try_wait().unwrap();
        assert!(
            early.is_none(),
            "the daemon exited early ({early:?}): {}",
            stderr.lock().unwrap()
        );
        Daemon {
            child,
            stderr,
            reader,
        }
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{name}");
    }

    /// SIGUSR1: the daemon writes its table; waits until it has.
    pub(crate) fn dump(&self) {
        self.signal("USR1");
        std::thread::sleep(Duration::from_millis(300));
    }

    /// SIGTERM; waits for the daemon and reads what it left.
    pub(crate) fn stop(mut self) -> Stopped {
        self.signal("TERM");
        let status = self.child.wait().unwrap();
        let mut out = String::new();
        let _ = self
            .child
            .stdout
            .take()
            .expect("piped")
            .read_to_string(&mut out);
        let _ = self.reader.join();
        let log = self.stderr.lock().unwrap().clone();
        eprintln!("daemon log:\n{log}daemon stdout: {out}");
        let stats = out
            .lines()
            .rev()
            .find_map(|line| serde_json::from_str(line).ok())
            .unwrap_or_else(|| panic!("no counters on stdout: {out}\n{log}"));
        Stopped { status, stats, log }
    }
}

/// What a download through a testbed left: the client host after its
/// run, the bytes the server sent, and the report if it completed.
pub(crate) struct Download<H> {
    /// The client host (as wrapped), after its run.
    pub(crate) client: H,
    /// UDP bytes the server sent.
    pub(crate) server_tx_bytes: u64,
    /// The transfer's report, if it completed.
    pub(crate) report: Option<quic::BulkReport>,
}

impl<H> Download<H> {
    /// The goodput in Mbit/s, if the download completed.
    pub(crate) fn goodput_mbps(&self) -> Option<f64> {
        self.report
            .as_ref()
            .map(|r| r.goodput.bits_per_sec() as f64 / 1e6)
    }
}

/// A QUIC download of `size` bytes by our client at `client` from our
/// server at `server` (both with `config`) on the testbed's end nodes,
/// the client wrapped by `wrap` (what runs beside it), within `limit`.
pub(crate) fn download<H: netsim::Host + Send + 'static>(
    testbed: &emu::Testbed,
    (client, server): (std::net::SocketAddr, std::net::SocketAddr),
    config: quic::QuicConfig,
    size: u64,
    limit: Duration,
    wrap: impl FnOnce(quic::QuicClient<quic::BulkClient>) -> H,
    inner: impl FnOnce(&H) -> &quic::QuicClient<quic::BulkClient>,
) -> Download<H> {
    use emu::{HostRunSpec, RunUntil};
    use quic::{BulkClient, BulkServerFactory, Direction, QuicClient, QuicServer};
    use std::sync::atomic::{AtomicBool, Ordering};
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = testbed.clock().now() + limit;
    let server_thread = testbed
        .run_host(
            testbed.server(),
            QuicServer::new(config.clone(), server, BulkServerFactory),
            vec![server],
            &HostRunSpec::new(RunUntil::Stopped, deadline, stop.clone()),
        )
        .expect("the server");
    let host = wrap(QuicClient::new(
        config,
        client,
        server,
        BulkClient::new(Direction::Download, size),
    ));
    let client_run = testbed
        .run_host(
            testbed.client(),
            host,
            vec![client],
            &HostRunSpec::new(RunUntil::Finished, deadline, stop.clone()),
        )
        .expect("the client")
        .join()
        .expect("the client's run");
    stop.store(true, Ordering::Relaxed);
    let server_run = server_thread.join().expect("the server's run");
    Download {
        report: quic::BulkReport::from_hosts(inner(&client_run.host), &server_run.host),
        server_tx_bytes: server_run
            .host
            .records()
            .map(|r| r.stats.udp_tx_bytes)
            .sum(),
        client: client_run.host,
    }
}
