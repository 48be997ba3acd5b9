//! Configuration: a JSON or TOML file and/or command-line flags, validated in
//! one place before any namespace is entered or packet moved.
//!
//! The file is read with serde derive (`RawConfig` here, the link's keys in
//! `schema`): unknown keys and values of the wrong type are refused there, with
//! the key's path. Then every value is checked against its limit (`schema::LIMITS`,
//! the same table as Python's `tcpdelay.link.LIMITS`) and the rules between keys.
//!
//! Flags mirror keys: `--a-netns` is `a.netns`, `--ab-delay-s` is
//! `a_to_b.delay_s`, `--ba-loss-p` is `b_to_a.loss.p`, `--seed` is `seed`; flags
//! override the file. Every error is one line that starts with the key
//! (`a_to_b.loss.p: must be a probability in [0, 1], got 1.5`); `main` prints
//! it and exits with status 2. The key reference is docs/emulator.md.

use crate::events::EventFormat;
use crate::loss::LossSpec;
use crate::outage::Window;
use crate::queue::QueueLimit;
use crate::aqm::codel::CodelParams;
use crate::aqm::fq_codel::FqCodelParams;
use crate::aqm::pie::PieParams;
use crate::aqm::AqmSpec;
use crate::schema::{limit, Num, RawAqm, RawDirection, RawLoss};
use crate::trace::Trace;
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::fmt;
use std::path::Path;

/// A configuration error: one line, starting with the offending key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

type Result<T> = std::result::Result<T, ConfigError>;

fn err<T>(msg: String) -> Result<T> {
    Err(ConfigError(msg))
}

/// Errors gathered across independent values, so that one run of `--check` reports every
/// value out of its limits (one line each), not only the first. (A file that does not parse
/// — an unknown key, a value of the wrong type — stops at its first such error.)
#[derive(Default)]
struct Errors(Vec<String>);

impl Errors {
    /// The value, or `None` with its error(s) noted.
    fn take<T>(&mut self, r: Result<T>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(ConfigError(m)) => {
                self.0.extend(m.lines().map(str::to_string));
                None
            }
        }
    }

    fn push(&mut self, msg: String) {
        self.0.push(msg);
    }

    /// `LIMITS[limit_key]` checked for the value at `path`, if given.
    fn limited(&mut self, path: &str, limit_key: &str, v: Option<Num>) -> Option<f64> {
        let v = v?;
        self.take(limit(limit_key).check(path, v.0).map_err(ConfigError))
    }

    /// A whole number in [lo, hi] (the top-level settings; the link's are in `LIMITS`).
    fn whole(&mut self, key: &str, v: Option<Num>, lo: u64, hi: u64, what: &str) -> Option<u64> {
        let x = v?.0;
        if x.fract() == 0.0 && x >= lo as f64 && x <= hi as f64 {
            Some(x as u64)
        } else {
            self.push(format!("{key}: must be {what}, got {x}"));
            None
        }
    }

    /// Every error noted, one per line.
    fn finish(self) -> Result<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            err(self.0.join("\n"))
        }
    }
}

/// One side of the emulated link.
#[derive(Clone, Debug, PartialEq)]
pub struct Endpoint {
    /// Name under /var/run/netns, or an absolute path to a netns file.
    pub netns: String,
    /// Existing TUN device in that namespace.
    pub tun: String,
}

/// Settings of one direction.
#[derive(Clone, Debug, PartialEq)]
pub struct DirectionConfig {
    pub delay_ns: u64,
    pub jitter_ns: u64,
    pub reorder: bool,
    pub loss: LossSpec,
    pub rate_bps: Option<u64>,
    pub trace_file: Option<String>,
    pub trace: Option<Trace>,
    pub queue: QueueLimit,
    pub outages: Vec<Window>,
    pub pcap_file: Option<String>,
    /// The queue discipline (`crate::aqm`); drop-tail by default.
    pub aqm: AqmSpec,
}

impl Default for DirectionConfig {
    fn default() -> Self {
        DirectionConfig {
            delay_ns: 0,
            jitter_ns: 0,
            reorder: false,
            loss: LossSpec::None,
            rate_bps: None,
            trace_file: None,
            trace: None,
            queue: QueueLimit::Unlimited,
            outages: Vec::new(),
            pcap_file: None,
            aqm: AqmSpec::DropTail,
        }
    }
}

/// One emulated link: two TUN devices joined by two directions, with its own seed (random
/// streams), event stream and queue-length trace.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    /// The link's name: `link` for a single-link file, else the name given in `links`.
    pub name: String,
    pub a: Endpoint,
    pub b: Endpoint,
    pub seed: u64,
    pub events_file: Option<String>,
    /// Each direction's queue length sampled every `queue_sample_ns` into this CSV file
    /// (`time_s,direction,packets,bytes`): the queue-length trace (papers/004 Figs 24-26).
    pub queue_file: Option<String>,
    pub a_to_b: DirectionConfig,
    pub b_to_a: DirectionConfig,
}

/// The whole validated configuration: one link (the keys `a`, `b`, `a_to_b`, ... at the top)
/// or several (`links`), served by one event loop; the other settings are the process's.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The links, in the file's order (one for a single-link file).
    pub links: Vec<LinkConfig>,
    /// Whether the file named its links (`links`): the counters and `--check` then list them
    /// by name; a single-link file keeps its flat form.
    pub multi: bool,
    /// The top-level seed (a single link's; in `links`, link i's default is seed + i).
    pub seed: u64,
    pub realtime: bool,
    pub ready_file: Option<String>,
    pub counters_file: Option<String>,
    pub events_format: EventFormat,
    pub queue_sample_ns: u64,
    pub mtu: u32,
    pub max_packets: u32,
    pub spin_us: u32,
    pub spin_percent: u32,
    pub pcap_snaplen: u32,
}

// ---------------------------------------------------------------------------
// The file's structure (serde derive; the link's part is in `schema`).

/// The whole file; null is the same as absent.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table/object of settings")]
struct RawConfig {
    a: Option<RawEndpoint>,
    b: Option<RawEndpoint>,
    seed: Option<Seed>,
    realtime: Option<bool>,
    ready_file: Option<String>,
    counters_file: Option<String>,
    events_file: Option<String>,
    events_format: Option<String>,
    queue_file: Option<String>,
    queue_sample_s: Option<Num>,
    mtu: Option<Num>,
    max_packets: Option<Num>,
    spin_us: Option<Num>,
    spin_percent: Option<Num>,
    pcap_snaplen: Option<Num>,
    a_to_b: Option<RawDirection>,
    b_to_a: Option<RawDirection>,
    links: Option<Vec<RawLink>>,
}

