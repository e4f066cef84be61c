//! A sweep on a real Slurm: the test starts a private one-node cluster
//! (munged, slurmctld and slurmd from Debian's munge and slurm-wlm, with
//! its own key, configuration file, ports and state directory in a
//! temporary directory, never /etc/slurm or a Slurm already running),
//! submits a small scenario with the repository's deploy/slurm/submit.sh
//! as a 3-task job array plus the merge job that waits for it
//! (`--dependency=afterok`), and compares the merged results with the
//! unsharded run's, byte for byte. It skips where the daemons cannot start
//! (not root, Slurm or munge not installed), and fails instead under
//! PEPKIT_REQUIRE_REAL=1.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const TEST: &str = "slurm_array_merges_to_the_unsharded_run";

/// The daemons of the private cluster, stopped (and its jobs cancelled)
/// when dropped, also when the test fails.
struct Cluster {
    dir: tempfile::TempDir,
    children: Vec<(&'static str, Child)>,
    jobs: Vec<String>,
}

impl Cluster {
    fn conf(&self) -> PathBuf {
        self.dir.path().join("slurm.conf")
    }

    /// A Slurm client command (`sbatch`, `scontrol`, …) that talks to this
    /// cluster only.
    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command.env("SLURM_CONF", self.conf());
        command
    }

    /// Starts a daemon as a child, its output into `NAME.out`.
    fn spawn(&mut self, name: &'static str, program: &str, args: &[&str]) -> Result<(), String> {
        let log = std::fs::File::create(self.dir.path().join(format!("{name}.out")))
            .map_err(|e| e.to_string())?;
        let child = self
            .command(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("starting {program}: {e}"))?;
        self.children.push((name, child));
        Ok(())
    }

    /// Every log of the cluster and of the jobs, to show when it fails.
    fn logs(&self) -> String {
        let mut text = String::new();
        let mut paths = vec![];
        for dir in [
            self.dir.path().to_path_buf(),
            self.dir.path().join("sweep/logs"),
        ] {
            if let Ok(entries) = std::fs::read_dir(&dir) {
                paths.extend(entries.flatten().map(|e| e.path()));
            }
        }
        paths.sort();
        for path in paths
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "log" || e == "out"))
        {
            let body = std::fs::read_to_string(path).unwrap_or_default();
            let tail: Vec<&str> = body.lines().rev().take(25).collect();
            text += &format!("--- {}\n", path.display());
            for line in tail.into_iter().rev() {
                text += line;
                text.push('\n');
            }
        }
        text
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.jobs.is_empty() {
            let _ = self
                .command("scancel")
                .args(&self.jobs)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        // slurmd, then slurmctld, then munged.
        for (_, child) in self.children.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Why the cluster cannot start here, if it cannot.
fn unavailable() -> Option<String> {
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(str::to_owned))
        });
    if uid.as_deref() != Some("0") {
        return Some("a private Slurm needs root (slurmd runs jobs as their user)".into());
    }
    let missing: Vec<&str> = [
        "munged",
        "slurmctld",
        "slurmd",
        "sbatch",
        "scontrol",
        "sinfo",
        "scancel",
    ]
    .into_iter()
    .filter(|tool| {
        !Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
    .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "{} not installed (scripts/setup installs slurm-wlm and munge)",
            missing.join(", ")
        )
    })
}

