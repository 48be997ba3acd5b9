//! The binary's command line: bad input gives one line naming the key and exit
//! status 2 before any namespace is touched; `--check` prints the effective
//! configuration; `--help` lists the flags.

use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcpdelay-link")).args(args).output().expect("run tcpdelay-link")
}

const ENDPOINTS: &[&str] = &["--a-netns", "tdl-none-a", "--a-tun", "t0", "--b-netns", "tdl-none-b", "--b-tun", "t1"];

fn with_endpoints(extra: &[&str]) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = ENDPOINTS.to_vec();
    for e in extra {
        v.push(Box::leak(e.to_string().into_boxed_str()));
    }
    v
}

fn assert_usage_error(args: &[&str], want: &str) {
    let out = run(args);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert_eq!(err, format!("tcpdelay-link: {want}\n"));
    assert!(out.stdout.is_empty());
}

#[test]
fn bad_values_exit_2_with_one_line_naming_the_key() {
    assert_usage_error(&with_endpoints(&["--ab-delay-s", "-0.1"]), "a_to_b.delay_s: must be a finite number of seconds in [0, 60], got -0.1");
    assert_usage_error(&with_endpoints(&["--ba-loss-bernoulli", "1.2"]), "b_to_a.loss.p: must be a probability in [0, 1], got 1.2");
    assert_usage_error(
        &with_endpoints(&["--ab-queue-packets", "10", "--ab-queue-bytes", "20000"]),
        "a_to_b.queue_bytes: cannot be combined with a_to_b.queue_packets (one limit per queue)",
    );
    assert_usage_error(&with_endpoints(&["--ab-rate-bps", "fast"]), "a_to_b.rate_bps: invalid type: string \"fast\", expected a number");
    assert_usage_error(&["--nope", "1"], "--nope: unknown flag (see --help)");
    assert_usage_error(
        &["--a-netns", "x"],
        "a.tun: required (the name of an existing TUN device in a.netns)\n\
         tcpdelay-link: b: required ({\"netns\": NAME, \"tun\": DEVICE}; flags --b-netns, --b-tun)",
    );
    assert_usage_error(&["--config", "/nonexistent/link.json"], "--config: cannot read /nonexistent/link.json: No such file or directory");
}

#[test]
fn missing_namespace_is_a_usage_error_too() {
    // Valid values, but the namespace does not exist: still exit 2, nothing moved.
    let out = run(ENDPOINTS);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(err.starts_with("tcpdelay-link: a: cannot open /var/run/netns/tdl-none-a: "), "{err}");
    assert_eq!(err.lines().count(), 1);
}

#[test]
fn check_prints_the_effective_configuration() {
    let dir = std::env::temp_dir().join(format!("tdl-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("link.json");
    std::fs::write(
        &cfg,
        r#"{"a": {"netns": "na", "tun": "ta"}, "b": {"netns": "nb", "tun": "tb"},
            "a_to_b": {"delay_s": 0.05, "loss": {"model": "gilbert_elliott", "p": 0.01, "r": 0.5}},
            "b_to_a": {"delay_s": 0.05}}"#,
    )
    .unwrap();
    let out = run(&["--config", cfg.to_str().unwrap(), "--ba-delay-s", "0.02", "--ab-rate-bps", "1e7", "--check"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["a_to_b"]["delay_s"], 0.05);
    assert_eq!(v["b_to_a"]["delay_s"], 0.02);
    assert_eq!(v["a_to_b"]["rate_bps"], 10_000_000);
    assert_eq!(v["a_to_b"]["loss"]["model"], "gilbert_elliott");
    assert_eq!(v["a_to_b"]["loss"]["k"], 1.0);
    // p (1 - h) / (p + r) = 0.01 / 0.51
    assert!((v["a_to_b"]["stationary_loss"].as_f64().unwrap() - 0.01 / 0.51).abs() < 1e-12);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn help_lists_every_contract_flag() {
    let out = run(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let h = String::from_utf8(out.stdout).unwrap();
    for f in [
        "--a-netns", "--a-tun", "--b-netns", "--b-tun", "--ab-delay-s", "--ba-delay-s", "--ab-loss-bernoulli",
        "--ab-rate-bps", "--ab-queue-packets", "--ab-queue-bytes", "--ab-trace-file", "--ab-outage", "--ab-pcap-file",
        "--seed", "--ready-file", "--counters-file", "--events-file", "--realtime", "--ab-jitter-s", "--ab-reorder",
    ] {
        assert!(h.contains(f), "--help lacks {f}");
    }
}

#[test]
fn check_reports_every_config_error_not_only_the_first() {
    let dir = std::env::temp_dir().join(format!("tdl-cli-all-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("link.toml");
    std::fs::write(
        &cfg,
        "seed = -3\n[a]\nnetns = \"na\"\n[b]\nnetns = \"nb\"\n[a_to_b]\ndelay_s = -1\nqueue_packets = 0\n\
         [b_to_a]\nloss = { model = \"bernoulli\", p = 7 }\n",
    )
    .unwrap();
    let out = run(&["--config", cfg.to_str().unwrap(), "--check"]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(out.stdout.is_empty());
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines,
        [
            "tcpdelay-link: seed: must be a whole number in [0, 2^64), got -3",
            "tcpdelay-link: a.tun: required (the name of an existing TUN device in a.netns)",
            "tcpdelay-link: b.tun: required (the name of an existing TUN device in b.netns)",
            "tcpdelay-link: a_to_b.delay_s: must be a finite number of seconds in [0, 60], got -1",
            "tcpdelay-link: a_to_b.queue_packets: must be a whole number of packets in [1, 1e6], got 0",
            "tcpdelay-link: b_to_a.loss.p: must be a probability in [0, 1], got 7",
        ],
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn schema_prints_the_link_keys_and_limits() {
    let out = run(&["--schema"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["direction"][0], "delay_s");
    assert_eq!(v["loss"]["bernoulli"], serde_json::json!(["model", "p"]));
    assert_eq!(v["limits"]["delay_s"]["max"], 60.0);
    assert_eq!(v["limits"]["loss.r"]["min_exclusive"], true);
}
