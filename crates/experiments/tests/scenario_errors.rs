//! A wrong scenario file gets an error that names the field, says what is
//! allowed, and (for variants) which variant.

use experiments::ScenarioFile;
use std::path::PathBuf;

const BASE: &str = r#"
name = "t"
title = "test"
path = ["near", "far"]
[client]
addr = "10.0.0.1"
[server]
addr = "10.0.1.1"
[hops.near]
delay = "1ms"
rate = "100Mbit/s"
[hops.far]
delay = "25ms"
rate = "10Mbit/s"
[workload]
kind = "bulk"
direction = "upload"
size = "1MB"
"#;

#[test]
fn a_file_without_endpoint_addresses_gets_the_defaults() {
    let text = BASE.replace("[client]\naddr = \"10.0.0.1\"\n", "").replace(
        "[server]\naddr = \"10.0.1.1\"\n",
        "[server]\ncontroller = \"bbr\"\n",
    );
    let file = ScenarioFile::parse(&text, PathBuf::from("t.toml")).unwrap();
    let flow = &file.base.flows()[0];
    assert_eq!(flow.client.ip(), experiments::scenario::DEFAULT_CLIENT);
    assert_eq!(flow.server.ip(), experiments::scenario::DEFAULT_SERVER);
    assert_eq!(flow.server_controller, cc::Controller::Bbr);
}

fn error(text: &str) -> String {
    match ScenarioFile::parse(text, PathBuf::from("bad.toml")) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(error) => error.to_string(),
    }
}

fn assert_mentions(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(
            message.contains(part),
            "{message:?} does not mention {part:?}"
        );
    }
}

#[test]
fn the_base_parses_and_gets_defaults() {
    let file = ScenarioFile::parse(BASE, PathBuf::from("ok.toml")).unwrap();
    assert_eq!(file.variants.len(), 1);
    assert_eq!(file.base.trials, 10);
    assert_eq!(file.base.seed, 1);
    assert_eq!(
        file.base.flows()[0].client_controller,
        cc::Controller::Cubic
    );
}

#[test]
fn unknown_field_is_named_with_the_allowed_ones() {
    let text = BASE.replace("rate = \"100Mbit/s\"", "rate = \"100Mbit/s\"\nlosss = 0.01");
    let message = error(&text);
    assert_mentions(
        &message,
        &["bad.toml", "hops.near", "losss", "loss", "gilbert_elliott"],
    );
}

#[test]
fn wrong_type_and_bad_units_are_named() {
    let message = error(&BASE.replace("rate = \"10Mbit/s\"", "rate = \"10MB/s\""));
    assert_mentions(&message, &["hops.far.rate", "10MB/s", "Mbit/s"]);
    let message = error(&BASE.replace("delay = \"25ms\"", "delay = true"));
    assert_mentions(&message, &["hops.far.delay", "a time such as"]);
}

#[test]
fn unknown_enum_values_list_the_choices() {
    let message = error(&BASE.replace("direction = \"upload\"", "direction = \"sideways\""));
    assert_mentions(&message, &["workload", "sideways", "upload", "download"]);
    let message = error(&BASE.replace("kind = \"bulk\"", "kind = \"bulky\""));
    assert_mentions(
        &message,
        &["workload", "bulky", "media", "rtc", "short_flows"],
    );
}

#[test]
fn values_out_of_range_are_named() {
    let message = error(&BASE.replace("rate = \"10Mbit/s\"", "rate = \"10Mbit/s\"\nloss = 1.5"));
    assert_mentions(&message, &["hops.far.loss", "1.5", "0..=1"]);
    let message = error(&format!("trials = 0\n{BASE}"));
    assert_mentions(&message, &["`trials`", "at least 1"]);
    let message = error(&BASE.replace("[\"near\", \"far\"]", "[\"near\", \"farr\"]"));
    assert_mentions(&message, &["path[1]", "farr", "far"]);
}