/// One entry of `links`: a link of its own (the single-link keys that belong to a link).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table {name, a, b, seed, events_file, queue_file, a_to_b, b_to_a}")]
struct RawLink {
    name: Option<String>,
    a: Option<RawEndpoint>,
    b: Option<RawEndpoint>,
    seed: Option<Seed>,
    events_file: Option<String>,
    queue_file: Option<String>,
    a_to_b: Option<RawDirection>,
    b_to_a: Option<RawDirection>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table {netns, tun}")]
struct RawEndpoint {
    netns: Option<String>,
    tun: Option<String>,
}

/// The seed: every u64 exactly (a float would round above 2^53); any other number is kept as
/// its error, reported with the other values' (`Config::from_value`).
#[derive(Debug)]
struct Seed(std::result::Result<u64, String>);

impl<'de> Deserialize<'de> for Seed {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Seed, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Seed;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a whole number in [0, 2^64)")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Seed, E> {
                Ok(Seed(Ok(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Seed, E> {
                Ok(Seed(u64::try_from(v).map_err(|_| v.to_string())))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<Seed, E> {
                let whole = v.fract() == 0.0 && (0.0..1.8e19).contains(&v);
                Ok(Seed(if whole { Ok(v as u64) } else { Err(v.to_string()) }))
            }
        }
        d.deserialize_any(V)
    }
}

/// Serde's derived structs also take a list, field by field in order (`a_to_b = [0.05]` would
/// be a delay): refuse a list wherever the file has a table.
fn tables_are_tables(v: &Value) -> Result<()> {
    fn table(path: &str, v: Option<&Value>) -> Result<()> {
        match v {
            Some(x @ Value::Array(_)) => err(format!("{path}: expected a table/object, got {}", show(x))),
            _ => Ok(()),
        }
    }
    fn link(prefix: &str, v: &Value) -> Result<()> {
        for k in ["a", "b", "a_to_b", "b_to_a"] {
            table(&join(prefix, k), v.get(k))?;
        }
        for d in ["a_to_b", "b_to_a"] {
            let d_key = join(prefix, d);
            table(&format!("{d_key}.loss"), v.get(d).and_then(|x| x.get("loss")))?;
            table(&format!("{d_key}.aqm"), v.get(d).and_then(|x| x.get("aqm")))?;
            if let Some(Value::Array(list)) = v.get(d).and_then(|x| x.get("outages")) {
                for (i, o) in list.iter().enumerate() {
                    table(&format!("{d_key}.outages[{i}]"), Some(o))?;
                }
            }
        }
        Ok(())
    }
    table("config", Some(v))?;
    link("", v)?;
    if let Some(Value::Array(list)) = v.get("links") {
        for (i, l) in list.iter().enumerate() {
            let key = format!("links[{i}]");
            table(&key, Some(l))?;
            if l.is_object() {
                link(&key, l)?;
            }
        }
    }
    Ok(())
}

/// The file's tree as `RawConfig`, or its first structural error as one line with the key's path.
fn parse_raw(v: &Value) -> Result<RawConfig> {
    tables_are_tables(v)?;
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { "config".to_string() } else { path };
        ConfigError(format!("{path}: {}", e.inner()))
    })
}

// ---------------------------------------------------------------------------
// Shared helpers.

fn show(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 60 {
        format!("{}...", &s[..57])
    } else {
        s
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn s_to_ns(s: f64) -> u64 {
    (s * 1e9).round() as u64
}

fn non_empty_path(e: &mut Errors, key: &str, p: Option<String>) -> Option<String> {
    match p {
        Some(s) if s.is_empty() => {
            e.push(format!("{key}: must be a non-empty file path or null"));
            None
        }
        other => other,
    }
}

// ---------------------------------------------------------------------------
// From the raw file to a Config.

fn endpoint(k: &str, raw: Option<RawEndpoint>) -> Result<Endpoint> {
    let Some(o) = raw else {
        if k.starts_with("links[") {
            return err(format!("{k}: required ({{\"netns\": NAME, \"tun\": DEVICE}})"));
        }
        return err(format!("{k}: required ({{\"netns\": NAME, \"tun\": DEVICE}}; flags --{k}-netns, --{k}-tun)"));
    };
    let mut e = Errors::default();
    let netns = e.take(match o.netns {
        None => err(format!("{k}.netns: required (a name under /var/run/netns or an absolute path)")),
        Some(s) if s.is_empty() || (!s.starts_with('/') && s.contains('/')) || s.chars().any(char::is_whitespace) => {
            err(format!("{k}.netns: must be a namespace name (no '/' or spaces) or an absolute path, got {:?}", s))
        }
        Some(s) => Ok(s),
    });
    let tun = e.take(match o.tun {
        None => err(format!("{k}.tun: required (the name of an existing TUN device in {k}.netns)")),
        Some(s) if s.is_empty() || s.len() > 15 || s.contains('/') || s.chars().any(char::is_whitespace) => {
            err(format!("{k}.tun: must be 1 to 15 characters without '/' or spaces, got {:?}", s))
        }
        Some(s) => Ok(s),
    });
    e.finish()?;
    Ok(Endpoint { netns: netns.unwrap(), tun: tun.unwrap() })
}

fn loss(e: &mut Errors, key: &str, raw: Option<RawLoss>) -> LossSpec {
    let mut p = |name: &str, v: Num| e.limited(&join(key, name), &format!("loss.{name}"), Some(v));
    match raw {
        None | Some(RawLoss::None(_)) => LossSpec::None,
        Some(RawLoss::Bernoulli(b)) => match p("p", b.p) {
            Some(p) => LossSpec::Bernoulli { p },
            None => LossSpec::None,
        },
        Some(RawLoss::GilbertElliott(g)) => {
            let (pp, r) = (p("p", g.p), p("r", g.r));
            let k = g.k.map_or(Some(1.0), |v| p("k", v));
            let h = g.h.map_or(Some(0.0), |v| p("h", v));
            match (pp, r, k, h) {
                (Some(p), Some(r), Some(k), Some(h)) => LossSpec::GilbertElliott { p, r, k, h },
                _ => LossSpec::None,
            }
        }
    }
}

fn aqm(e: &mut Errors, key: &str, raw: Option<RawAqm>) -> AqmSpec {
    let mut secs = |name: &str, v: Option<Num>, default_ns: u64| {
        v.map_or(Some(default_ns), |v| e.limited(&join(key, name), &format!("aqm.{name}"), Some(v)).map(s_to_ns))
    };
    match raw {
        None | Some(RawAqm::DropTail(_)) => AqmSpec::DropTail,
        Some(RawAqm::Codel(c)) => {
            let d = CodelParams::default();
            let (t, i) = (secs("target_s", c.target_s, d.target_ns), secs("interval_s", c.interval_s, d.interval_ns));
            match (t, i) {
                (Some(target_ns), Some(interval_ns)) => {
                    AqmSpec::Codel(CodelParams { target_ns, interval_ns, ecn: c.ecn.unwrap_or(false), ..d })
                }
                _ => AqmSpec::DropTail,
            }
        }
        Some(RawAqm::FqCodel(c)) => {
            let d = FqCodelParams::default();
            let (t, i) = (secs("target_s", c.target_s, d.codel.target_ns), secs("interval_s", c.interval_s, d.codel.interval_ns));
            let mut whole = |name: &str, v: Option<Num>, default: u32| {
                v.map_or(Some(default), |v| e.limited(&join(key, name), &format!("aqm.{name}"), Some(v)).map(|x| x as u32))
            };
            let (q, f) = (whole("quantum_bytes", c.quantum_bytes, d.quantum_bytes), whole("flows", c.flows, d.flows));
            match (t, i, q, f) {
                (Some(target_ns), Some(interval_ns), Some(quantum_bytes), Some(flows)) => AqmSpec::FqCodel(FqCodelParams {
                    codel: CodelParams { target_ns, interval_ns, ecn: c.ecn.unwrap_or(false), ..d.codel },
                    quantum_bytes,
                    flows,
                }),
                _ => AqmSpec::DropTail,
            }
        }
        Some(RawAqm::Pie(c)) => {
            let d = PieParams::default();
            let t = secs("target_s", c.target_s, d.target_ns);
            let u = secs("t_update_s", c.t_update_s, d.t_update_ns);
            let b = secs("max_burst_s", c.max_burst_s, d.max_burst_ns);
            let mut num = |name: &str, v: Option<Num>, default: f64| {
                v.map_or(Some(default), |v| e.limited(&join(key, name), &format!("aqm.{name}"), Some(v)))
            };
            let (a, be) = (num("alpha", c.alpha, d.alpha), num("beta", c.beta, d.beta));
            match (t, u, b, a, be) {
                (Some(target_ns), Some(t_update_ns), Some(max_burst_ns), Some(alpha), Some(beta)) => {
                    AqmSpec::Pie(PieParams { target_ns, t_update_ns, max_burst_ns, alpha, beta, ecn: c.ecn.unwrap_or(false) })
                }
                _ => AqmSpec::DropTail,
            }
        }
    }
}

fn outages(e: &mut Errors, key: &str, raw: Vec<crate::schema::RawOutage>) -> Vec<Window> {
    let mut out: Vec<(usize, Window)> = Vec::new();
    for (i, o) in raw.into_iter().enumerate() {
        let at = e.limited(&format!("{key}[{i}].at_s"), "outages.at_s", Some(o.at_s));
        let dur = e.limited(&format!("{key}[{i}].duration_s"), "outages.duration_s", Some(o.duration_s));
        if let (Some(at), Some(dur)) = (at, dur) {
            let start = s_to_ns(at);
            out.push((i, Window { start_ns: start, end_ns: start + s_to_ns(dur) }));
        }
    }
    let mut sorted = out.clone();
    sorted.sort_by_key(|(_, w)| w.start_ns);
    for pair in sorted.windows(2) {
        let ((i, a), (j, b)) = (pair[0], pair[1]);
        if b.start_ns < a.end_ns {
            let (first, second) = if i < j { (i, j) } else { (j, i) };
            e.push(format!("{key}[{second}]: overlaps {key}[{first}] (outage windows must not overlap)"));
            return Vec::new();
        }
    }
    out.into_iter().map(|(_, w)| w).collect()
}

fn direction(k: &str, raw: Option<RawDirection>, mtu: u32) -> Result<DirectionConfig> {
    let d = raw.unwrap_or_default();
    let key = |name: &str| join(k, name);
    let mut e = Errors::default();
    let mut c = DirectionConfig::default();
    c.delay_ns = e.limited(&key("delay_s"), "delay_s", d.delay_s).map_or(0, s_to_ns);
    c.jitter_ns = e.limited(&key("jitter_s"), "jitter_s", d.jitter_s).map_or(0, s_to_ns);
    c.reorder = d.reorder.unwrap_or(false);
    c.loss = loss(&mut e, &key("loss"), d.loss);
    c.rate_bps = e.limited(&key("rate_bps"), "rate_bps", d.rate_bps).map(|x| x as u64);
    c.trace_file = non_empty_path(&mut e, &key("trace_file"), d.trace_file);
    if let Some(path) = &c.trace_file {
        if d.rate_bps.is_some() {
            e.push(format!("{}: cannot be combined with {} (choose one bottleneck)", key("trace_file"), key("rate_bps")));
        } else if Path::new(path).is_dir() {
            e.push(format!("{}: {} is a directory, not a trace file", key("trace_file"), path));
        } else {
            c.trace = e.take(
                std::fs::read_to_string(path)
                    .map_err(|x| ConfigError(format!("{}: cannot read {}: {}", key("trace_file"), path, io_reason(&x))))
                    .and_then(|text| {
                        Trace::parse(&text).map_err(|x| ConfigError(format!("{}: {}: {}", key("trace_file"), path, x)))
                    }),
            );
        }
    }
    let qp = e.limited(&key("queue_packets"), "queue_packets", d.queue_packets).map(|x| x as u64);
    let mut qb = e.limited(&key("queue_bytes"), "queue_bytes", d.queue_bytes).map(|x| x as u64);
    if let Some(b) = qb {
        if b < mtu as u64 {
            e.push(format!("{}: must be at least mtu ({mtu}) bytes (the queue must hold one full packet), got {b}", key("queue_bytes")));
            qb = None;
        }
    }
    c.queue = match (qp, qb) {
        (Some(_), Some(_)) => {
            e.push(format!("{}: cannot be combined with {} (one limit per queue)", key("queue_bytes"), key("queue_packets")));
            QueueLimit::Unlimited
        }
        (Some(n), None) => QueueLimit::Packets(n),
        (None, Some(b)) => QueueLimit::Bytes(b),
        (None, None) => QueueLimit::Unlimited,
    };
    c.outages = outages(&mut e, &key("outages"), d.outages.unwrap_or_default());
    c.pcap_file = non_empty_path(&mut e, &key("pcap_file"), d.pcap_file);
    c.aqm = aqm(&mut e, &key("aqm"), d.aqm);
    e.finish()?;
    Ok(c)
}

fn io_reason(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// The seed at `key`: a whole number in [0, 2^64), `default` when absent.
fn seed_of(e: &mut Errors, key: &str, raw: Option<Seed>, default: u64) -> u64 {
    match raw {
        None => default,
        Some(Seed(Ok(s))) => s,
        Some(Seed(Err(got))) => {
            e.push(format!("{key}: must be a whole number in [0, 2^64), got {got}"));
            default
        }
    }
}

/// A link's name in `links`: what its counters are keyed by.
fn link_name(key: &str, raw: Option<String>) -> Result<String> {
    match raw {
        None => err(format!("{key}: required (the link's name, which keys its counters)")),
        Some(n) if n.is_empty() || n.len() > 64 || !n.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) => {
            err(format!("{key}: must be 1 to 64 characters of letters, digits, '.', '_' or '-', got {:?}", n))
        }
        Some(n) => Ok(n),
    }
}

/// The most links one process serves (two TUN descriptors each).
pub const MAX_LINKS: usize = 4096;

/// One link's settings from its keys; `prefix` is "" for a single-link file, `links[i]` else.
#[allow(clippy::too_many_arguments)]
fn link(
    e: &mut Errors,
    prefix: &str,
    name: Option<String>,
    a: Option<RawEndpoint>,
    b: Option<RawEndpoint>,
    seed: u64,
    events_file: Option<String>,
    queue_file: Option<String>,
    a_to_b: Option<RawDirection>,
    b_to_a: Option<RawDirection>,
    mtu: u32,
) -> Option<LinkConfig> {
    let key = |k: &str| join(prefix, k);
    let a = e.take(endpoint(&key("a"), a));
    let b = e.take(endpoint(&key("b"), b));
    let events_file = non_empty_path(e, &key("events_file"), events_file);
    let queue_file = non_empty_path(e, &key("queue_file"), queue_file);
    let a_to_b = e.take(direction(&key("a_to_b"), a_to_b, mtu));
    let b_to_a = e.take(direction(&key("b_to_a"), b_to_a, mtu));
    for (k, p) in [
        (key("events_file"), events_file.as_ref()),
        (key("queue_file"), queue_file.as_ref()),
        (key("a_to_b.pcap_file"), a_to_b.as_ref().and_then(|d| d.pcap_file.as_ref())),
        (key("b_to_a.pcap_file"), b_to_a.as_ref().and_then(|d| d.pcap_file.as_ref())),
    ] {
        if let Some(p) = p {
            e.take(check_parent_dir(&k, p));
        }
    }
    Some(LinkConfig {
        name: name.unwrap_or_else(|| "link".to_string()),
        a: a?,
        b: b?,
        seed,
        events_file,
        queue_file,
        a_to_b: a_to_b?,
        b_to_a: b_to_a?,
    })
}

impl Config {
    /// Validates a configuration tree (after flags were merged into it).
    pub fn from_value(v: &Value) -> Result<Config> {
        let raw = parse_raw(v)?;
        // Every value is checked even after an error, so that the message lists every value
        // out of its limits (one line each, in key order), not only the first.
        let mut e = Errors::default();
        let mtu = e.whole("mtu", raw.mtu, 68, 65535, "a whole number of bytes in [68, 65535]").unwrap_or(1500) as u32;
        let seed = seed_of(&mut e, "seed", raw.seed, 1);
        let realtime = raw.realtime.unwrap_or(true);
        let events_format = match raw.events_format.as_deref() {
            None | Some("csv") => EventFormat::Csv,
            Some("jsonl") => EventFormat::Jsonl,
            Some(other) => {
                e.push(format!("events_format: must be csv or jsonl, got {:?}", other));
                EventFormat::Csv
            }
        };
        let max_packets =
            e.whole("max_packets", raw.max_packets, 16, 10_000_000, "a whole number of packets in [16, 1e7]").unwrap_or(200_000) as u32;
        let spin_us =
            e.whole("spin_us", raw.spin_us, 0, 10_000, "a whole number of microseconds in [0, 10000]").unwrap_or(300) as u32;
        let spin_percent =
            e.whole("spin_percent", raw.spin_percent, 0, 100, "a whole number of percent in [0, 100]").unwrap_or(10) as u32;
        let pcap_snaplen =
            e.whole("pcap_snaplen", raw.pcap_snaplen, 20, 262_144, "a whole number of bytes in [20, 262144]").unwrap_or(65_535) as u32;
        let ready_file = non_empty_path(&mut e, "ready_file", raw.ready_file);
        let counters_file = non_empty_path(&mut e, "counters_file", raw.counters_file);
        let queue_sample_ns = match raw.queue_sample_s.map(|n| n.0) {
            None => 10_000_000,
            Some(x) if (0.0001..=60.0).contains(&x) => (x * 1e9).round() as u64,
            Some(x) => {
                e.push(format!("queue_sample_s: must be a number of seconds in [0.0001, 60], got {x}"));
                10_000_000
            }
        };
        for (key, p) in [("ready_file", ready_file.as_ref()), ("counters_file", counters_file.as_ref())] {
            if let Some(p) = p {
                e.take(check_parent_dir(key, p));
            }
        }
        let multi = raw.links.is_some();
        let mut links: Vec<Option<LinkConfig>> = Vec::new();
        match raw.links {
            None => {
                let l = link(&mut e, "", None, raw.a, raw.b, seed, raw.events_file, raw.queue_file, raw.a_to_b, raw.b_to_a, mtu);
                if let Some(l) = &l {
                    if l.a.netns == l.b.netns && l.a.tun == l.b.tun {
                        e.push("b.tun: must differ from a.tun when both are in the same namespace".to_string());
                    }
                }
                links.push(l);
            }
            Some(list) => {
                // The keys of a link belong to its entry in `links`, never to the top.
                for (k, given) in [
                    ("a", raw.a.is_some()),
                    ("b", raw.b.is_some()),
                    ("events_file", raw.events_file.is_some()),
                    ("queue_file", raw.queue_file.is_some()),
                    ("a_to_b", raw.a_to_b.is_some()),
                    ("b_to_a", raw.b_to_a.is_some()),
                ] {
                    if given {
                        e.push(format!("{k}: cannot be combined with links (each link sets its own {k} in its entry)"));
                    }
                }
                if list.is_empty() {
                    e.push("links: must list at least one link ({name, a, b, ...})".to_string());
                } else if list.len() > MAX_LINKS {
                    e.push(format!("links: at most {MAX_LINKS} links in one process, got {}", list.len()));
                }
                let mut names: Vec<(String, usize)> = Vec::new();
                for (i, r) in list.into_iter().enumerate() {
                    let prefix = format!("links[{i}]");
                    let name = e.take(link_name(&format!("{prefix}.name"), r.name));
                    if let Some(n) = &name {
                        if let Some((_, j)) = names.iter().find(|(m, _)| m == n) {
                            e.push(format!("{prefix}.name: {n:?} is already the name of links[{j}] (names key the counters)"));
                        }
                        names.push((n.clone(), i));
                    }
                    let default_seed = seed.wrapping_add(i as u64);
                    let link_seed = seed_of(&mut e, &format!("{prefix}.seed"), r.seed, default_seed);
                    let l = link(
                        &mut e, &prefix, name, r.a, r.b, link_seed, r.events_file, r.queue_file, r.a_to_b, r.b_to_a, mtu,
                    );
                    links.push(l);
                }
                // A device is one end of one link.
                let mut seen: Vec<(&Endpoint, String)> = Vec::new();
                let mut dup = Vec::new();
                for (i, l) in links.iter().enumerate() {
                    let Some(l) = l else { continue };
                    for (side, ep) in [("a", &l.a), ("b", &l.b)] {
                        let here = format!("links[{i}].{side}");
                        if let Some((_, there)) = seen.iter().find(|(x, _)| *x == ep) {
                            dup.push(format!(
                                "{here}: {} in {} is already {there} (a TUN device is the end of one link)",
                                ep.tun, ep.netns
                            ));
                        } else {
                            seen.push((ep, here));
                        }
                    }
                }
                for d in dup {
                    e.push(d);
                }
            }
        }
        e.finish()?;
        Ok(Config {
            links: links.into_iter().map(Option::unwrap).collect(),
            multi,
            seed,
            realtime,
            ready_file,
            counters_file,
            events_format,
            queue_sample_ns,
            mtu,
            max_packets,
            spin_us,
            spin_percent,
            pcap_snaplen,
        })
    }

    /// The effective configuration as JSON (what `--check` prints): a single link in the flat
    /// form, several as `links`.
    pub fn to_json(&self) -> Value {
        fn dir(d: &DirectionConfig) -> Value {
            let loss = match d.loss {
                LossSpec::None => json!({"model": "none"}),
                LossSpec::Bernoulli { p } => json!({"model": "bernoulli", "p": p}),
                LossSpec::GilbertElliott { p, r, k, h } => {
                    json!({"model": "gilbert_elliott", "p": p, "r": r, "k": k, "h": h})
                }
            };
            let (qp, qb) = match d.queue {
                QueueLimit::Unlimited => (None, None),
                QueueLimit::Packets(n) => (Some(n), None),
                QueueLimit::Bytes(b) => (None, Some(b)),
            };
            json!({
                "delay_s": d.delay_ns as f64 / 1e9,
                "jitter_s": d.jitter_ns as f64 / 1e9,
                "reorder": d.reorder,
                "loss": loss,
                "stationary_loss": d.loss.stationary_loss(),
                "rate_bps": d.rate_bps,
                "trace_file": d.trace_file,
                "trace_mean_rate_bps": d.trace.as_ref().map(|t| t.mean_rate_bps()),
                "queue_packets": qp,
                "queue_bytes": qb,
                "outages": d.outages.iter().map(|w| json!({
                    "at_s": w.start_ns as f64 / 1e9,
                    "duration_s": (w.end_ns - w.start_ns) as f64 / 1e9,
                })).collect::<Vec<_>>(),
                "pcap_file": d.pcap_file,
                "aqm": aqm_json(&d.aqm),
            })
        }
        fn aqm_json(a: &AqmSpec) -> Value {
            let s = |ns: u64| ns as f64 / 1e9;
            match a {
                AqmSpec::DropTail => json!({"discipline": "drop_tail"}),
                AqmSpec::Codel(c) => json!({"discipline": "codel", "target_s": s(c.target_ns), "interval_s": s(c.interval_ns), "ecn": c.ecn}),
                AqmSpec::FqCodel(f) => json!({
                    "discipline": "fq_codel", "target_s": s(f.codel.target_ns), "interval_s": s(f.codel.interval_ns),
                    "quantum_bytes": f.quantum_bytes, "flows": f.flows, "ecn": f.codel.ecn,
                }),
                AqmSpec::Pie(p) => json!({
                    "discipline": "pie", "target_s": s(p.target_ns), "t_update_s": s(p.t_update_ns),
                    "max_burst_s": s(p.max_burst_ns), "alpha": p.alpha, "beta": p.beta, "ecn": p.ecn,
                }),
            }
        }
        fn link(l: &LinkConfig, named: bool) -> Map<String, Value> {
            let mut m = Map::new();
            if named {
                m.insert("name".into(), json!(l.name));
            }
            m.insert("a".into(), json!({"netns": l.a.netns, "tun": l.a.tun}));
            m.insert("b".into(), json!({"netns": l.b.netns, "tun": l.b.tun}));
            m.insert("seed".into(), json!(l.seed));
            m.insert("events_file".into(), json!(l.events_file));
            m.insert("queue_file".into(), json!(l.queue_file));
            m.insert("a_to_b".into(), dir(&l.a_to_b));
            m.insert("b_to_a".into(), dir(&l.b_to_a));
            m
        }
        let mut top = json!({
            "realtime": self.realtime,
            "ready_file": self.ready_file,
            "counters_file": self.counters_file,
            "events_format": match self.events_format { EventFormat::Csv => "csv", EventFormat::Jsonl => "jsonl" },
            "queue_sample_s": self.queue_sample_ns as f64 / 1e9,
            "mtu": self.mtu,
            "max_packets": self.max_packets,
            "spin_us": self.spin_us,
            "spin_percent": self.spin_percent,
            "pcap_snaplen": self.pcap_snaplen,
        });
        let o = top.as_object_mut().unwrap();
        if self.multi {
            o.insert("seed".into(), json!(self.seed));
            o.insert("links".into(), Value::Array(self.links.iter().map(|l| Value::Object(link(l, true))).collect()));
        } else {
            o.extend(link(&self.links[0], false));
        }
        top
    }
}

fn check_parent_dir(key: &str, p: &str) -> Result<()> {
    if Path::new(p).is_dir() {
        return err(format!("{key}: {p} is a directory; give a file name"));
    }
    let parent = Path::new(p).parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return err(format!("{key}: directory {} does not exist", parent.display()));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Files.

/// Reads a .json or .toml configuration file into a JSON tree.
pub fn load_file(path: &str) -> Result<Value> {
    let text =
        std::fs::read_to_string(path).map_err(|e| ConfigError(format!("--config: cannot read {}: {}", path, io_reason(&e))))?;
    if path.ends_with(".json") {
        serde_json::from_str::<Value>(&text).map_err(|e| ConfigError(format!("--config: {}: invalid JSON: {}", path, e)))
    } else if path.ends_with(".toml") {
        let t: toml::Table = toml::from_str(&text).map_err(|e| {
            let msg = e.message().to_string();
            let line = e.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            ConfigError(match line {
                Some(l) => format!("--config: {}: invalid TOML at line {}: {}", path, l, msg),
                None => format!("--config: {}: invalid TOML: {}", path, msg),
            })
        })?;
        toml_to_json(&toml::Value::Table(t), "")
    } else {
        err(format!("--config: file name must end in .json or .toml, got {:?}", path))
    }
}

fn toml_to_json(v: &toml::Value, path: &str) -> Result<Value> {
    Ok(match v {
        toml::Value::String(s) => Value::String(s.clone()),
        toml::Value::Integer(i) => json!(i),
        toml::Value::Float(f) => json!(f),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(_) => return err(format!("{path}: dates are not allowed here")),
        toml::Value::Array(a) => Value::Array(
            a.iter().enumerate().map(|(i, x)| toml_to_json(x, &format!("{path}[{i}]"))).collect::<Result<_>>()?,
        ),
        toml::Value::Table(t) => {
            let mut m = Map::new();
            for (k, x) in t {
                m.insert(k.clone(), toml_to_json(x, &join(path, k))?);
            }
            Value::Object(m)
        }
    })
}

// ---------------------------------------------------------------------------
// Flags.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Str,
    Num,
    Bool,
}

/// (flag without the leading "--", key path, kind, help)
fn flag_table() -> Vec<(String, String, Kind, &'static str)> {
    let mut t: Vec<(String, String, Kind, &'static str)> = vec![
        ("a-netns".into(), "a.netns".into(), Kind::Str, "namespace of side a (name under /var/run/netns or absolute path)"),
        ("a-tun".into(), "a.tun".into(), Kind::Str, "existing TUN device in a's namespace"),
        ("b-netns".into(), "b.netns".into(), Kind::Str, "namespace of side b"),
        ("b-tun".into(), "b.tun".into(), Kind::Str, "existing TUN device in b's namespace"),
        ("seed".into(), "seed".into(), Kind::Num, "seed of all randomness (default 1)"),
        ("realtime".into(), "realtime".into(), Kind::Bool, "try SCHED_FIFO (default true)"),
        ("ready-file".into(), "ready_file".into(), Kind::Str, "file created when both TUNs are open and the loop runs"),
        ("counters-file".into(), "counters_file".into(), Kind::Str, "counters JSON, written on SIGUSR1 and at exit"),
        ("events-file".into(), "events_file".into(), Kind::Str, "event stream file"),
        ("events-format".into(), "events_format".into(), Kind::Str, "csv (default) or jsonl"),
        ("queue-file".into(), "queue_file".into(), Kind::Str, "queue-length trace (CSV: time_s,direction,packets,bytes)"),
        ("queue-sample-s".into(), "queue_sample_s".into(), Kind::Num, "the trace's sampling period, seconds (default 0.01)"),
        ("mtu".into(), "mtu".into(), Kind::Num, "largest packet in bytes (default 1500)"),
        ("max-packets".into(), "max_packets".into(), Kind::Num, "packets held at most, both directions (default 200000)"),
        ("spin-us".into(), "spin_us".into(), Kind::Num, "busy-wait this long before a due time (default 300)"),
        ("spin-percent".into(), "spin_percent".into(), Kind::Num, "busy-wait at most this share of the time (default 10)"),
        ("pcap-snaplen".into(), "pcap_snaplen".into(), Kind::Num, "bytes of each packet kept in pcaps (default 65535)"),
    ];
    let dir_keys: &[(&str, Kind, &'static str)] = &[
        ("delay_s", Kind::Num, "one-way delay, seconds"),
        ("jitter_s", Kind::Num, "delay variation (uniform +-), seconds"),
        ("reorder", Kind::Bool, "let jitter reorder packets (default false)"),
        ("loss.model", Kind::Str, "none | bernoulli | gilbert_elliott"),
        ("loss.p", Kind::Num, "Bernoulli loss prob.; GE P(good->bad)"),
        ("loss.r", Kind::Num, "GE P(bad->good)"),
        ("loss.k", Kind::Num, "GE P(deliver | good) (default 1)"),
        ("loss.h", Kind::Num, "GE P(deliver | bad) (default 0)"),
        ("rate_bps", Kind::Num, "bottleneck rate, bit/s"),
        ("trace_file", Kind::Str, "Mahimahi delivery-opportunity trace"),
        ("queue_packets", Kind::Num, "drop-tail limit in packets"),
        ("queue_bytes", Kind::Num, "drop-tail limit in bytes"),
        ("pcap_file", Kind::Str, "pcap of delivered packets"),
    ];
    for (prefix, dir) in [("ab", "a_to_b"), ("ba", "b_to_a")] {
        for (k, kind, help) in dir_keys {
            t.push((format!("{prefix}-{}", k.replace(['_', '.'], "-")), format!("{dir}.{k}"), *kind, help));
        }
    }
    t
}

/// Parsed command line.
#[derive(Debug, Default)]
pub struct Args {
    pub config_file: Option<String>,
    pub help: bool,
    pub version: bool,
    pub check: bool,
    pub schema: bool,
    overrides: Vec<(String, Value)>,
    outages: [Option<Vec<Value>>; 2],
}

fn flag_value(kind: Kind, s: &str) -> Value {
    match kind {
        Kind::Str => Value::String(s.to_string()),
        Kind::Num => match serde_json::from_str::<Value>(s.trim()) {
            Ok(v @ Value::Number(_)) | Ok(v @ Value::Null) => v,
            _ => Value::String(s.to_string()),
        },
        Kind::Bool => match s {
            "true" | "yes" | "1" | "on" => Value::Bool(true),
            "false" | "no" | "0" | "off" => Value::Bool(false),
            other => Value::String(other.to_string()),
        },
    }
}

/// Parses the command line (without the program name).
pub fn parse_args(argv: &[String]) -> Result<Args> {
    let table = flag_table();
    let mut a = Args::default();
    let mut i = 0;
    while i < argv.len() {
        let arg = &argv[i];
        i += 1;
        match arg.as_str() {
            "-h" | "--help" => {
                a.help = true;
                continue;
            }
            "-V" | "--version" => {
                a.version = true;
                continue;
            }
            "--check" => {
                a.check = true;
                continue;
            }
            "--schema" => {
                a.schema = true;
                continue;
            }
            _ => {}
        }
        let Some(body) = arg.strip_prefix("--") else {
            return err(format!("{arg}: unexpected argument (flags start with --; see --help)"));
        };
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (body.to_string(), None),
        };
        let mut value = || -> Result<String> {
            if let Some(v) = &inline {
                return Ok(v.clone());
            }
            if i < argv.len() {
                i += 1;
                Ok(argv[i - 1].clone())
            } else {
                err(format!("--{name}: needs a value"))
            }
        };
        if name == "config" {
            a.config_file = Some(value()?);
            continue;
        }
        if let Some((prefix, dir, d)) = [("ab-", "a_to_b", 0usize), ("ba-", "b_to_a", 1usize)]
            .iter()
            .find(|(p, _, _)| name.starts_with(p))
            .map(|(p, dname, d)| (*p, *dname, *d))
        {
            let rest = &name[prefix.len()..];
            match rest {
                "loss-bernoulli" => {
                    let v = value()?;
                    a.overrides.push((format!("{dir}.loss"), json!({"model": "bernoulli", "p": flag_value(Kind::Num, &v)})));
                    continue;
                }
                "loss-gilbert-elliott" => {
                    let v = value()?;
                    let parts: Vec<Value> = v.split(',').map(|x| flag_value(Kind::Num, x)).collect();
                    if parts.len() < 2 || parts.len() > 4 {
                        return err(format!("{dir}.loss (--{name}): expected P,R[,K[,H]] such as 0.01,0.3,1,0, got {:?}", v));
                    }
                    let mut o = json!({"model": "gilbert_elliott"});
                    for (k, p) in ["p", "r", "k", "h"].iter().zip(parts) {
                        o[*k] = p;
                    }
                    a.overrides.push((format!("{dir}.loss"), o));
                    continue;
                }
                "outage" => {
                    let v = value()?;
                    let Some((at, dur)) = v.split_once(':') else {
                        return err(format!("{dir}.outages (--{name}): expected AT_S:DURATION_S such as 10:1.5, got {:?}", v));
                    };
                    let o = json!({"at_s": flag_value(Kind::Num, at), "duration_s": flag_value(Kind::Num, dur)});
                    a.outages[d].get_or_insert_with(Vec::new).push(o);
                    continue;
                }
                _ => {}
            }
        }
        match table.iter().find(|(f, _, _, _)| *f == name) {
            Some((_, key, kind, _)) => {
                let v = value()?;
                a.overrides.push((key.clone(), flag_value(*kind, &v)));
            }
            None => return err(format!("--{name}: unknown flag (see --help)")),
        }
    }
    Ok(a)
}

fn set_path(root: &mut Value, path: &str, v: Value) -> Result<()> {
    let parts: Vec<&str> = path.split('.').collect();
    let mut cur = root;
    for (n, p) in parts.iter().enumerate() {
        if !cur.is_object() {
            // the file had a non-table here: let validation report it by key
            let shown = parts[..n].join(".");
            return err(format!("{shown}: expected a table/object, got {}", show(cur)));
        }
        let m = cur.as_object_mut().unwrap();
        if n == parts.len() - 1 {
            m.insert(p.to_string(), v);
            return Ok(());
        }
        let entry = m.entry(p.to_string()).or_insert_with(|| json!({}));
        if entry.is_null() {
            *entry = json!({});
        }
        cur = entry;
    }
    Ok(())
}

impl Args {
    /// Merges file and flags into one tree.
    pub fn merged(&self) -> Result<Value> {
        let mut root = match &self.config_file {
            Some(f) => load_file(f)?,
            None => json!({}),
        };
        if !root.is_object() {
            return err(format!("--config: the top level must be a table/object, got {}", show(&root)));
        }
        for (k, v) in &self.overrides {
            set_path(&mut root, k, v.clone())?;
        }
        for (d, dir) in ["a_to_b", "b_to_a"].iter().enumerate() {
            if let Some(list) = &self.outages[d] {
                set_path(&mut root, &format!("{dir}.outages"), Value::Array(list.clone()))?;
            }
        }
        Ok(root)
    }

    /// File + flags, validated.
    pub fn config(&self) -> Result<Config> {
        Config::from_value(&self.merged()?)
    }
}

/// The text of --help.
pub fn help_text() -> String {
    let mut s = String::from(
        "tcpdelay-link: a link emulator between two TUN devices in two network namespaces\n\n\
         usage: tcpdelay-link [--config FILE.json|FILE.toml] [--KEY VALUE ...]\n\n\
         Flags override the file. Exit status 2 on a bad value, with one line naming the key.\n\
         Signals: SIGTERM/SIGINT stop (files flushed, counters written), SIGUSR1 writes counters and flushes.\n\n\
         general:\n  --config FILE              JSON or TOML file with the keys below (docs/emulator.md)\n  \
         --check                    validate, print the effective configuration as JSON, exit\n  \
         --schema                   print the link's keys and limits as JSON (tcpdelay.link.schema()), exit\n  \
         --help, --version\n\n",
    );
    for (f, key, _, help) in flag_table() {
        s.push_str(&format!("  --{:<24} {:<22} {}\n", f, key, help));
    }
    s.push_str(
        "\n  --ab-loss-bernoulli P                 a_to_b.loss = bernoulli p\n  \
         --ab-loss-gilbert-elliott P,R[,K[,H]] a_to_b.loss = gilbert_elliott (k = 1, h = 0 by default)\n  \
         --ab-outage AT_S:DURATION_S           an outage window (repeat the flag for several)\n  \
         (the same with --ba-... for b_to_a)\n",
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Value {
        json!({"a": {"netns": "na", "tun": "ta"}, "b": {"netns": "nb", "tun": "tb"}})
    }

    fn with(path: &str, v: Value) -> Value {
        let mut b = base();
        set_path(&mut b, path, v).unwrap();
        b
    }

    fn error_of(v: Value) -> String {
        Config::from_value(&v).unwrap_err().0
    }

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn defaults() {
        let c = Config::from_value(&base()).unwrap();
        assert_eq!(c.seed, 1);
        assert_eq!(c.mtu, 1500);
        assert!(c.realtime);
        assert_eq!(c.links[0].a_to_b, DirectionConfig::default());
        assert_eq!(c.events_format, EventFormat::Csv);
    }

    #[test]
    fn full_direction() {
        let v = with(
            "a_to_b",
            json!({"delay_s": 0.05, "jitter_s": 0.001, "reorder": true,
                   "loss": {"model": "gilbert_elliott", "p": 0.01, "r": 0.3, "k": 0.99, "h": 0.1},
                   "rate_bps": 10e6, "queue_bytes": 150000,
                   "outages": [{"at_s": 10, "duration_s": 1.5}, {"at_s": 2, "duration_s": 1}]}),
        );
        let c = Config::from_value(&v).unwrap();
        let d = &c.links[0].a_to_b;
        assert_eq!(d.delay_ns, 50_000_000);
        assert_eq!(d.jitter_ns, 1_000_000);
        assert!(d.reorder);
        assert_eq!(d.loss, LossSpec::GilbertElliott { p: 0.01, r: 0.3, k: 0.99, h: 0.1 });
        assert_eq!(d.rate_bps, Some(10_000_000));
        assert_eq!(d.queue, QueueLimit::Bytes(150_000));
        assert_eq!(d.outages[0], Window { start_ns: 10_000_000_000, end_ns: 11_500_000_000 });
        assert_eq!(c.links[0].b_to_a, DirectionConfig::default());
        assert_eq!(d.aqm, AqmSpec::DropTail);
    }

    #[test]
    fn aqm_tables_with_defaults_and_given_values() {
        let v = with("a_to_b.aqm", json!({"discipline": "codel", "ecn": true}));
        let d = Config::from_value(&v).unwrap().links[0].a_to_b.clone();
        assert_eq!(d.aqm, AqmSpec::Codel(CodelParams { ecn: true, ..CodelParams::default() }));
        let v = with("b_to_a.aqm", json!({"discipline": "fq_codel", "target_s": 0.002, "quantum_bytes": 300, "flows": 16}));
        let c = Config::from_value(&v).unwrap();
        match c.links[0].b_to_a.aqm {
            AqmSpec::FqCodel(f) => {
                assert_eq!((f.codel.target_ns, f.codel.interval_ns, f.quantum_bytes, f.flows), (2_000_000, 100_000_000, 300, 16));
                assert!(!f.codel.ecn);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(c.to_json()["b_to_a"]["aqm"]["flows"], 16);
        let v = with("a_to_b.aqm", json!({"discipline": "pie", "max_burst_s": 0, "beta": 2}));
        let d = Config::from_value(&v).unwrap().links[0].a_to_b.clone();
        assert_eq!(d.aqm, AqmSpec::Pie(PieParams { max_burst_ns: 0, beta: 2.0, ..PieParams::default() }));
        let v = with("a_to_b.aqm", json!({"discipline": "drop_tail"}));
        assert_eq!(Config::from_value(&v).unwrap().links[0].a_to_b.aqm, AqmSpec::DropTail);
        assert_eq!(
            error_of(with("a_to_b.aqm", json!({"discipline": "red"}))),
            "a_to_b.aqm.discipline: unknown variant `red`, expected one of `drop_tail`, `codel`, `fq_codel`, `pie`"
        );
        assert_eq!(
            error_of(with("a_to_b.aqm", json!({"discipline": "codel", "quantum_bytes": 300}))),
            "a_to_b.aqm: unknown field `quantum_bytes`, expected one of `target_s`, `interval_s`, `ecn`"
        );
    }

    #[test]
    fn bad_values_give_exact_messages() {
        let cases: Vec<(Value, &str)> = vec![
            (with("a_to_b.delay_s", json!(-1)), "a_to_b.delay_s: must be a finite number of seconds in [0, 60], got -1"),
            (with("b_to_a.delay_s", json!("50ms")), "b_to_a.delay_s: invalid type: string \"50ms\", expected a number"),
            (with("a_to_b.jitter_s", json!(61)), "a_to_b.jitter_s: must be a finite number of seconds in [0, 60], got 61"),
            (
                with("a_to_b.loss", json!({"model": "bernoulli", "p": 1.5})),
                "a_to_b.loss.p: must be a probability in [0, 1], got 1.5",
            ),
            (with("a_to_b.loss", json!({"model": "bernoulli"})), "a_to_b.loss: missing field `p`"),
            (
                with("b_to_a.loss", json!({"model": "gilbert_elliott", "p": 0.1, "r": -0.2})),
                "b_to_a.loss.r: must be a probability in (0, 1], got -0.2",
            ),
            (
                with("a_to_b.loss", json!({"model": "gilbert", "p": 0.1})),
                "a_to_b.loss.model: unknown variant `gilbert`, expected one of `none`, `bernoulli`, `gilbert_elliott`",
            ),
            (
                with("a_to_b.loss", json!({"model": "bernoulli", "p": 0.1, "r": 0.2})),
                "a_to_b.loss: unknown field `r`, expected `p`",
            ),
            (
                with("a_to_b.rate_bps", json!(0)),
                "a_to_b.rate_bps: must be a whole number of bits per second in [1, 1e12], got 0",
            ),
            (
                with("a_to_b.rate_bps", json!(1.5)),
                "a_to_b.rate_bps: must be a whole number of bits per second in [1, 1e12], got 1.5",
            ),
            (
                with("a_to_b.queue_packets", json!(0)),
                "a_to_b.queue_packets: must be a whole number of packets in [1, 1e6], got 0",
            ),
            (
                with("a_to_b.queue_bytes", json!(1000)),
                "a_to_b.queue_bytes: must be at least mtu (1500) bytes (the queue must hold one full packet), got 1000",
            ),
            (
                with("a_to_b", json!({"queue_bytes": 3000, "queue_packets": 2})),
                "a_to_b.queue_bytes: cannot be combined with a_to_b.queue_packets (one limit per queue)",
            ),
            (with("a_to_b.delya_s", json!(1)), "a_to_b.delya_s: unknown field `delya_s`, expected one of `delay_s`, `jitter_s`, `reorder`, `loss`, `rate_bps`, `trace_file`, `queue_packets`, `queue_bytes`, `outages`, `pcap_file`, `aqm`"),
            (
                with("a_to_b.outages", json!([{"at_s": 1, "duration_s": 0}])),
                "a_to_b.outages[0].duration_s: must be a finite number of seconds in (0, 3600], got 0",
            ),
            (
                with("a_to_b.outages", json!([{"at_s": 5, "duration_s": 1}, {"at_s": 5.5, "duration_s": 1}])),
                "a_to_b.outages[1]: overlaps a_to_b.outages[0] (outage windows must not overlap)",
            ),
            (with("a_to_b.outages", json!([{"duration_s": 1}])), "a_to_b.outages[0]: missing field `at_s`"),
            (with("a_to_b.outages", json!([{"at_s": 3601, "duration_s": 1}])), "a_to_b.outages[0].at_s: must be a finite number of seconds in [0, 3600], got 3601"),
            (with("a_to_b.queue_packets", json!(1_000_001)), "a_to_b.queue_packets: must be a whole number of packets in [1, 1e6], got 1000001"),
            (with("a_to_b.queue_bytes", json!(2147483648u64)), "a_to_b.queue_bytes: must be a whole number of bytes in [1, 2147483647], got 2147483648"),
            (with("a_to_b.loss", json!({"model": "gilbert_elliott", "p": 0.1, "r": 0})), "a_to_b.loss.r: must be a probability in (0, 1], got 0"),
            (with("seed", json!(-3)), "seed: must be a whole number in [0, 2^64), got -3"),
            (with("realtime", json!("maybe")), "realtime: invalid type: string \"maybe\", expected a boolean"),
            (with("mtu", json!(40)), "mtu: must be a whole number of bytes in [68, 65535], got 40"),
            (with("events_format", json!("xml")), "events_format: must be csv or jsonl, got \"xml\""),
            (with("queue_sample_s", json!(0.0)), "queue_sample_s: must be a number of seconds in [0.0001, 60], got 0"),
            (with("queue_sample_s", json!(61)), "queue_sample_s: must be a number of seconds in [0.0001, 60], got 61"),
            (with("a.tun", json!("a-very-long-device-name")), "a.tun: must be 1 to 15 characters without '/' or spaces, got \"a-very-long-device-name\""),
            (with("b.netns", json!("x/y")), "b.netns: must be a namespace name (no '/' or spaces) or an absolute path, got \"x/y\""),
            (with("counters_file", json!("/nonexistent-dir-tdl/c.json")), "counters_file: directory /nonexistent-dir-tdl does not exist"),
            (with("bogus", json!(1)), "bogus: unknown field `bogus`, expected one of `a`, `b`, `seed`, `realtime`, `ready_file`, `counters_file`, `events_file`, `events_format`, `queue_file`, `queue_sample_s`, `mtu`, `max_packets`, `spin_us`, `spin_percent`, `pcap_snaplen`, `a_to_b`, `b_to_a`, `links`"),
            (json!([1]), "config: expected a table/object, got [1]"),
            (with("a_to_b", json!([0.05])), "a_to_b: expected a table/object, got [0.05]"),
            (with("a_to_b.loss", json!(["bernoulli", 0.1])), "a_to_b.loss: expected a table/object, got [\"bernoulli\",0.1]"),
            (with("a_to_b.outages", json!([[1, 1]])), "a_to_b.outages[0]: expected a table/object, got [1,1]"),
            (with("a_to_b", json!(3)), "a_to_b: invalid type: integer `3`, expected a table of direction settings"),
            (with("spin_percent", json!(101)), "spin_percent: must be a whole number of percent in [0, 100], got 101"),
            (with("a_to_b.aqm", json!({"discipline": "codel", "target_s": 0})), "a_to_b.aqm.target_s: must be a finite number of seconds in (0, 60], got 0"),
            (with("b_to_a.aqm", json!({"discipline": "fq_codel", "flows": 1.5})), "b_to_a.aqm.flows: must be a whole number of flows in [1, 65536], got 1.5"),
            (with("a_to_b.aqm", json!({"discipline": "pie", "alpha": -1})), "a_to_b.aqm.alpha: must be a finite number per second in [0, 100], got -1"),
            (with("a_to_b.aqm", json!(["codel"])), "a_to_b.aqm: expected a table/object, got [\"codel\"]"),
            (json!({"b": {"netns": "nb", "tun": "tb"}}), "a: required ({\"netns\": NAME, \"tun\": DEVICE}; flags --a-netns, --a-tun)"),
            (json!({"a": {"netns": "na"}, "b": {"netns": "nb", "tun": "tb"}}), "a.tun: required (the name of an existing TUN device in a.netns)"),
        ];
        for (v, want) in cases {
            assert_eq!(error_of(v), want);
        }
    }

    #[test]
    fn trace_file_is_read_and_checked() {
        let dir = std::env::temp_dir().join(format!("tdl-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.trace");
        let bad = dir.join("bad.trace");
        std::fs::write(&good, "1\n2\n2\n5\n").unwrap();
        std::fs::write(&bad, "1\n2\nabc\n").unwrap();
        let c = Config::from_value(&with("b_to_a.trace_file", json!(good.to_str().unwrap()))).unwrap();
        assert_eq!(c.links[0].b_to_a.trace.as_ref().unwrap().len(), 4);
        let e = error_of(with("b_to_a.trace_file", json!(bad.to_str().unwrap())));
        assert_eq!(
            e,
            format!(
                "b_to_a.trace_file: {}: line 3: \"abc\" is not a millisecond timestamp (a non-negative integer per line)",
                bad.display()
            )
        );
        let mut both = with("b_to_a.trace_file", json!(good.to_str().unwrap()));
        set_path(&mut both, "b_to_a.rate_bps", json!(1000)).unwrap();
        assert_eq!(error_of(both), "b_to_a.trace_file: cannot be combined with b_to_a.rate_bps (choose one bottleneck)");
        let missing = error_of(with("b_to_a.trace_file", json!("/nonexistent/x.trace")));
        assert_eq!(missing, "b_to_a.trace_file: cannot read /nonexistent/x.trace: No such file or directory");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn flags_map_to_keys_and_override_the_file() {
        let dir = std::env::temp_dir().join(format!("tdl-flags-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("c.toml");
        std::fs::write(
            &f,
            "seed = 5\n[a]\nnetns = \"na\"\ntun = \"ta\"\n[b]\nnetns = \"nb\"\ntun = \"tb\"\n\
             [a_to_b]\ndelay_s = 0.02\nqueue_packets = 100\n[a_to_b.loss]\nmodel = \"bernoulli\"\np = 0.01\n",
        )
        .unwrap();
        let a = parse_args(&args(&[
            "--config",
            f.to_str().unwrap(),
            "--ab-delay-s",
            "0.05",
            "--ba-delay-s=0.01",
            "--ba-loss-gilbert-elliott",
            "0.01,0.25",
            "--ab-outage",
            "3:0.5",
            "--ab-outage",
            "1:1",
            "--seed",
            "9",
            "--realtime",
            "false",
        ]))
        .unwrap();
        let c = a.config().unwrap();
        assert_eq!(c.seed, 9);
        assert!(!c.realtime);
        assert_eq!(c.links[0].a_to_b.delay_ns, 50_000_000);
        assert_eq!(c.links[0].a_to_b.queue, QueueLimit::Packets(100));
        assert_eq!(c.links[0].a_to_b.loss, LossSpec::Bernoulli { p: 0.01 });
        assert_eq!(c.links[0].a_to_b.outages.len(), 2);
        assert_eq!(c.links[0].b_to_a.delay_ns, 10_000_000);
        assert_eq!(c.links[0].b_to_a.loss, LossSpec::GilbertElliott { p: 0.01, r: 0.25, k: 1.0, h: 0.0 });
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn flag_errors_name_the_key() {
        let a = parse_args(&args(&["--a-netns", "x", "--a-tun", "t", "--b-netns", "y", "--b-tun", "u", "--ab-delay-s", "5ms"])).unwrap();
        assert_eq!(a.config().unwrap_err().0, "a_to_b.delay_s: invalid type: string \"5ms\", expected a number");
        assert_eq!(parse_args(&args(&["--ab-dealy-s", "1"])).unwrap_err().0, "--ab-dealy-s: unknown flag (see --help)");
        assert_eq!(parse_args(&args(&["--seed"])).unwrap_err().0, "--seed: needs a value");
        assert_eq!(
            parse_args(&args(&["--ab-outage", "10"])).unwrap_err().0,
            "a_to_b.outages (--ab-outage): expected AT_S:DURATION_S such as 10:1.5, got \"10\""
        );
        let a = parse_args(&args(&["--a-netns", "x", "--a-tun", "t", "--b-netns", "y", "--b-tun", "u", "--ba-loss-bernoulli", "2"])).unwrap();
        assert_eq!(a.config().unwrap_err().0, "b_to_a.loss.p: must be a probability in [0, 1], got 2");
        assert_eq!(parse_args(&args(&["stray"])).unwrap_err().0, "stray: unexpected argument (flags start with --; see --help)");
    }

    #[test]
    fn every_error_is_reported_one_line_each() {
        // Nothing at all: both endpoints are missing, each named.
        assert_eq!(
            error_of(json!({})),
            "a: required ({\"netns\": NAME, \"tun\": DEVICE}; flags --a-netns, --a-tun)\n\
             b: required ({\"netns\": NAME, \"tun\": DEVICE}; flags --b-netns, --b-tun)"
        );
        // Values out of their limits in every part of a file: each one named, in key order.
        let v = json!({
            "a": {"netns": "na"},
            "b": {"tun": "tb"},
            "seed": -1,
            "mtu": 10,
            "a_to_b": {"delay_s": -1, "loss": {"model": "bernoulli", "p": 2}, "queue_packets": 0, "trace_file": "/"},
            "b_to_a": {"jitter_s": 61, "rate_bps": 0},
            "events_file": "/",
        });
        let got = error_of(v);
        let lines: Vec<&str> = got.lines().collect();
        for want in [
            "mtu: must be a whole number of bytes in [68, 65535], got 10",
            "a.tun: required",
            "b.netns: required",
            "seed: must be a whole number in [0, 2^64), got -1",
            "events_file: / is a directory; give a file name",
            "a_to_b.delay_s: must be a finite number of seconds in [0, 60], got -1",
            "a_to_b.loss.p: must be a probability in [0, 1], got 2",
            "a_to_b.queue_packets: must be a whole number of packets in [1, 1e6]",
            "a_to_b.trace_file: / is a directory, not a trace file",
            "b_to_a.jitter_s: must be a finite number of seconds in [0, 60], got 61",
            "b_to_a.rate_bps: must be a whole number of bits per second in [1, 1e12]",
        ] {
            assert_eq!(lines.iter().filter(|l| l.starts_with(want)).count(), 1, "{want:?} not once in:\n{got}");
        }
        assert_eq!(lines.len(), 11, "{got}");
        // A structural mistake (an unknown key) is reported alone: the file does not parse.
        assert_eq!(error_of(json!({"speed": 3, "mtu": 10})), "speed: unknown field `speed`, expected one of `a`, `b`, `seed`, `realtime`, `ready_file`, `counters_file`, `events_file`, `events_format`, `queue_file`, `queue_sample_s`, `mtu`, `max_packets`, `spin_us`, `spin_percent`, `pcap_snaplen`, `a_to_b`, `b_to_a`, `links`");
    }

    #[test]
    fn file_errors() {
        assert_eq!(load_file("x.yaml").unwrap_err().0, "--config: cannot read x.yaml: No such file or directory");
        let dir = std::env::temp_dir().join(format!("tdl-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let y = dir.join("c.yaml");
        std::fs::write(&y, "a: 1").unwrap();
        assert!(load_file(y.to_str().unwrap()).unwrap_err().0.contains("file name must end in .json or .toml"));
        let j = dir.join("c.json");
        std::fs::write(&j, "{\"a\": ").unwrap();
        assert!(load_file(j.to_str().unwrap()).unwrap_err().0.starts_with(&format!("--config: {}: invalid JSON", j.display())));
        let t = dir.join("c.toml");
        std::fs::write(&t, "seed = 1\n[a\n").unwrap();
        assert!(load_file(t.to_str().unwrap()).unwrap_err().0.starts_with(&format!("--config: {}: invalid TOML at line 2", t.display())));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn two_links() -> Value {
        json!({"seed": 10, "links": [
            {"name": "bottleneck", "a": {"netns": "l", "tun": "t0"}, "b": {"netns": "r", "tun": "t1"},
             "a_to_b": {"delay_s": 0.025, "rate_bps": 1e8, "queue_packets": 150}},
            {"name": "access-h0", "a": {"netns": "h0", "tun": "t0"}, "b": {"netns": "l", "tun": "a0"}, "seed": 3,
             "b_to_a": {"delay_s": 0.01, "loss": {"model": "bernoulli", "p": 0.1}}},
            {"name": "access-h1", "a": {"netns": "h1", "tun": "t0"}, "b": {"netns": "l", "tun": "a1"}},
        ]})
    }

    #[test]
    fn links_are_named_each_with_its_own_settings_and_seed() {
        let c = Config::from_value(&two_links()).unwrap();
        assert!(c.multi);
        let names: Vec<&str> = c.links.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["bottleneck", "access-h0", "access-h1"]);
        assert_eq!(c.links[0].a_to_b.queue, QueueLimit::Packets(150));
        assert_eq!(c.links[0].b_to_a, DirectionConfig::default());
        assert_eq!(c.links[1].b_to_a.loss, LossSpec::Bernoulli { p: 0.1 });
        assert_eq!(c.links[1].a.netns, "h0");
        // a link's seed: its own, else the top-level seed + its index (distinct streams)
        assert_eq!([c.links[0].seed, c.links[1].seed, c.links[2].seed], [10, 3, 12]);
        // a single-link file is one link named "link", in the flat form
        let one = Config::from_value(&base()).unwrap();
        assert!(!one.multi && one.links.len() == 1 && one.links[0].name == "link");
        assert!(one.to_json().get("links").is_none() && one.to_json()["a"]["tun"] == "ta");
    }

    #[test]
    fn named_links_round_trip_through_json() {
        let c = Config::from_value(&two_links()).unwrap();
        let mut j = c.to_json();
        for l in j["links"].as_array_mut().unwrap() {
            for d in ["a_to_b", "b_to_a"] {
                let o = l[d].as_object_mut().unwrap();
                o.remove("stationary_loss");
                o.remove("trace_mean_rate_bps");
            }
        }
        assert_eq!(Config::from_value(&j).unwrap(), c);
    }

    #[test]
    fn named_links_errors_name_the_link() {
        let set = |path: &str, v: Value| {
            let mut x = two_links();
            set_path(&mut x, path, v).unwrap();
            x
        };
        let mut bad_delay = two_links();
        bad_delay["links"][1]["a_to_b"] = json!({"delay_s": -1});
        assert_eq!(error_of(bad_delay), "links[1].a_to_b.delay_s: must be a finite number of seconds in [0, 60], got -1");
        let mut typo = two_links();
        typo["links"][2]["a_to_b"] = json!({"delya_s": 1});
        assert!(error_of(typo).starts_with("links[2].a_to_b.delya_s: unknown field `delya_s`, expected one of `delay_s`"));
        let mut unknown = two_links();
        unknown["links"][0]["speed"] = json!(1);
        assert_eq!(
            error_of(unknown),
            "links[0].speed: unknown field `speed`, expected one of `name`, `a`, `b`, `seed`, `events_file`, `queue_file`, `a_to_b`, `b_to_a`"
        );
        let mut dup = two_links();
        dup["links"][2]["name"] = json!("access-h0");
        assert_eq!(error_of(dup), "links[2].name: \"access-h0\" is already the name of links[1] (names key the counters)");
        let mut unnamed = two_links();
        unnamed["links"][0].as_object_mut().unwrap().remove("name");
        assert_eq!(error_of(unnamed), "links[0].name: required (the link's name, which keys its counters)");
        let mut badname = two_links();
        badname["links"][0]["name"] = json!("a b");
        assert_eq!(error_of(badname), "links[0].name: must be 1 to 64 characters of letters, digits, '.', '_' or '-', got \"a b\"");
        let mut shared = two_links();
        shared["links"][2]["b"] = json!({"netns": "l", "tun": "a0"});
        assert_eq!(error_of(shared), "links[2].b: a0 in l is already links[1].b (a TUN device is the end of one link)");
        assert_eq!(
            error_of(set("a_to_b", json!({"delay_s": 0.01}))),
            "a_to_b: cannot be combined with links (each link sets its own a_to_b in its entry)"
        );
        assert_eq!(error_of(json!({"links": []})), "links: must list at least one link ({name, a, b, ...})");
        assert_eq!(error_of(json!({"links": [[1]]})), "links[0]: expected a table/object, got [1]");
        let mut noend = two_links();
        noend["links"][1].as_object_mut().unwrap().remove("a");
        assert_eq!(error_of(noend), "links[1].a: required ({\"netns\": NAME, \"tun\": DEVICE})");
    }

    #[test]
    fn effective_config_round_trips_through_json() {
        let v = with("a_to_b", json!({"delay_s": 0.05, "loss": {"model": "bernoulli", "p": 0.01}, "queue_packets": 10}));
        let c = Config::from_value(&v).unwrap();
        let mut j = c.to_json();
        // drop the informational keys, then it must validate to the same config
        for d in ["a_to_b", "b_to_a"] {
            let o = j[d].as_object_mut().unwrap();
            o.remove("stationary_loss");
            o.remove("trace_mean_rate_bps");
        }
        assert_eq!(Config::from_value(&j).unwrap(), c);
    }
}
