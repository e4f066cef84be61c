//! The cluster job files in deploy/ and `--shard auto`: the Kubernetes
//! manifests run an Indexed Job whose pods take their shard from
//! `JOB_COMPLETION_INDEX`, then merge; `pepkit run --shard auto` reads
//! both schedulers' 0-based variables (deploy/slurm is run on a real
//! Slurm by tests/slurm.rs).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use yaml_rust2::{Yaml, YamlLoader};

const SCHEDULER_VARIABLES: [&str; 7] = [
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_COUNT",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_MAX",
    "SLURM_ARRAY_TASK_STEP",
    "JOB_COMPLETION_INDEX",
    "PEPKIT_SHARDS",
];

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn documents(name: &str) -> Vec<Yaml> {
    let text = std::fs::read_to_string(repository().join("deploy/kubernetes").join(name)).unwrap();
    YamlLoader::load_from_str(&text).unwrap()
}

fn find_job<'a>(documents: &'a [Yaml], name: &str) -> &'a Yaml {
    documents
        .iter()
        .find(|d| d["kind"].as_str() == Some("Job") && d["metadata"]["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no Job {name}"))
}

fn strings(yaml: &Yaml) -> Vec<String> {
    yaml.as_vec()
        .unwrap()
        .iter()
        .map(|y| y.as_str().unwrap().to_string())
        .collect()
}

