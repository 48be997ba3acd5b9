//! The event stream: one line per arrival, enqueue, drop and departure, written
//! as it happens through a buffered writer (flushed on SIGUSR1 and at exit).
//!
//! Formats:
//! * `csv` (default): header
//!   `t_ns,dir,id,event,size_bytes,queue_packets,queue_bytes,reason,due_ns,lateness_ns`;
//!   empty fields where a column does not apply;
//! * `jsonl`: one JSON object per line with the same keys, absent when not applicable.
//!
//! `t_ns` and `due_ns` are nanoseconds since the emulator started its loop
//! (CLOCK_MONOTONIC); `id` numbers packets per direction in arrival order, so
//! an arrival and its enqueue/drop/departure lines join on (dir, id).
//! Events: `arrival` (read from the source TUN), `enqueue` (accepted; queue
//! occupancy after it, and its due time), `drop` (with `reason`), `departure`
//! (written to the destination TUN; `lateness_ns` = how late vs its due time).
//! With an AQM discipline (`crate::aqm`) a packet's due time is known only when it leaves the
//! queue: its `enqueue` line has no `due_ns`, and a `dequeue` line (at the time its
//! transmission starts; queue occupancy after it, `due_ns`, the queue's sojourn time in
//! `lateness_ns`'s column as `sojourn_ns` in jsonl, and `reason` = `ce` when it was marked CE)
//! follows. A packet the AQM drops gets a `drop` line with reason `aqm`.

use std::io::{self, Write};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventFormat {
    Csv,
    Jsonl,
}

pub struct EventWriter<W: Write> {
    w: W,
    format: EventFormat,
}

/// One event line.
#[derive(Clone, Copy, Debug)]
pub enum Event<'a> {
    Arrival { size: u32 },
    Enqueue { size: u32, queue_packets: u64, queue_bytes: u64, due_ns: Option<u64> },
    Dequeue { size: u32, queue_packets: u64, queue_bytes: u64, due_ns: u64, sojourn_ns: u64, ce: bool },
    Drop { size: u32, queue_packets: u64, queue_bytes: u64, reason: &'a str },
    Departure { size: u32, lateness_ns: u64 },
}

pub const CSV_HEADER: &str = "t_ns,dir,id,event,size_bytes,queue_packets,queue_bytes,reason,due_ns,lateness_ns\n";

impl<W: Write> EventWriter<W> {
    pub fn new(mut w: W, format: EventFormat) -> io::Result<EventWriter<W>> {
        if format == EventFormat::Csv {
            w.write_all(CSV_HEADER.as_bytes())?;
        }
        Ok(EventWriter { w, format })
    }

