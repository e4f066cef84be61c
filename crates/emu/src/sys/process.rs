//! Child processes of a testbed (daemons, independent peers): started in a
//! network namespace under `timeout`, output collected, stopped with
//! SIGTERM and, if they do not go, SIGKILL.

use crate::sys::command::{CommandError, have};
use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A running child process.
pub struct Process {
    child: Child,
    stdout: Option<JoinHandle<String>>,
    stderr: Option<JoinHandle<String>>,
}

/// What a process left behind.
#[derive(Clone, Debug)]
pub struct Finished {
    /// How it ended (`None` if it had to be killed and could not be
    /// waited for).
    pub status: Option<ExitStatus>,
    /// Everything it printed on standard output.
    pub stdout: String,
    /// Everything it printed on standard error.
    pub stderr: String,
}

impl Finished {
    /// Whether it exited with status 0.
    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

impl Process {
    /// Starts `program args…` in network namespace `netns` (or the current
    /// one if `None`), killed by `timeout` after `limit`; `name` labels its
    /// errors.
    pub fn spawn<S: AsRef<str>>(
        name: &str,
        netns: Option<&str>,
        limit: Duration,
        program: &str,
        args: &[S],
    ) -> Result<Process, CommandError> {
        if !have(program) && !std::path::Path::new(program).is_file() {
            return Err(CommandError::Missing {
                program: program.to_string(),
                package: "it",
            });
        }
        let mut command = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, "timeout"]);
                c
            }
            None => Command::new("timeout"),
        };
        // SIGKILL 2 s after the SIGTERM if it lingers (`timeout` takes
        // s/m/h/d suffixes only). `timeout` leads a process group of its
        // own and passes a SIGTERM both to the command and to that group,
        // so the command may see it twice: daemons treat a repeated SIGTERM
        // like the first.
        command
            .args([
                "-k",
                "2",
                &format!("{:.3}s", limit.as_secs_f64().max(0.001)),
                program,
            ])
            .args(args.iter().map(AsRef::as_ref))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().map_err(|source| CommandError::Spawn {
            command: format!(
                "{name}: {program} (in {})",
                netns.unwrap_or("this namespace")
            ),
            source,
        })?;
        let stdout = child.stdout.take().map(drain);
        let stderr = child.stderr.take().map(drain);
        Ok(Process {
            child,
            stdout,
            stderr,
        })
    }

    /// Whether it has exited.
    pub fn has_exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Waits up to `limit` for it to exit by itself; kills it after that.
    pub fn wait(mut self, limit: Duration) -> Finished {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.has_exited() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.stop()
    }

    /// Asks it to stop (SIGTERM), waits up to 3 s, kills it if needed,
    /// and returns its output.
    pub fn stop(mut self) -> Finished {
        if !self.has_exited() {
            // `ip netns exec` execs `timeout`, which passes SIGTERM on.
            self.terminate(Duration::from_secs(3));
        }
        let status = self.child.wait().ok();
        let join =
            |h: Option<JoinHandle<String>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
        Finished {
            status,
            stdout: join(self.stdout.take()),
            stderr: join(self.stderr.take()),
        }
    }
}

impl Process {
    /// SIGTERM, then after `grace` SIGKILL to the whole process group:
    /// `timeout` leads a group of its own, so that reaches the command too.
    fn terminate(&mut self, grace: Duration) {
        let pid = self.child.id();
        let _ = crate::sys::send_signal(pid, libc::SIGTERM, false);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && !self.has_exited() {
            std::thread::sleep(Duration::from_millis(10));
        }
        if !self.has_exited() {
            let _ = crate::sys::send_signal(pid, libc::SIGKILL, true);
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if !self.has_exited() {
            self.terminate(Duration::from_millis(500));
            let _ = self.child.wait();
        }
    }
}
