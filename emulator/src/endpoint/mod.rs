//! tcpdelay-endpoint: the media flows' per-packet loop in native code (docs/native-endpoint.md).
//!
//! Python keeps the control exchange of every flow (hello, accept, media connections opened,
//! end, summary) and hands the connected media sockets to one `tcpdelay-endpoint` process,
//! which sends each flow's precomputed schedule on time and reads, checks and records what
//! arrives, for many flows at once in one single-threaded epoll loop. `wire` is the media
//! format (framing.py's), `records` the raw rows Python converts to Parquet, `engine` the loop
//! and its command channel.

pub mod engine;
pub mod records;
pub mod wire;
