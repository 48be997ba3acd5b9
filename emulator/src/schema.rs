//! The link's settings as the configuration file spells them: one direction's
//! keys, the loss models, outage windows, and the limits of every value.
//!
//! This is the emulator's half of the one link schema; the Python half is
//! `tcpdelay.link` (`LIMITS`, `DirectionSpec`, `schema()`), and
//! `tests/test_link_schema.py` holds the two together through `--schema`
//! (`schema_json`). The key sets come from the serde derives themselves (what
//! the file reader accepts), the limits from [`LIMITS`] (what `config`
//! enforces). Reference: docs/emulator.md.

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::fmt;

/// Allowed range of one setting: `min <= x <= max` (`min < x` if `min_exclusive`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limit {
    /// The key: a direction key, `loss.P` for a loss parameter, `outages.K` for an outage's.
    pub key: &'static str,
    pub min: f64,
    pub max: f64,
    pub unit: &'static str,
    pub min_exclusive: bool,
}

const fn lim(key: &'static str, min: f64, max: f64, unit: &'static str) -> Limit {
    Limit { key, min, max, unit, min_exclusive: false }
}

const fn above(key: &'static str, min: f64, max: f64, unit: &'static str) -> Limit {
    Limit { key, min, max, unit, min_exclusive: true }
}

/// The limits of a link's settings: the same table as `tcpdelay.link.LIMITS`.
pub const LIMITS: &[Limit] = &[
    lim("delay_s", 0.0, 60.0, "s"),
    lim("jitter_s", 0.0, 60.0, "s"),
    lim("rate_bps", 1.0, 1e12, "bit/s"),
    lim("queue_packets", 1.0, 1e6, "packets"),
    // Also at least `mtu` (a drop-tail queue must hold one full packet), checked by `config`.
    lim("queue_bytes", 1.0, 2147483647.0, "bytes"),
    lim("loss.p", 0.0, 1.0, "probability"),
    above("loss.r", 0.0, 1.0, "probability"),
    lim("loss.k", 0.0, 1.0, "probability"),
    lim("loss.h", 0.0, 1.0, "probability"),
    lim("outages.at_s", 0.0, 3600.0, "s"),
    above("outages.duration_s", 0.0, 3600.0, "s"),
    above("aqm.target_s", 0.0, 60.0, "s"),
    above("aqm.interval_s", 0.0, 60.0, "s"),
    lim("aqm.quantum_bytes", 64.0, 1e6, "bytes"),
    lim("aqm.flows", 1.0, 65536.0, "flows"),
    above("aqm.t_update_s", 0.0, 60.0, "s"),
    lim("aqm.max_burst_s", 0.0, 60.0, "s"),
    lim("aqm.alpha", 0.0, 100.0, "1/s"),
    lim("aqm.beta", 0.0, 100.0, "1/s"),
];

/// Settings that must be whole numbers.
pub const WHOLE: &[&str] = &["rate_bps", "queue_packets", "queue_bytes", "aqm.quantum_bytes", "aqm.flows"];

/// The limit of `key` (a key of [`LIMITS`]).
pub fn limit(key: &str) -> &'static Limit {
    LIMITS.iter().find(|l| l.key == key).unwrap_or_else(|| panic!("no limit for {key}"))
}

fn fmt_num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() >= 1e5 && x != 2147483647.0 {
        let e = x.abs().log10().floor() as i32;
        let m = x / 10f64.powi(e);
        if m.fract() == 0.0 {
            return format!("{m}e{e}");
        }
    }
    format!("{x}")
}

impl Limit {
    /// `[0, 60]`, `(0, 1]`.
    pub fn range(&self) -> String {
        format!("{}{}, {}]", if self.min_exclusive { "(" } else { "[" }, fmt_num(self.min), fmt_num(self.max))
    }

    /// What is allowed, in words: `a finite number of seconds in [0, 60]`.
    pub fn allowed(&self) -> String {
        let r = self.range();
        match self.unit {
            "s" => format!("a finite number of seconds in {r}"),
            "probability" => format!("a probability in {r}"),
            "bit/s" => format!("a whole number of bits per second in {r}"),
            "1/s" => format!("a finite number per second in {r}"),
            unit => format!("a whole number of {unit} in {r}"),
        }
    }

