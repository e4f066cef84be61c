//! The interception of a transparent PEP (the kernel's TPROXY recipe): an
//! nftables ruleset that marks forwarded TCP and hands new connections to
//! the PEP's listener, policy routing that delivers marked packets to the
//! local stack, and installing and removing both.

use crate::PepError;
use emu::sys::command::{self, CommandError};
use std::thread;
use std::time::Duration;

/// The nftables table the PEP's ruleset lives in.
pub const TABLE: &str = "pepkit_pep";
/// The firewall mark that routes intercepted packets to the local stack.
pub const FWMARK: u32 = 0x1;
/// The routing table holding the `local 0.0.0.0/0 dev lo` route.
pub const ROUTE_TABLE: u32 = 100;

/// The nftables ruleset that diverts forwarded TCP to a transparent
/// listener on `port` (the kernel's TPROXY recipe): packets of connections
/// the PEP already owns (`socket transparent 1`) and new connections
/// (`tproxy to :port`) are marked, and the mark routes them to the local
/// stack.
pub fn ruleset(port: u16) -> String {
    format!(
        "table ip {TABLE} {{\n\
         \tchain divert {{\n\
         \t\ttype filter hook prerouting priority mangle; policy accept;\n\
         \t\tmeta l4proto tcp socket transparent 1 meta mark set {FWMARK:#x} accept\n\
         \t\tmeta l4proto tcp tproxy to :{port} meta mark set {FWMARK:#x} accept\n\
         \t}}\n\
         }}\n"
    )
}

/// The `ip` commands that route marked packets to the local stack, and the
/// commands that undo them (in the order to run them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutingCommands {
    /// `ip rule add …`, `ip route add …`: the arguments after `ip`.
    pub install: Vec<Vec<String>>,
    /// `ip route del …`, `ip rule del …`: the arguments after `ip`.
    pub undo: Vec<Vec<String>>,
}

/// The policy routing of the TPROXY recipe:
/// `ip rule add fwmark 0x1 lookup 100` and
/// `ip route add local 0.0.0.0/0 dev lo table 100`, with their undo commands.
pub fn routing_commands() -> RoutingCommands {
    let mark = format!("{FWMARK:#x}");
    let table = ROUTE_TABLE.to_string();
    // `verb` is "add" or "del": undo is the same command with "del".
    let rule = |verb: &str| ip_args(&["rule", verb, "fwmark", &mark, "lookup", &table]);
    let local_route = |verb: &str| {
        ip_args(&[
            "route",
            verb,
            "local",
            "0.0.0.0/0",
            "dev",
            "lo",
            "table",
            &table,
        ])
    };
    RoutingCommands {
        install: vec![rule("add"), local_route("add")],
        undo: vec![local_route("del"), rule("del")],
    }
}

fn ip_args(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

/// Installs the interception for a PEP on `port` in the current network
/// namespace: the nftables table (replacing an older one of the same name)
/// and the policy routing. Needs root (`CAP_NET_ADMIN`); `nft` comes from
/// the Debian package `nftables`.
pub fn install(port: u16) -> Result<(), PepError> {
    // Leftovers of an earlier run are removed first, so that installing
    // twice leaves one copy of everything.
    let _ = uninstall();
    // `add` then `delete` makes the delete succeed whether or not the table
    // existed; the whole input is one atomic transaction.
    let text = format!(
        "add table ip {TABLE}\ndelete table ip {TABLE}\n{}",
        ruleset(port)
    );
    command::run_input("nft", &["-f", "-"], Some(&text)).map_err(PepError::Setup)?;
    for args in routing_commands().install {
        if let Err(e) = command::ip(&args) {
            let _ = uninstall();
            return Err(PepError::Setup(e));
        }
    }
    Ok(())
}

/// Removes what [`install`] set up from the current network namespace.
/// Missing pieces are not errors. A step that fails otherwise is tried up to
/// three times (a daemon stopped through `timeout` can see the first tool it
/// starts killed by the signal `timeout` sends to its process group); the
/// first lasting failure is returned after trying every step.
pub fn uninstall() -> Result<(), PepError> {
    let mut first = None;
    let text = format!("add table ip {TABLE}\ndelete table ip {TABLE}\n");
    let mut steps: Vec<Box<dyn Fn() -> Result<String, CommandError>>> = vec![Box::new(move || {
        command::run_input("nft", &["-f", "-"], Some(&text))
    })];
    for args in routing_commands().undo {
        steps.push(Box::new(move || command::ip(&args)));
    }
    for step in &steps {
        if let Err(e) = with_retries(step.as_ref()) {
            first.get_or_insert(e);
        }
    }
    // `ip rule add` twice adds two rules: remove any further copies (a
    // bounded number of them).
    let rule_undo = routing_commands().undo.pop().unwrap_or_default();
    for _ in 0..16 {
        if command::ip(&rule_undo).is_err() {
            break;
        }
    }
    match first {
        Some(e) => Err(PepError::Setup(e)),
        None => Ok(()),
    }
}

/// Runs an undo step up to three times; "already gone" counts as success.
fn with_retries(step: &dyn Fn() -> Result<String, CommandError>) -> Result<(), CommandError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match step() {
            Ok(_) => return Ok(()),
            Err(CommandError::Failed { stderr, .. })
                if stderr.contains("No such file")
                    || stderr.contains("No such process")
                    || stderr.contains("does not exist") =>
            {
                return Ok(());
            }
            Err(e @ CommandError::Missing { .. }) => return Err(e),
            Err(e) if attempt >= 3 => return Err(e),
            Err(_) => thread::sleep(Duration::from_millis(100)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ruleset_follows_the_tproxy_recipe() {
        let text = ruleset(5000);
        assert!(text.starts_with("table ip pepkit_pep {\n"), "{text}");
        assert!(text.contains("type filter hook prerouting priority mangle; policy accept;"));
        assert!(text.contains("meta l4proto tcp socket transparent 1 meta mark set 0x1 accept"));
        assert!(text.contains("meta l4proto tcp tproxy to :5000 meta mark set 0x1 accept"));
        assert!(ruleset(6000).contains("tproxy to :6000 "));
    }

    #[test]
    fn routing_commands_undo_in_reverse() {
        let commands = routing_commands();
        let words = |v: &[String]| v.join(" ");
        assert_eq!(
            words(&commands.install[0]),
            "rule add fwmark 0x1 lookup 100"
        );
        assert_eq!(
            words(&commands.install[1]),
            "route add local 0.0.0.0/0 dev lo table 100"
        );
        assert_eq!(
            words(&commands.undo[0]),
            "route del local 0.0.0.0/0 dev lo table 100"
        );
        assert_eq!(words(&commands.undo[1]), "rule del fwmark 0x1 lookup 100");
    }
}
