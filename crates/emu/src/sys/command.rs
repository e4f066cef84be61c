//! Running the system tools real mode configures the kernel with (`ip`,
//! `ethtool`, `sysctl`, `nft`), each under a time limit, with errors that
//! say which command failed and why.

use std::io;
use std::process::{Command, Stdio};
use std::time::Duration;

/// How long one configuration command may take.
pub const COMMAND_LIMIT: Duration = Duration::from_secs(20);

/// A configuration command that could not be run or failed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The program is not installed.
    #[error("{program} not found: run scripts/setup (it installs {package})")]
    Missing {
        /// The program.
        program: String,
        /// The Debian package that has it.
        package: &'static str,
    },
    /// It exited with an error.
    #[error("`{command}` failed: {stderr}")]
    Failed {
        /// The command line.
        command: String,
        /// What it printed on standard error (trimmed).
        stderr: String,
    },
    /// It could not be started.
    #[error("cannot run `{command}`: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// Why.
        source: io::Error,
    },
}

/// The Debian package of a tool real mode uses, for error messages.
fn package_of(program: &str) -> &'static str {
    match program {
        "ip" => "iproute2",
        "ethtool" => "ethtool",
        "nft" => "nftables",
        "sysctl" => "procps",
        "timeout" => "coreutils",
        _ => "it",
    }
}

/// Whether `program` is on the `PATH`.
pub fn have(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Runs `program args…` under [`COMMAND_LIMIT`] and returns its standard
/// output.
pub fn run<S: AsRef<str>>(program: &str, args: &[S]) -> Result<String, CommandError> {
    run_input(program, args, None)
}

/// Like [`run`], writing `input` to the command's standard input.
pub fn run_input<S: AsRef<str>>(
    program: &str,
    args: &[S],
    input: Option<&str>,
) -> Result<String, CommandError> {
    let line = std::iter::once(program)
        .chain(args.iter().map(AsRef::as_ref))
        .collect::<Vec<_>>()
        .join(" ");
    if !have(program) {
        return Err(CommandError::Missing {
            program: program.to_string(),
            package: package_of(program),
        });
    }
    let mut command = Command::new("timeout");
    command
        .args(["-k", "2", &format!("{}", COMMAND_LIMIT.as_secs()), program])
        .args(args.iter().map(AsRef::as_ref))
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let spawn_error = |source| CommandError::Spawn {
        command: line.clone(),
        source,
    };
    let mut child = command.spawn().map_err(spawn_error)?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        use std::io::Write;
        stdin.write_all(text.as_bytes()).map_err(spawn_error)?;
    }
    let output = child.wait_with_output().map_err(spawn_error)?;
    if !output.status.success() {
        let mut stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
        if output.status.code() == Some(124) {
            stderr = format!("timed out after {} s", COMMAND_LIMIT.as_secs());
        }
        return Err(CommandError::Failed {
            command: line,
            stderr,
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Runs `ip args…`.
pub fn ip<S: AsRef<str>>(args: &[S]) -> Result<String, CommandError> {
    run("ip", args)
}

/// Runs `program args…` inside network namespace `netns`.
pub fn in_netns<S: AsRef<str>>(
    netns: &str,
    program: &str,
    args: &[S],
) -> Result<String, CommandError> {
    if !have(program) {
        return Err(CommandError::Missing {
            program: program.to_string(),
            package: package_of(program),
        });
    }
    let mut full: Vec<&str> = vec!["netns", "exec", netns, program];
    full.extend(args.iter().map(AsRef::as_ref));
    ip(&full)
}