    /// The value if it is inside the limit (and whole where [`WHOLE`] says so), else the
    /// one-line error for `path`.
    pub fn check(&self, path: &str, x: f64) -> Result<f64, String> {
        let low_ok = if self.min_exclusive { x > self.min } else { x >= self.min };
        let whole_ok = !WHOLE.contains(&self.key) || x.fract() == 0.0;
        if x.is_finite() && low_ok && x <= self.max && whole_ok {
            Ok(x)
        } else {
            Err(format!("{path}: must be {}, got {}", self.allowed(), x))
        }
    }
}

// ---------------------------------------------------------------------------
// The file's structure (serde derive; unknown keys are errors).

/// A JSON/TOML number (integer or float), as f64.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Num(pub f64);

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Num, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Num;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Num, E> {
                Ok(Num(v))
            }
        }
        d.deserialize_any(V)
    }
}

/// One direction (`a_to_b`, `b_to_a`); null is the same as absent.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, expecting = "a table of direction settings")]
pub struct RawDirection {
    pub delay_s: Option<Num>,
    pub jitter_s: Option<Num>,
    pub reorder: Option<bool>,
    pub loss: Option<RawLoss>,
    pub rate_bps: Option<Num>,
    pub trace_file: Option<String>,
    pub queue_packets: Option<Num>,
    pub queue_bytes: Option<Num>,
    pub outages: Option<Vec<RawOutage>>,
    pub pcap_file: Option<String>,
    pub aqm: Option<RawAqm>,
}

/// A queue discipline, tagged by `discipline` (`crate::aqm`); absent is drop-tail.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(
    tag = "discipline",
    rename_all = "snake_case",
    expecting = "an aqm table with discipline = drop_tail, codel, fq_codel or pie"
)]
pub enum RawAqm {
    DropTail(DropTailParams),
    Codel(CodelRaw),
    FqCodel(FqCodelRaw),
    Pie(PieRaw),
}

/// The names of the disciplines, as `discipline` spells them (the variants of [`RawAqm`]).
pub const AQM_DISCIPLINES: &[&str] = &["drop_tail", "codel", "fq_codel", "pie"];

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DropTailParams {}

/// CoDel (RFC 8289): defaults target 5 ms, interval 100 ms, no ECN.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CodelRaw {
    pub target_s: Option<Num>,
    pub interval_s: Option<Num>,
    pub ecn: Option<bool>,
}

/// FQ-CoDel (RFC 8290): CoDel's keys, quantum 1514 bytes, 1024 flows.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FqCodelRaw {
    pub target_s: Option<Num>,
    pub interval_s: Option<Num>,
    pub quantum_bytes: Option<Num>,
    pub flows: Option<Num>,
    pub ecn: Option<bool>,
}

/// PIE (RFC 8033): target 15 ms, t_update 15 ms, max_burst 150 ms, alpha 0.125, beta 1.25.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PieRaw {
    pub target_s: Option<Num>,
    pub t_update_s: Option<Num>,
    pub max_burst_s: Option<Num>,
    pub alpha: Option<Num>,
    pub beta: Option<Num>,
    pub ecn: Option<bool>,
}

/// A loss model, tagged by `model`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "model", rename_all = "snake_case", expecting = "a loss table with model = none, bernoulli or gilbert_elliott")]
pub enum RawLoss {
    None(NoLossParams),
    Bernoulli(BernoulliParams),
    GilbertElliott(GilbertElliottParams),
}

/// The names of the loss models, as `model` spells them (the variants of [`RawLoss`]).
pub const LOSS_MODELS: &[&str] = &["none", "bernoulli", "gilbert_elliott"];

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NoLossParams {}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BernoulliParams {
    pub p: Num,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GilbertElliottParams {
    pub p: Num,
    pub r: Num,
    /// P(delivered | Good), default 1.
    pub k: Option<Num>,
    /// P(delivered | Bad), default 0.
    pub h: Option<Num>,
}

/// An outage window.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, expecting = "a table {at_s, duration_s}")]
pub struct RawOutage {
    pub at_s: Num,
    pub duration_s: Num,
}

// ---------------------------------------------------------------------------
// The schema, read off the derives.

/// The field names a derived `Deserialize` asks for (`deserialize_struct`'s `fields`).
fn fields_of<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
    struct Recorder<'a>(&'a mut &'static [&'static str]);
    #[derive(Debug)]
    struct Stop;
    impl fmt::Display for Stop {
        fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("fields recorded")
        }
    }
    impl std::error::Error for Stop {}
    impl de::Error for Stop {
        fn custom<M: fmt::Display>(_: M) -> Self {
            Stop
        }
    }
    impl<'de> Deserializer<'de> for Recorder<'_> {
        type Error = Stop;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop)
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Stop> {
            *self.0 = fields;
            Err(Stop)
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
            unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Recorder(&mut fields));
    fields
}