#[test]
fn variant_errors_name_the_variant() {
    let text = format!("{BASE}\n[[variant]]\nname = \"lossy\"\nhops.near.loss = \"1%\"\n");
    let message = error(&text);
    assert_mentions(&message, &["variant \"lossy\"", "hops.near.loss"]);
    let text = format!("{BASE}\n[[variant]]\nname = \"x\"\nmidle = \"split\"\n");
    assert_mentions(&error(&text), &["variant \"x\"", "midle", "middle"]);
    let text = format!("{BASE}\n[[variant]]\nhops.near.loss = 0.01\n");
    assert_mentions(&error(&text), &["variant[0].name", "needs a name"]);
    let text =
        format!("{BASE}\n[[variant]]\nname = \"x\"\npaper = {{ goodput_mbps = \"fast\" }}\n");
    assert_mentions(&error(&text), &["variant \"x\"", "paper.goodput_mbps"]);
}

#[test]
fn combinations_that_cannot_run_are_refused() {
    let media = BASE.replace(
        "kind = \"bulk\"\ndirection = \"upload\"\nsize = \"1MB\"",
        "kind = \"media\"",
    );
    let message = error(&format!("middle = \"split\"\n{media}"));
    assert_mentions(&message, &["`middle`", "UDP"]);
    let message = error(&BASE.replace(
        "rate = \"10Mbit/s\"",
        "rate = \"10Mbit/s\"\nbuffer = { kind = \"drop_tail\" }",
    ));
    assert_mentions(&message, &["hops.far.buffer", "packets", "bytes"]);
}

#[test]
fn syntax_errors_carry_the_position() {
    let message = error("name = \"t\"\ntitle = \n");
    assert_mentions(&message, &["bad.toml", "line 2"]);
}

#[test]
fn missing_traces_and_unknown_controllers_fail_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.toml");
    let text = BASE.replace("rate = \"100Mbit/s\"", "trace = \"nowhere.up\"");
    std::fs::write(&path, &text).unwrap();
    let file = ScenarioFile::load(&path).unwrap();
    let message = experiments::run(
        &file,
        &Default::default(),
        &mut experiments::Progress::silent(),
    )
    .unwrap_err()
    .to_string();
    assert_mentions(&message, &["hops.near.trace", "nowhere.up"]);

    let text = BASE.replace(
        "addr = \"10.0.0.1\"",
        "addr = \"10.0.0.1\"\ncontroller = \"cubix\"",
    );
    assert_mentions(
        &error(&text),
        &[
            "client.controller",
            "cubix",
            "cubic",
            "newreno",
            "pepkit-cubic",
        ],
    );
    let table = text.replace("\"cubix\"", "{ name = \"pacubic\", ratio = 2.0 }");
    assert_mentions(&error(&table), &["client.controller", "ratio"]);
}

/// The repository's root.
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every scenario file the repository ships, loaded.
fn shipped() -> Vec<(PathBuf, ScenarioFile)> {
    let root = repo().join("scenarios");
    let mut files = Vec::new();
    for group in std::fs::read_dir(&root).unwrap() {
        for entry in std::fs::read_dir(group.unwrap().path()).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let file = ScenarioFile::load(&path).unwrap_or_else(|e| panic!("{e}"));
                files.push((path, file));
            }
        }
    }
    files
}

/// A Markdown heading's anchor as GitHub makes it: lower case, spaces to
/// hyphens, other punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Loaded once (loading every file takes a while, and a timing test
/// runs beside this one).
#[test]
fn every_shipped_scenario_loads_and_its_gaps_name_sections_of_the_docs() {
    let files = shipped();
    assert!(files.len() >= 5, "found {} scenarios", files.len());
    let mut count = 0;
    for (path, file) in files {
        for check in &file.checks {
            let Some(gap) = &check.gap else { continue };
            let (doc, section) = gap
                .split_once('#')
                .unwrap_or_else(|| panic!("{}: {gap:?} has no #section", path.display()));
            let text = std::fs::read_to_string(repo().join(doc))
                .unwrap_or_else(|e| panic!("{}: {gap:?}: {e}", path.display()));
            let found = text
                .lines()
                .filter_map(|line| line.strip_prefix('#'))
                .any(|heading| anchor(heading.trim_start_matches('#')) == section);
            assert!(
                found,
                "{}: no heading of {doc} is #{section}",
                path.display()
            );
            count += 1;
        }
    }
    assert!(count > 0, "no scenario names where a failure is explained");
}