/// Two free TCP ports on this machine.
fn free_ports() -> (u16, u16) {
    let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    (
        a.local_addr().unwrap().port(),
        b.local_addr().unwrap().port(),
    )
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Starts munged, slurmctld and slurmd on a private configuration and
/// waits (at most 30 s) for the node to be idle.
fn start() -> Result<Cluster, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut cluster = Cluster {
        dir,
        children: Vec::new(),
        jobs: Vec::new(),
    };
    let at = cluster.dir.path().to_path_buf();
    let path = |name: &str| at.join(name).display().to_string();
    for sub in ["state", "spool"] {
        std::fs::create_dir(at.join(sub)).map_err(|e| e.to_string())?;
    }
    // A key of our own: the machine's munge key, if any, is not ours.
    let key: Vec<u8> = (0..1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(at.join("munge.key"), key).map_err(|e| e.to_string())?;
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(at.join("munge.key"), std::fs::Permissions::from_mode(0o600))
        .map_err(|e| e.to_string())?;
    std::fs::write(at.join("plugstack.conf"), "").map_err(|e| e.to_string())?;

    // The node as slurmd sees it (its name and CPUs).
    let probe = cluster
        .command("slurmd")
        .arg("-C")
        .output()
        .map_err(|e| format!("slurmd -C: {e}"))?;
    let node: Vec<String> = String::from_utf8_lossy(&probe.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .filter(|word| {
            [
                "NodeName=",
                "CPUs=",
                "Boards=",
                "SocketsPerBoard=",
                "CoresPerSocket=",
                "ThreadsPerCore=",
            ]
            .iter()
            .any(|key| word.starts_with(key))
        })
        .map(str::to_owned)
        .collect();
    let name = node
        .iter()
        .find_map(|w| w.strip_prefix("NodeName="))
        .ok_or_else(|| format!("slurmd -C gave no node: {}", text(&probe)))?
        .to_string();
    let (ctld_port, d_port) = free_ports();
    let conf = format!(
        "ClusterName=pepkittest\n\
         SlurmctldHost={name}(127.0.0.1)\n\
         SlurmUser=root\nSlurmdUser=root\n\
         SlurmctldPort={ctld_port}\nSlurmdPort={d_port}\n\
         AuthType=auth/munge\nCredType=cred/munge\n\
         AuthInfo=socket={socket}\n\
         StateSaveLocation={state}\nSlurmdSpoolDir={spool}\n\
         SlurmctldPidFile={ctld_pid}\nSlurmdPidFile={d_pid}\n\
         SlurmctldLogFile={ctld_log}\nSlurmdLogFile={d_log}\n\
         PlugStackConfig={plugstack}\n\
         ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
         SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n\
         ReturnToService=2\nMpiDefault=none\nMailProg=/bin/true\n\
         JobAcctGatherType=jobacct_gather/none\n\
         AccountingStorageType=accounting_storage/none\n\
         JobCompType=jobcomp/none\nSwitchType=switch/none\n\
         {node} NodeAddr=127.0.0.1 State=UNKNOWN\n\
         PartitionName=pepkit Nodes={name} Default=YES MaxTime=INFINITE State=UP\n",
        socket = path("munge.socket"),
        state = path("state"),
        spool = path("spool"),
        ctld_pid = path("slurmctld.pid"),
        d_pid = path("slurmd.pid"),
        ctld_log = path("slurmctld.log"),
        d_log = path("slurmd.log"),
        plugstack = path("plugstack.conf"),
        node = node.join(" "),
    );
    std::fs::write(cluster.conf(), conf).map_err(|e| e.to_string())?;

    let munge = [
        "-F".to_string(),
        "--force".into(),
        format!("--socket={}", path("munge.socket")),
        format!("--key-file={}", path("munge.key")),
        format!("--pid-file={}", path("munged.pid")),
        format!("--log-file={}", path("munged.log")),
        format!("--seed-file={}", path("munged.seed")),
    ];
    let munge: Vec<&str> = munge.iter().map(String::as_str).collect();
    cluster.spawn("munged", "munged", &munge)?;
    let socket = at.join("munge.socket");
    wait_for(Duration::from_secs(10), || socket.exists())
        .map_err(|_| format!("munged did not start:\n{}", cluster.logs()))?;
    let conf = cluster.conf().display().to_string();
    cluster.spawn("slurmctld", "slurmctld", &["-D", "-c", "-f", &conf])?;
    cluster.spawn("slurmd", "slurmd", &["-D", "-f", &conf])?;
    let idle = wait_for(Duration::from_secs(30), || {
        cluster
            .command("sinfo")
            .args(["-h", "-o", "%T", "-n", &name])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "idle")
    });
    idle.map_err(|_| format!("the node did not become idle in 30 s:\n{}", cluster.logs()))?;
    Ok(cluster)
}

/// Polls `ready` every 200 ms until it holds or `limit` has passed.
fn wait_for(limit: Duration, mut ready: impl FnMut() -> bool) -> Result<(), ()> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if ready() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(())
}

