//! tcpdelay-link: a userspace link emulator between two TUN devices in two
//! network namespaces (the tcpdelay testbed's bottleneck). See docs/emulator.md.
//!
//! Modules, one concern each: `config` (flags and files, validation), `schema`
//! (the link's keys and limits, shared with Python's `tcpdelay.link`), `netns`
//! and `tun` (attaching to the devices), `link` (a direction's pipeline) built
//! from `outage`, `loss`, `queue` (drop-tail) or `aqm` (CoDel, FQ-CoDel, PIE, ECN marking),
//! `rate`, `trace` and `delay`; `pool` (packet
//! buffers), `pcap`, `events`, `counters` (observability), `sys` (Linux calls), `writer` (files written off the loop),
//! `wait` (sleep or spin), `gso` (super-packets passed whole on delay-only links), `event_loop`.

pub mod aqm;
pub mod config;
pub mod schema;
pub mod counters;
pub mod delay;
pub mod endpoint;
pub mod event_loop;
pub mod events;
pub mod gso;
pub mod link;
pub mod loss;
pub mod netns;
pub mod outage;
pub mod pcap;
pub mod pool;
pub mod queue;
pub mod rate;
pub mod rng;
pub mod sojourn;
pub mod sys;
pub mod trace;
pub mod tun;
pub mod wait;
pub mod writer;