#[test]
fn sidekick_settings_are_checked_by_field() {
    let media = BASE.replace(
        "kind = \"bulk\"\ndirection = \"upload\"\nsize = \"1MB\"",
        "kind = \"media\"",
    );
    let without_settings = format!("{media}\n[[variant]]\nname = \"sk\"\nmiddle = \"sidekick\"\n");
    assert_mentions(&error(&without_settings), &["sk", "middle", "threshold"]);

    let zero_threshold = format!(
        "{media}\n[[variant]]\nname = \"sk\"\n\
         middle = {{ kind = \"sidekick\", interval_packets = 2, threshold = 0 }}\n"
    );
    assert_mentions(
        &error(&zero_threshold),
        &["middle", "threshold", "at least 1"],
    );

    let no_interval = format!(
        "{media}\n[[variant]]\nname = \"sk\"\nmiddle = {{ kind = \"sidekick\", threshold = 8 }}\n"
    );
    assert_mentions(
        &error(&no_interval),
        &["middle", "interval_packets", "interval"],
    );

    // The settings of one system do not leak into another's.
    let switched = format!(
        "middle = {{ kind = \"sidekick\", interval = \"30ms\", threshold = 8 }}\n{BASE}\n\
         [[variant]]\nname = \"split\"\nmiddle = {{ kind = \"split\" }}\n"
    );
    let file = ScenarioFile::parse(&switched, PathBuf::from("ok.toml")).unwrap();
    assert!(matches!(
        file.variants[0].scenario.middle,
        experiments::systems::Middle::Split(_)
    ));

    let download = BASE.replace("direction = \"upload\"", "direction = \"download\"");
    // A download is served too: the proxy resends from the client's quACKs.
    let download = format!(
        "middle = {{ kind = \"sidekick\", interval = \"30ms\", threshold = 8 }}\n{download}"
    );
    ScenarioFile::parse(&download, PathBuf::from("ok.toml")).unwrap();

    let pacubic_alone = BASE.replace(
        "addr = \"10.0.0.1\"",
        "addr = \"10.0.0.1\"\ncontroller = \"pacubic\"",
    );
    assert_mentions(&error(&pacubic_alone), &["client.controller", "sidekick"]);
}

#[test]
fn a_sweep_expands_into_named_points() {
    let text = format!(
        "{BASE}\n[[plots]]\nkind = \"lines\"\nmetric = \"goodput_mbps\"\n\
         [[variant]]\nname = \"QUIC\"\nsweep = {{ field = \"hops.near.loss\", values = [0, 0.01] }}\n"
    );
    let file = ScenarioFile::parse(&text, PathBuf::from("ok.toml")).unwrap();
    let names: Vec<&str> = file.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["QUIC, loss = 0", "QUIC, loss = 0.01"]);
    let near = |i: usize| file.variants[i].scenario.path[0].loss;
    let one_percent = netsim::Probability::new(0.01).unwrap();
    assert_eq!(near(0), netsim::LossModel::None);
    assert_eq!(near(1), netsim::LossModel::Bernoulli(one_percent));
    assert_eq!(file.variants[1].sweep.as_ref().unwrap().series, "QUIC");

    let bad_value = text.replace("values = [0, 0.01]", "values = [0, 2.0]");
    assert_mentions(&error(&bad_value), &["QUIC, loss = 2", "hops.near.loss"]);
    let typo = text.replace("field =", "feld =");
    assert_mentions(&error(&typo), &["sweep", "feld"]);
    let no_sweep = text.replace("sweep = ", "#");
    assert_mentions(&error(&no_sweep), &["plots[0]", "sweep"]);
    let into_a_string = text.replace("\"hops.near.loss\"", "\"hops.near.delay.ms\"");
    let message = error(&into_a_string);
    let says = [
        "QUIC, ms = 0",
        "`hops.near.delay.ms`",
        "`hops.near.delay` is string",
    ];
    assert_mentions(&message, &says);
}