/// A job's state (`COMPLETED`, `PENDING`, …) as scontrol gives it.
fn state(cluster: &Cluster, job: &str) -> String {
    let output = cluster
        .command("scontrol")
        .args(["show", "job", "-o", job])
        .output();
    let output = output.map(|o| text(&o)).unwrap_or_default();
    output
        .split_whitespace()
        .find_map(|w| w.strip_prefix("JobState="))
        .unwrap_or("UNKNOWN")
        .to_string()
}

#[test]
fn slurm_array_merges_to_the_unsharded_run() {
    if !emu::require_or_skip(TEST, unavailable().map_or(Ok(()), Err)) {
        return;
    }
    let began = Instant::now();
    let cluster = match start() {
        Ok(cluster) => cluster,
        Err(reason) => {
            // Installed but not startable here (no loopback, a port race):
            // the same rule as a missing capability.
            assert!(!emu::require_or_skip(
                TEST,
                Err(format!("the private Slurm did not start: {reason}"))
            ),);
            return;
        }
    };
    let mut cluster = cluster;
    let started = began.elapsed();
    let at = cluster.dir.path().to_path_buf();
    std::fs::write(
        at.join("scenario.toml"),
        common::sharded_sweep("slurm-array"),
    )
    .unwrap();
    let repository = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let submit = repository.join("deploy/slurm/submit.sh");
    let output = cluster
        .command("bash")
        .arg(&submit)
        .args(["scenario.toml", "3", "sweep"])
        .env("PEPKIT", env!("CARGO_BIN_EXE_pepkit"))
        .current_dir(&at)
        .output()
        .unwrap();
    let said = text(&output);
    assert!(output.status.success(), "submit.sh failed: {said}");
    // "shards: job A (array 0-2); merge: job B; results: DIR/merged"
    let jobs: Vec<String> = said
        .split("job ")
        .skip(1)
        .filter_map(|rest| rest.split([' ', ';']).next().map(str::to_owned))
        .collect();
    assert_eq!(jobs.len(), 2, "{said}");
    cluster.jobs = jobs.clone();
    let merge = &jobs[1];
    let mut last = String::new();
    let done = wait_for(Duration::from_secs(120), || {
        last = state(&cluster, merge);
        !matches!(
            last.as_str(),
            "PENDING" | "RUNNING" | "CONFIGURING" | "COMPLETING"
        )
    });
    assert!(
        done.is_ok() && last == "COMPLETED",
        "the merge job is {last} after 120 s or less:\n{}",
        cluster.logs()
    );
    let swept = began.elapsed();

    // Each array task wrote its own shard: 1/3, 2/3 and 3/3.
    for task in 0..3 {
        let manifest =
            std::fs::read_to_string(at.join(format!("sweep/shards/{task}/shard.json"))).unwrap();
        let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
        assert_eq!(manifest["shard"]["index"], task + 1);
        assert_eq!(manifest["shard"]["count"], 3);
    }
    let whole = Command::new(env!("CARGO_BIN_EXE_pepkit"))
        .args(["run", "scenario.toml", "--quiet", "--out", "whole"])
        .current_dir(&at)
        .output()
        .unwrap();
    assert!(whole.status.success(), "{}", text(&whole));
    let (a, b) = (
        common::files(&at.join("whole")),
        common::files(&at.join("sweep/merged")),
    );
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    assert!(a.len() > 6, "{:?}", a.keys());
    for (name, bytes) in &a {
        assert!(
            bytes == &b[name],
            "{} differs from the unsharded run's",
            name.display()
        );
    }
    eprintln!(
        "{TEST}: cluster up in {:.1} s, array and merge done in {:.1} s",
        started.as_secs_f64(),
        (swept - started).as_secs_f64()
    );
}