/// The claim mounted at `path` in a Job's pod.
fn claim_at(job: &Yaml, path: &str) -> String {
    let pod = &job["spec"]["template"]["spec"];
    let mount = pod["containers"][0]["volumeMounts"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"].as_str() == Some(path))
        .unwrap_or_else(|| panic!("nothing mounted at {path}"));
    let volume = pod["volumes"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap();
    volume["persistentVolumeClaim"]["claimName"]
        .as_str()
        .unwrap()
        .to_string()
}

/// `pepkit ARGS` in `dir` with only `vars` of the schedulers' variables.
fn pepkit(dir: &Path, args: &[String], vars: &[(&str, String)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pepkit"));
    command.args(args).current_dir(dir);
    for name in SCHEDULER_VARIABLES {
        command.env_remove(name);
    }
    command.envs(vars.iter().map(|(k, v)| (k, v)));
    command.output().unwrap()
}

fn said(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).to_string() + &String::from_utf8_lossy(&output.stderr)
}

fn shard_of(dir: &Path) -> (u64, u64) {
    let text = std::fs::read_to_string(dir.join("shard.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&text).unwrap();
    let shard = &manifest["shard"];
    (
        shard["index"].as_u64().unwrap(),
        shard["count"].as_u64().unwrap(),
    )
}

#[test]
fn the_kubernetes_indexed_job_runs_every_shard_and_merges() {
    let sweep = documents("sweep.yaml");
    let job = find_job(&sweep, "pepkit-sweep");
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"].as_str(), Some("Indexed"));
    let completions = spec["completions"].as_i64().unwrap();
    let parallelism = spec["parallelism"].as_i64().unwrap();
    assert!(completions >= 1 && (1..=completions).contains(&parallelism));
    let container = &spec["template"]["spec"]["containers"][0];
    let command = strings(&container["command"]);
    assert_eq!(command[..2], ["pepkit", "run"]);
    let after = |flag: &str| {
        let at = command
            .iter()
            .position(|a| a == flag)
            .unwrap_or_else(|| panic!("no {flag}"));
        command[at + 1].clone()
    };
    assert_eq!(after("--shard"), format!("auto/{completions}"));
    let out = after("--out");
    assert!(out.starts_with("/results/shards/") && out.contains("$(JOB_COMPLETION_INDEX)"));
    // The index is declared in the container's env, so $(…) expands.
    let index = container["env"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|e| e["name"].as_str() == Some("JOB_COMPLETION_INDEX"))
        .expect("JOB_COMPLETION_INDEX in env");
    assert_eq!(
        index["valueFrom"]["fieldRef"]["fieldPath"].as_str(),
        Some("metadata.annotations['batch.kubernetes.io/job-completion-index']")
    );
    let claim = claim_at(job, "/results");
    let volume = sweep
        .iter()
        .find(|d| d["kind"].as_str() == Some("PersistentVolumeClaim"))
        .unwrap();
    assert_eq!(volume["metadata"]["name"].as_str(), Some(claim.as_str()));
    assert_eq!(strings(&volume["spec"]["accessModes"]), ["ReadWriteMany"]);

    let merge = documents("merge.yaml");
    let merge = find_job(&merge, "pepkit-merge");
    assert_eq!(claim_at(merge, "/results"), claim);
    let merge_command = strings(&merge["spec"]["template"]["spec"]["containers"][0]["command"]);
    assert!(
        merge_command
            .last()
            .unwrap()
            .contains("pepkit merge /results/shards/* --out /results/merged"),
        "{merge_command:?}"
    );

    // Each pod's command, with this test's scenario and directories: pod i
    // writes shard i+1 of `completions`, and the shards merge to the whole.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("scenario.toml"),
        common::sharded_sweep("cluster-jobs"),
    )
    .unwrap();
    let mut args = command[1..].to_vec();
    args[1] = "scenario.toml".into();
    let out_at = args.iter().position(|a| *a == out).unwrap();
    let mut shards = Vec::new();
    for index in 0..completions {
        let dir = tmp.path().join(format!("shards/{index}"));
        args[out_at] = dir.display().to_string();
        let output = pepkit(
            tmp.path(),
            &args,
            &[("JOB_COMPLETION_INDEX", index.to_string())],
        );
        assert!(output.status.success(), "{}", said(&output));
        assert_eq!(shard_of(&dir), (index as u64 + 1, completions as u64));
        shards.push(dir.display().to_string());
    }
    let merged = tmp.path().join("merged").display().to_string();
    let mut merge_args = vec!["merge".to_string()];
    merge_args.extend(shards);
    merge_args.extend(["--out".into(), merged.clone()]);
    let output = pepkit(tmp.path(), &merge_args, &[]);
    assert!(output.status.success(), "{}", said(&output));
    let whole = tmp.path().join("whole").display().to_string();
    let args = ["run", "scenario.toml", "--quiet", "--out", &whole].map(String::from);
    assert!(pepkit(tmp.path(), &args, &[]).status.success());
    for name in [
        "summary.json",
        "summary.md",
        "trials.csv",
        "trials/s/1.json",
    ] {
        let a = std::fs::read(Path::new(&whole).join(name)).unwrap();
        let b = std::fs::read(Path::new(&merged).join(name)).unwrap();
        assert!(a == b, "{name} differs");
    }
}

#[test]
fn shard_auto_reads_the_schedulers_variables_from_zero() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("scenario.toml"),
        common::sharded_sweep("cluster-jobs"),
    )
    .unwrap();
    let run = |shard: &str, out: &str, vars: &[(&str, String)]| {
        let args = [
            "run",
            "scenario.toml",
            "--quiet",
            "--shard",
            shard,
            "--out",
            out,
        ];
        pepkit(tmp.path(), &args.map(String::from), vars)
    };
    let slurm = |id: u32| {
        vec![
            ("SLURM_ARRAY_TASK_ID", id.to_string()),
            ("SLURM_ARRAY_TASK_COUNT", "3".to_string()),
        ]
    };
    for id in 0..3 {
        let out = format!("slurm-{id}");
        let output = run("auto", &out, &slurm(id));
        assert!(output.status.success(), "{}", said(&output));
        assert_eq!(shard_of(&tmp.path().join(&out)), (u64::from(id) + 1, 3));
    }
    // The array's bounds alone, numbered from 1 (--array=1-4).
    let bounds = [
        ("SLURM_ARRAY_TASK_ID", "4".to_string()),
        ("SLURM_ARRAY_TASK_MIN", "1".to_string()),
        ("SLURM_ARRAY_TASK_MAX", "4".to_string()),
    ];
    assert!(run("auto", "bounds", &bounds).status.success());
    assert_eq!(shard_of(&tmp.path().join("bounds")), (4, 4));
    let k8s = [("JOB_COMPLETION_INDEX", "1".to_string())];
    assert!(run("auto/2", "k8s", &k8s).status.success());
    assert_eq!(shard_of(&tmp.path().join("k8s")), (2, 2));

    let refused = |output: Output, expected: &str| {
        assert_eq!(output.status.code(), Some(2), "{}", said(&output));
        assert!(said(&output).contains(expected), "{}", said(&output));
    };
    refused(run("auto", "none", &[]), "neither SLURM_ARRAY_TASK_ID");
    refused(run("auto", "k8s-alone", &k8s), "--shard auto/N");
    refused(
        run("auto/4", "wrong-count", &slurm(0)),
        "the scheduler runs 3 tasks",
    );
    refused(run("0/16", "zero", &[]), "K counts from 1");
    let help = pepkit(tmp.path(), &["run".into(), "--help".into()], &[]);
    // clap wraps the help to the terminal's width: compare the words.
    let words = said(&help).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("K counts from 1"), "{}", said(&help));
}