#[test]
fn a_check_names_a_variant_that_exists() {
    let text = format!(
        "{BASE}\n[[variant]]\nname = \"a\"\n[[check]]\nclaim = \"fast\"\n\
         metric = \"goodput_mbps\"\nvariant = \"b\"\nat_least = 1\n"
    );
    assert_mentions(&error(&text), &["check[0].variant", "\"b\""]);
    let unbounded = text.replace("variant = \"b\"\nat_least = 1", "variant = \"a\"");
    assert_mentions(&error(&unbounded), &["check[0]", "at_most"]);
    let typo = text.replace("at_least", "at_lest");
    assert_mentions(&error(&typo), &["check[0]", "at_lest"]);
}

/// `BASE` with two competing flows.
fn flows(extra: &str, flows: &str) -> String {
    format!("{extra}\n{BASE}\n{flows}")
}

const TWO_FLOWS: &str = "[[flows]]\nname = \"A\"\n[[flows]]\nname = \"B\"\n";

#[test]
fn flows_parse_and_derive_addresses() {
    let text = flows(
        "",
        "[[flows]]\nname = \"A\"\nstart = \"1s\"\nsize = \"2MB\"\n[[flows]]\nname = \"B\"\n",
    );
    let file = ScenarioFile::parse(&text, PathBuf::from("ok.toml")).unwrap();
    let flows = file.base.flows();
    assert_eq!(flows.len(), 2);
    assert_eq!(flows[1].client_controller, cc::Controller::Cubic);
    assert_eq!(flows[1].client.to_string(), "10.0.0.2:5000");
    assert_eq!(flows[1].server.to_string(), "10.0.1.2:4433");
    assert_eq!(flows[0].start, std::time::Duration::from_secs(1));
    assert_eq!(
        flows[0].amount,
        Some(experiments::workloads::Amount::Size(
            experiments::units::Bytes(2_000_000)
        ))
    );
}

#[test]
fn flows_are_checked_by_field() {
    let message = error(&flows(
        "",
        "[[flows]]\nname = \"A\"\ncontrollr = \"cubic\"\n",
    ));
    assert_mentions(&message, &["flows[0]", "controllr", "controller", "middle"]);

    let message = error(&flows(
        "",
        "[[flows]]\nname = \"A\"\n[[flows]]\nname = \"a\"\n",
    ));
    assert_mentions(&message, &["flows[1].name", "flows[0]"]);

    let message = error(&flows("", "[[flows]]\nname = \"A\"\nmiddle = true\n"));
    assert_mentions(&message, &["flows[0].middle", "serves no flows"]);

    let message = error(&flows(
        "middle = { kind = \"sidekick\", interval = \"30ms\", threshold = 10 }",
        "[[flows]]\nname = \"A\"\n[[flows]]\nname = \"B\"\ncontroller = \"pacubic\"\n",
    ));
    assert_mentions(&message, &["flows[1].controller", "middle = true"]);

    let message = error(&flows("", "[[flows]]\nname = \"A\"\nsize = \"0B\"\n"));
    assert_mentions(&message, &["flows[0].size", "positive"]);

    let message = error(&flows("", "[[flows]]\nname = \"A\"\nstart = \"soon\"\n"));
    assert_mentions(&message, &["flows[0].start"]);
}

#[test]
fn flows_need_two_hops_and_a_served_flow_a_bulk_transfer() {
    let three = flows("", TWO_FLOWS).replace(
        "path = [\"near\", \"far\"]",
        "path = [\"near\", \"mid\", \"far\"]",
    ) + "[hops.mid]\ndelay = \"1ms\"\nrate = \"1Gbit/s\"\n";
    assert_mentions(&error(&three), &["`path`", "two hops"]);

    // Downloads share a dumbbell too (TECC's flows and the video
    // workload's are downloads), but a middle system serves bulk transfers
    // only.
    let download =
        flows("", TWO_FLOWS).replace("direction = \"upload\"", "direction = \"download\"");
    ScenarioFile::parse(&download, PathBuf::from("ok.toml")).unwrap();
    let media = flows("", TWO_FLOWS).replace(
        "kind = \"bulk\"\ndirection = \"upload\"\nsize = \"1MB\"",
        "kind = \"media\"\nduration = \"10s\"",
    );
    assert_mentions(&error(&media), &["flows[0].workload", "QUIC"]);
    let served_video = flows(
        "middle = \"split\"",
        "[[flows]]\nname = \"A\"\nmiddle = true\nworkload = { kind = \"video\", ladder = \"1080p\", \
         duration = \"10s\" }\n[[flows]]\nname = \"B\"\n",
    );
    assert_mentions(
        &error(&served_video),
        &["flows[0].middle", "bulk transfers"],
    );

    let variant = format!(
        "{}\n[[variant]]\nname = \"late\"\nmiddle_after = \"beyond\"\n",
        flows("", TWO_FLOWS)
    );
    assert_mentions(&error(&variant), &["variant \"late\"", "middle_after"]);

    let clash = flows("", TWO_FLOWS).replace("addr = \"10.0.1.1\"", "addr = \"10.0.0.2\"");
    assert_mentions(&error(&clash), &["server.addr", "client"]);
}

