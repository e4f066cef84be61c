//! The house rules that keep pepkit simple to extend, checked on the
//! source tree (docs/architecture.md):
//!
//! * no import circle between modules of one crate: a module that uses an
//!   item of another (by `crate::` or `super::` path) is never used back,
//!   directly or through others, unless one contains the other (a child
//!   may use its parent's items, a parent re-export its child's);
//! * the congestion controllers depend on no system crate, and real mode's
//!   `emu` on neither PEMI nor Sidekick: systems sit above the substrate;
//! * nothing in `emu` or in the `pepkit` command but a benchmark is named
//!   after a system: a system runs as a daemon through `pepkit middle`;
//! * no place outside a workload's module asks whether the workload is a
//!   bulk transfer by name.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A source file's module path within its crate (`lib.rs`: empty).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The code of `text` without comments and string literals (roughly: line
/// comments and the contents of ordinary strings).
fn code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_string = false;
        let mut previous = ' ';
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            if !in_string && c == '/' && chars.peek() == Some(&'/') {
                break;
            }
            if c == '"' && previous != '\\' {
                in_string = !in_string;
                out.push(c);
            } else if !in_string {
                out.push(c);
            }
            previous = c;
        }
        out.push('\n');
    }
    out
}

/// The paths a module's code names from `crate::` or `super::`, each
/// resolved to the module it points into (the longest known prefix).
fn targets(
    module: &[String],
    code: &str,
    modules: &BTreeSet<Vec<String>>,
) -> BTreeSet<Vec<String>> {
    let mut found = BTreeSet::new();
    let bytes = code.as_bytes();
    for anchor in ["crate::", "super::"] {
        let mut at = 0;
        while let Some(i) = code[at..].find(anchor) {
            let start = at + i;
            at = start + anchor.len();
            // A whole word: not `pepkit_crate::`, not `$crate::`.
            let before = start.checked_sub(1).map(|b| bytes[b] as char);
            if before.is_some_and(|b| b.is_alphanumeric() || b == '_' || b == '$') {
                continue;
            }
            let mut path: Vec<String> = if anchor == "crate::" {
                Vec::new()
            } else {
                module[..module.len().saturating_sub(1)].to_vec()
            };
            let mut rest = &code[at..];
            while let Some(more) = rest.strip_prefix("super::") {
                path.pop();
                rest = more;
            }
            // `{a, b::c}` after the prefix: each branch is a path.
            let branches: Vec<&str> = match rest.strip_prefix('{') {
                Some(group) => group[..group.find('}').unwrap_or(group.len())]
                    .split(',')
                    .collect(),
                None => vec![rest],
            };
            for branch in branches {
                let mut candidate = path.clone();
                let mut best = path.clone();
                for part in branch.trim().split("::") {
                    let name: String = part
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if name.is_empty() {
                        break;
                    }
                    candidate.push(name);
                    if modules.contains(&candidate) {
                        best = candidate.clone();
                    }
                    if part.len() != candidate.last().unwrap().len() {
                        break;
                    }
                }
                found.insert(best);
            }
        }
    }
    found
}

/// The circles in `edges` (strongly connected groups of two or more).
fn circles(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<String>> {
    let nodes: Vec<&Vec<String>> = edges.keys().collect();
    let reach = |from: &Vec<String>| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(node) = stack.pop() {
            for next in edges.get(&node).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&Vec<String>, BTreeSet<Vec<String>>> =
        nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut out = BTreeSet::new();
    for a in &nodes {
        let group: Vec<String> = nodes
            .iter()
            .filter(|b| reachable[*a].contains(**b) && reachable[**b].contains(*a))
            .map(|b| b.join("::"))
            .collect();
        if group.len() > 1 {
            out.insert(group);
        }
    }
    out.into_iter().collect()
}

#[test]
fn no_module_circles_within_a_crate() {
    let mut problems = Vec::new();
    for entry in std::fs::read_dir(root().join("crates")).unwrap() {
        let src = entry.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        let mut files = Vec::new();
        sources(&src, &mut files);
        let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(&src, f)).collect();
        let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
        for file in &files {
            let module = module_of(&src, file);
            let text = code(&std::fs::read_to_string(file).unwrap());
            for target in targets(&module, &text, &modules) {
                let related = target.starts_with(&module) || module.starts_with(&target);
                if !related {
                    edges.entry(module.clone()).or_default().insert(target);
                }
            }
            edges.entry(module).or_default();
        }
        for circle in circles(&edges) {
            problems.push(format!("{}: {}", src.display(), circle.join(" <-> ")));
        }
    }
    assert!(
        problems.is_empty(),
        "module circles:\n{}",
        problems.join("\n")
    );
}

/// The `[dependencies]` table of a crate's manifest.
fn dependencies(krate: &str) -> String {
    let manifest =
        std::fs::read_to_string(root().join("crates").join(krate).join("Cargo.toml")).unwrap();
    let start = manifest.find("[dependencies]").unwrap();
    let end = manifest[start + 1..]
        .find("\n[")
        .map_or(manifest.len(), |e| start + 1 + e);
    manifest[start..end].to_string()
}

#[test]
fn systems_sit_above_the_substrate() {
    let cc = std::fs::read_to_string(root().join("crates/cc/Cargo.toml")).unwrap();
    for system in ["pepkit-tunnel", "pepkit-sidekick", "pepkit-pemi"] {
        assert!(!cc.contains(system), "crates/cc/Cargo.toml names {system}");
    }
    let emu = dependencies("emu");
    for system in [
        "pepkit-pemi",
        "pepkit-sidekick",
        "pepkit-tunnel",
        "pepkit-pep",
    ] {
        assert!(!emu.contains(system), "emu depends on {system}");
    }
}

#[test]
fn emu_and_the_command_know_no_system_by_file_name() {
    let systems = ["sidekick", "pemi", "tecc", "tunnel", "split", "pep"];
    for dir in ["crates/emu/src", "crates/pepkit/src"] {
        let mut files = Vec::new();
        sources(&root().join(dir), &mut files);
        for file in files {
            let relative = file.strip_prefix(root().join(dir)).unwrap();
            let name = relative.to_string_lossy();
            let benchmark = name.starts_with("bench");
            let named = relative.components().any(|c| {
                let part = c.as_os_str().to_string_lossy();
                let stem = part.trim_end_matches(".rs");
                systems
                    .iter()
                    .any(|s| stem == *s || stem.starts_with(&format!("{s}_")))
            });
            assert!(benchmark || !named, "{dir}/{name} is named after a system");
        }
    }
}

#[test]
fn only_a_workloads_module_names_its_variant() {
    let src = root().join("crates/experiments/src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    for file in files {
        if file.starts_with(src.join("workloads")) {
            continue;
        }
        let text = code(&std::fs::read_to_string(&file).unwrap());
        assert!(
            !text.contains("Workload::Bulk"),
            "{} tests the workload by name",
            file.display()
        );
    }
}