/// The key sets and limits (`tcpdelay-link --schema`), in the shape of `tcpdelay.link.schema()`.
pub fn schema_json() -> Value {
    let with_model = |params: &'static [&'static str]| {
        let mut v: Vec<&'static str> = vec!["model"];
        v.extend_from_slice(params);
        v
    };
    let loss_keys = [
        fields_of::<NoLossParams>(),
        fields_of::<BernoulliParams>(),
        fields_of::<GilbertElliottParams>(),
    ];
    let mut loss = Map::new();
    for (name, params) in LOSS_MODELS.iter().zip(loss_keys) {
        loss.insert(name.to_string(), json!(with_model(params)));
    }
    let aqm_keys = [
        fields_of::<DropTailParams>(),
        fields_of::<CodelRaw>(),
        fields_of::<FqCodelRaw>(),
        fields_of::<PieRaw>(),
    ];
    let mut aqm = Map::new();
    for (name, params) in AQM_DISCIPLINES.iter().zip(aqm_keys) {
        let mut v: Vec<&'static str> = vec!["discipline"];
        v.extend_from_slice(params);
        aqm.insert(name.to_string(), json!(v));
    }
    let mut limits = Map::new();
    for l in LIMITS {
        limits.insert(
            l.key.to_string(),
            json!({"min": l.min, "max": l.max, "unit": l.unit, "min_exclusive": l.min_exclusive}),
        );
    }
    json!({
        "direction": fields_of::<RawDirection>(),
        "loss": loss,
        "outage": fields_of::<RawOutage>(),
        "aqm": aqm,
        "limits": limits,
        "whole": WHOLE,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_sets_come_from_the_derives() {
        let s = schema_json();
        assert_eq!(
            s["direction"],
            json!(["delay_s", "jitter_s", "reorder", "loss", "rate_bps", "trace_file", "queue_packets", "queue_bytes", "outages", "pcap_file", "aqm"])
        );
        assert_eq!(s["loss"]["gilbert_elliott"], json!(["model", "p", "r", "k", "h"]));
        assert_eq!(s["loss"]["none"], json!(["model"]));
        assert_eq!(s["outage"], json!(["at_s", "duration_s"]));
        assert_eq!(s["aqm"]["codel"], json!(["discipline", "target_s", "interval_s", "ecn"]));
        assert_eq!(s["aqm"]["drop_tail"], json!(["discipline"]));
        for name in AQM_DISCIPLINES {
            assert!(serde_json::from_value::<RawAqm>(json!({"discipline": name})).is_ok(), "{name}");
        }
        assert!(serde_json::from_value::<RawAqm>(json!({"discipline": "codel", "alpha": 1})).is_err());
    }

    #[test]
    fn every_loss_model_name_is_a_variant() {
        let params = [json!({}), json!({"p": 0.1}), json!({"p": 0.1, "r": 0.5})];
        for (name, mut v) in LOSS_MODELS.iter().zip(params) {
            v["model"] = json!(name);
            assert!(serde_json::from_value::<RawLoss>(v).is_ok(), "{name}");
        }
        assert!(serde_json::from_value::<RawLoss>(json!({"model": "bernoulli", "p": 0.1, "r": 0.2})).is_err());
        assert!(serde_json::from_value::<RawLoss>(json!({"model": "none", "p": 0.1})).is_err());
    }

    #[test]
    fn limits_check_range_and_wholeness() {
        assert_eq!(limit("delay_s").check("d", 60.0), Ok(60.0));
        assert_eq!(limit("delay_s").check("d", 60.001), Err("d: must be a finite number of seconds in [0, 60], got 60.001".into()));
        assert_eq!(limit("loss.r").check("r", 0.0), Err("r: must be a probability in (0, 1], got 0".into()));
        assert_eq!(
            limit("rate_bps").check("rate_bps", 1.5),
            Err("rate_bps: must be a whole number of bits per second in [1, 1e12], got 1.5".into())
        );
        assert_eq!(limit("queue_packets").range(), "[1, 1e6]");
        assert_eq!(limit("queue_bytes").range(), "[1, 2147483647]");
    }
}