#[test]
fn a_variant_replaces_the_flows() {
    let text = format!(
        "{}\n[[variant]]\nname = \"one\"\nflows = [{{ name = \"solo\", controller = \"newreno\" }}]\n",
        flows("", TWO_FLOWS)
    );
    let file = ScenarioFile::parse(&text, PathBuf::from("ok.toml")).unwrap();
    let flows = file.variants[0].scenario.flows();
    assert_eq!(flows.len(), 1);
    assert_eq!(flows[0].name.as_deref(), Some("solo"));
    assert_eq!(flows[0].client_controller, cc::Controller::Newreno);
}

#[test]
fn unknown_flow_controllers_are_named() {
    let text = flows(
        "",
        "[[flows]]\nname = \"A\"\n[[flows]]\nname = \"B\"\ncontroller = \"cubix\"\n",
    );
    assert_mentions(&error(&text), &["flows[1].controller", "cubix"]);
}

#[test]
fn tcp_and_the_pep_are_checked_and_kept_to_real_mode() {
    let media = BASE.replace(
        "kind = \"bulk\"\ndirection = \"upload\"\nsize = \"1MB\"",
        "kind = \"media\"",
    );
    assert_mentions(
        &error(&format!("transport = \"tcp\"\n{media}")),
        &["transport", "bulk"],
    );
    assert_mentions(
        &error(&format!("middle = \"pep\"\n{BASE}")),
        &["middle", "transport = \"tcp\""],
    );
    let tcp = format!("transport = \"tcp\"\nmiddle = \"pep\"\n{BASE}");
    let file = ScenarioFile::parse(&tcp, PathBuf::from("ok.toml")).unwrap();
    let scenario = &file.variants[0].scenario;
    assert!(
        scenario
            .unsupported_in(experiments::Mode::Simulator)
            .is_some()
    );
    assert_eq!(scenario.unsupported_in(experiments::Mode::Real), None);
    // The split QUIC proxy runs in both modes (in the path on a testbed);
    // competing flows only in the simulator.
    let split =
        ScenarioFile::parse(&format!("middle = \"split\"\n{BASE}"), "ok.toml".into()).unwrap();
    let real = experiments::Mode::Real;
    assert_eq!(split.variants[0].scenario.unsupported_in(real), None);
    // Competing flows run in both modes (in real mode on the chain, each
    // flow its own addresses), but not with a flow's own access delay, a
    // middle system, or Linux TCP in the simulator.
    let two = ScenarioFile::parse(&flows("", TWO_FLOWS), "ok.toml".into()).unwrap();
    assert_eq!(two.variants[0].scenario.unsupported_in(real), None);
    let delayed = TWO_FLOWS.replace("name = \"B\"", "name = \"B\"\nclient_delay = \"5ms\"");
    let delayed = ScenarioFile::parse(&flows("", &delayed), "ok.toml".into()).unwrap();
    let why = delayed.variants[0].scenario.unsupported_in(real).unwrap();
    assert!(why.contains("client_delay"), "{why}");
    let served = ScenarioFile::parse(&flows("middle = \"split\"", TWO_FLOWS), "ok.toml".into());
    if let Ok(served) = served {
        let why = served.variants[0].scenario.unsupported_in(real).unwrap();
        assert!(why.contains("middle"), "{why}");
    }
    let tcp = TWO_FLOWS.replace(
        "name = \"A\"",
        "name = \"A\"\ntransport = \"tcp\"\ncontroller = \"bbr\"",
    );
    let tcp = ScenarioFile::parse(&flows("", &tcp), "ok.toml".into()).unwrap();
    let scenario = &tcp.variants[0].scenario;
    assert_eq!(scenario.flows()[0].kernel_tcp.as_deref(), Some("bbr"));
    assert_eq!(scenario.flows()[1].kernel_tcp, None);
    assert_eq!(scenario.unsupported_in(real), None);
    let why = scenario
        .unsupported_in(experiments::Mode::Simulator)
        .unwrap();
    assert!(why.contains("transport = \"tcp\""), "{why}");
}