    #[inline]
    pub fn write(&mut self, t_ns: u64, dir: &str, id: u64, ev: Event) -> io::Result<()> {
        match self.format {
            EventFormat::Csv => match ev {
                Event::Arrival { size } => writeln!(self.w, "{t_ns},{dir},{id},arrival,{size},,,,,"),
                Event::Enqueue { size, queue_packets, queue_bytes, due_ns: Some(due_ns) } => {
                    writeln!(self.w, "{t_ns},{dir},{id},enqueue,{size},{queue_packets},{queue_bytes},,{due_ns},")
                }
                Event::Enqueue { size, queue_packets, queue_bytes, due_ns: None } => {
                    writeln!(self.w, "{t_ns},{dir},{id},enqueue,{size},{queue_packets},{queue_bytes},,,")
                }
                Event::Dequeue { size, queue_packets, queue_bytes, due_ns, sojourn_ns, ce } => {
                    let reason = if ce { "ce" } else { "" };
                    writeln!(self.w, "{t_ns},{dir},{id},dequeue,{size},{queue_packets},{queue_bytes},{reason},{due_ns},{sojourn_ns}")
                }
                Event::Drop { size, queue_packets, queue_bytes, reason } => {
                    writeln!(self.w, "{t_ns},{dir},{id},drop,{size},{queue_packets},{queue_bytes},{reason},,")
                }
                Event::Departure { size, lateness_ns } => {
                    writeln!(self.w, "{t_ns},{dir},{id},departure,{size},,,,,{lateness_ns}")
                }
            },
            EventFormat::Jsonl => match ev {
                Event::Arrival { size } => writeln!(
                    self.w,
                    r#"{{"t_ns":{t_ns},"dir":"{dir}","id":{id},"event":"arrival","size_bytes":{size}}}"#
                ),
                Event::Enqueue { size, queue_packets, queue_bytes, due_ns: Some(due_ns) } => writeln!(
                    self.w,
                    r#"{{"t_ns":{t_ns},"dir":"{dir}","id":{id},"event":"enqueue","size_bytes":{size},"queue_packets":{queue_packets},"queue_bytes":{queue_bytes},"due_ns":{due_ns}}}"#
                ),
                Event::Enqueue { size, queue_packets, queue_bytes, due_ns: None } => writeln!(
                    self.w,
                    r#"{{"t_ns":{t_ns},"dir":"{dir}","id":{id},"event":"enqueue","size_bytes":{size},"queue_packets":{queue_packets},"queue_bytes":{queue_bytes}}}"#
                ),
                Event::Dequeue { size, queue_packets, queue_bytes, due_ns, sojourn_ns, ce } => {
                    let reason = if ce { r#","reason":"ce""# } else { "" };
                    writeln!(
                        self.w,
                        r#"{{"t_ns":{t_ns},"dir":"{dir}","id":{id},"event":"dequeue","size_bytes":{size},"queue_packets":{queue_packets},"queue_bytes":{queue_bytes},"due_ns":{due_ns},"sojourn_ns":{sojourn_ns}{reason}}}"#
                    )
                }
                Event::Drop { size, queue_packets, queue_bytes, reason } => writeln!(
                    self.w,
                    r#"{{"t_ns":{t_ns},"dir":"{dir}","id":{id},"event":"drop","size_bytes":{size},"queue_packets":{queue_packets},"queue_bytes":{queue_bytes},"reason":"{reason}"}}"#
                ),
                Event::Departure { size, lateness_ns } => writeln!(
                    self.w,
                    r#"{{"t_ns":{t_ns},"dir":"{dir}","id":{id},"event":"departure","size_bytes":{size},"lateness_ns":{lateness_ns}}}"#
                ),
            },
        }
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    pub fn into_inner(self) -> W {
        self.w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_lines_have_all_columns() {
        let mut e = EventWriter::new(Vec::new(), EventFormat::Csv).unwrap();
        e.write(10, "a_to_b", 0, Event::Arrival { size: 1500 }).unwrap();
        e.write(10, "a_to_b", 0, Event::Enqueue { size: 1500, queue_packets: 1, queue_bytes: 1500, due_ns: Some(99) }).unwrap();
        e.write(11, "b_to_a", 3, Event::Drop { size: 52, queue_packets: 0, queue_bytes: 0, reason: "loss" }).unwrap();
        e.write(99, "a_to_b", 0, Event::Departure { size: 1500, lateness_ns: 7 }).unwrap();
        let s = String::from_utf8(e.into_inner()).unwrap();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 5);
        let ncol = lines[0].split(',').count();
        assert!(lines.iter().all(|l| l.split(',').count() == ncol));
        assert_eq!(lines[3], "11,b_to_a,3,drop,52,0,0,loss,,");
        assert_eq!(lines[4], "99,a_to_b,0,departure,1500,,,,,7");
    }

    #[test]
    fn jsonl_lines_parse() {
        let mut e = EventWriter::new(Vec::new(), EventFormat::Jsonl).unwrap();
        e.write(1, "a_to_b", 0, Event::Arrival { size: 60 }).unwrap();
        e.write(2, "a_to_b", 0, Event::Drop { size: 60, queue_packets: 4, queue_bytes: 240, reason: "queue" }).unwrap();
        let s = String::from_utf8(e.into_inner()).unwrap();
        let v: Vec<serde_json::Value> = s.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(v[1]["reason"], "queue");
        assert_eq!(v[1]["queue_packets"], 4);
        assert_eq!(v[0]["event"], "arrival");
    }
}