#[test]
fn a_linux_tcp_flow_is_a_bulk_upload_named_by_its_linux_controller() {
    let tcp = |extra: &str| {
        TWO_FLOWS.replace(
            "name = \"A\"",
            &format!("name = \"A\"\ntransport = \"tcp\"\n{extra}"),
        )
    };
    let table = tcp("controller = { name = \"ledbat\", target = \"25ms\" }");
    assert_mentions(
        &error(&flows("", &table)),
        &["flows[0].controller", "Linux congestion control"],
    );
    let download =
        flows("", &tcp("")).replace("direction = \"upload\"", "direction = \"download\"");
    assert_mentions(&error(&download), &["flows[0].transport", "upload"]);
    let switch = tcp("switch = [{ at = \"1s\", to = \"proteus-s\" }]");
    assert_mentions(
        &error(&flows("", &switch)),
        &["flows[0].switch", "Linux TCP"],
    );
    let typo = tcp("").replace("transport = \"tcp\"", "transport = \"tpc\"");
    assert_mentions(&error(&flows("", &typo)), &["transport", "tpc"]);
}

#[test]
fn a_check_names_a_mode_that_exists() {
    let text = format!(
        "{BASE}\n[[check]]\nclaim = \"x\"\nmetric = \"goodput_mbps\"\nvariant = \"t\"\n\
         at_least = 1.0\nmode = \"reel\"\n"
    );
    assert_mentions(&error(&text), &["check[0].mode", "reel"]);
}

#[test]
fn bundled_traces_are_named_by_name_and_unknown_ones_listed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.toml");
    let bundled = BASE.replace(
        "rate = \"100Mbit/s\"",
        "trace = \"cellular/TMobile-LTE-short.up\"\nreverse_trace = \"cellular/TMobile-LTE-short.down\"",
    );
    std::fs::write(&path, &bundled).unwrap();
    let file = ScenarioFile::load(&path).unwrap();
    let mode = experiments::Mode::Simulator;
    experiments::Prepared::new(&file.variants[0].scenario, &path, "", mode).unwrap();

    std::fs::write(
        &path,
        bundled.replace("TMobile-LTE-short.up", "TMobile-LTE-long.up"),
    )
    .unwrap();
    let file = ScenarioFile::load(&path).unwrap();
    let error = experiments::Prepared::new(&file.variants[0].scenario, &path, "", mode)
        .err()
        .unwrap()
        .to_string();
    assert_mentions(
        &error,
        &[
            "hops.near.trace",
            "TMobile-LTE-long.up",
            "cellular/ATT-LTE-driving.up",
        ],
    );
}

/// A scenario with a sweep of `n` values.
fn sweep_of(n: usize) -> String {
    let values: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    format!(
        "{BASE}\n[[variant]]\nname = \"x\"\nsweep = {{ field = \"seed\", values = [{}] }}\n",
        values.join(", ")
    )
}

#[test]
fn variant_set_up_is_linear_in_the_number_of_variants() {
    // The quickest of five parses of n and of 4n values: four times the
    // variants must take about four times as long, not sixteen (the
    // duplicate-name check was quadratic: a 100000-value sweep took 48 s).
    // The bound sits between the two, so a loaded host (the other tests
    // of this file run beside it) does not fail it.
    let time = |n: usize| {
        let text = sweep_of(n);
        (0..5)
            .map(|_| {
                let start = std::time::Instant::now();
                let file = ScenarioFile::parse(&text, PathBuf::from("s.toml")).unwrap();
                assert_eq!(file.variants.len(), n);
                start.elapsed().as_secs_f64()
            })
            .fold(f64::MAX, f64::min)
    };
    let (small, large) = (time(5_000), time(20_000));
    assert!(large / small < 10.0, "{small:.3} s then {large:.3} s");
}

#[test]
fn absurd_sizes_are_refused_with_the_limit() {
    assert_mentions(
        &error(&format!("trials = 4294967295\n{BASE}")),
        &["`trials`", "100000"],
    );
    let hops: Vec<String> = (0..65).map(|i| format!("h{i}")).collect();
    let mut long = BASE.replace("[\"near\", \"far\"]", &format!("{hops:?}"));
    long = long
        .replace("[hops.near]", "[hops.h0]")
        .replace("[hops.far]", "[hops.h1]");
    for hop in &hops[2..] {
        long += &format!("[hops.{hop}]\ndelay = \"1ms\"\nrate = \"1Gbit/s\"\n");
    }
    assert_mentions(&error(&long), &["`path`", "65 hops", "at most 64", "TTL"]);
    let title = BASE.replace(
        "title = \"test\"",
        &format!("title = \"{}\"", "t".repeat(1000)),
    );
    assert_mentions(&error(&title), &["`title`", "characters"]);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.toml");
    std::fs::write(&path, " ".repeat(2 << 20)).unwrap();
    let message = ScenarioFile::load(&path).err().unwrap().to_string();
    assert_mentions(&message, &["huge.toml", "larger than 1024 KiB"]);

    let options = experiments::RunOptions {
        trials: Some(u32::MAX),
        ..Default::default()
    };
    let file = ScenarioFile::parse(BASE, PathBuf::from("ok.toml")).unwrap();
    let message = experiments::run(&file, &options, &mut experiments::Progress::silent())
        .err()
        .unwrap()
        .to_string();
    assert_mentions(&message, &["--trials 4294967295", "1..=100000"]);
}

#[test]
fn relative_paths_name_their_directory() {
    let text = BASE.replace("rate = \"100Mbit/s\"", "trace = \"missing.up\"");
    // A file named without a directory: errors say "." rather than nothing.
    let file = ScenarioFile::parse(&text, PathBuf::from("s.toml")).unwrap();
    let mode = experiments::Mode::Simulator;
    let message =
        experiments::Prepared::new(&file.variants[0].scenario, "s.toml".as_ref(), "", mode)
            .err()
            .unwrap()
            .to_string();
    assert_mentions(&message, &["relative to ."]);
    assert!(!message.contains("relative to )"), "{message}");
}

#[test]
fn measurement_phases_lie_in_the_window_under_distinct_metric_safe_names() {
    let timed = BASE.replace("size = \"1MB\"", "duration = \"10s\"");
    let with = |phases: &str| {
        format!(
            "time_limit = \"10s\"\nmeasure = {{ from = \"2s\", until = \"8s\", phases = [{phases}] }}\n{timed}"
        )
    };
    let ok = with("{ name = \"early\", from = \"2s\", until = \"4s\" }");
    ScenarioFile::parse(&ok, PathBuf::from("ok.toml")).unwrap();
    assert_mentions(
        &error(&with("{ name = \"early\", from = \"1s\", until = \"4s\" }")),
        &["measure.phases[0]", "within `measure`"],
    );
    assert_mentions(
        &error(&with("{ name = \"early\", from = \"4s\", until = \"4s\" }")),
        &["measure.phases[0].until", "after"],
    );
    assert_mentions(
        &error(&with(
            "{ name = \"a\", from = \"2s\", until = \"4s\" }, { name = \"a\", from = \"4s\", until = \"6s\" }",
        )),
        &["measure.phases[1].name", "twice"],
    );
    assert_mentions(
        &error(&with(
            "{ name = \"Early Part\", from = \"2s\", until = \"4s\" }",
        )),
        &["measure.phases[0].name", "metric names"],
    );
    assert_mentions(
        &error(&with("{ name = \"alone\", from = \"2s\", until = \"4s\" }")),
        &["measure.phases[0].name", "taken"],
    );
}

#[test]
fn rtt_intervals_and_their_resolution_are_checked_by_field() {
    let timed = BASE.replace("size = \"1MB\"", "duration = \"10s\"");
    let with = |measure: &str| {
        format!(
            "time_limit = \"10s\"\nmeasure = {{ from = \"2s\", until = \"8s\"{measure} }}\n{timed}"
        )
    };
    let ok = with(", rtt_intervals = \"90ms\", rtt_resolution = \"1us\"");
    ScenarioFile::parse(&ok, PathBuf::from("ok.toml")).unwrap();
    assert_mentions(
        &error(&with(", rtt_intervals = \"10s\"")),
        &["measure.rtt_intervals", "shorter than the window"],
    );
    assert_mentions(
        &error(&with(", rtt_resolution = \"1us\"")),
        &["measure.rtt_resolution", "needs measure.rtt_intervals"],
    );
    assert_mentions(
        &error(&with(
            ", rtt_intervals = \"90ms\", rtt_resolution = \"90ms\"",
        )),
        &[
            "measure.rtt_resolution",
            "shorter than measure.rtt_intervals",
        ],
    );
}

#[test]
fn a_bad_chunk_variability_is_named() {
    let video = |variability: &str| {
        BASE.replace(
            "kind = \"bulk\"\ndirection = \"upload\"\nsize = \"1MB\"",
            &format!(
                "kind = \"video\"\nladder = \"1080p\"\nduration = \"10s\"\n\
                 chunk_variability = {variability}"
            ),
        )
    };
    let ok = video("{ kind = \"lognormal\", cv = 0.37, peak = 2.0 }");
    ScenarioFile::parse(&ok, PathBuf::from("ok.toml")).unwrap();
    let cv = error(&video("{ kind = \"lognormal\", cv = -0.1, peak = 2.0 }"));
    assert_mentions(&cv, &["chunk_variability.cv", "-0.1"]);
    let peak = error(&video("{ kind = \"lognormal\", cv = 0.3, peak = 0.5 }"));
    assert_mentions(&peak, &["chunk_variability.peak", "0.5"]);
    let kind = error(&video("{ kind = \"gamma\", cv = 0.3, peak = 2.0 }"));
    assert_mentions(&kind, &["gamma", "lognormal"]);
    let field = error(&video(
        "{ kind = \"lognormal\", cv = 0.3, peak = 2.0, mean = 1 }",
    ));
    assert_mentions(&field, &["mean"]);
}

#[test]
fn loss_thresholds_are_checked_by_field() {
    let with = |end: &str, spec: &str| {
        BASE.replace(
            &format!("[{end}]\naddr"),
            &format!("[{end}]\nloss_detection = {spec}\naddr"),
        )
    };
    let ok = ScenarioFile::parse(
        &with("server", "{ packet_threshold = 300 }"),
        PathBuf::from("ok.toml"),
    )
    .unwrap();
    let loss = ok.base.flows()[0].server_loss_detection.unwrap();
    assert_eq!((loss.packet_threshold, loss.time_threshold), (300, 1.125));
    assert_mentions(
        &error(&with("client", "{ packet_threshold = 0 }")),
        &["client.loss_detection.packet_threshold", "at least 1"],
    );
    assert_mentions(
        &error(&with("server", "{ time_threshold = 0.5 }")),
        &["server.loss_detection.time_threshold", "between 1 and 100"],
    );
    assert_mentions(
        &error(&with("server", "{ packets = 5 }")),
        &["packets", "packet_threshold"],
    );
    assert_mentions(
        &error(&format!(
            "transport = \"tcp\"\n{}",
            with("client", "{ packet_threshold = 5 }")
        )),
        &["client.loss_detection", "Linux"],
    );
}

#[test]
fn a_check_is_relative_to_one_variant_that_exists() {
    let text = format!(
        "{BASE}\n[[variant]]\nname = \"a\"\n[[check]]\nclaim = \"fast\"\n\
         metric = \"goodput_mbps\"\nvariant = \"a\"\nminus = \"b\"\nat_most = 1\n"
    );
    assert_mentions(&error(&text), &["check[0].minus", "\"b\""]);
    let both = text.replace("minus = \"b\"", "minus = \"a\"\nratio_to = \"a\"");
    assert_mentions(&error(&both), &["check[0].minus", "not both"]);
}
