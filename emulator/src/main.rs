//! `tcpdelay-link`: parse and validate the configuration (exit 2 on a bad
//! value, before anything is touched), attach to every link's two TUN devices, set up
//! the process (parent-death signal, timer slack, SCHED_FIFO when permitted),
//! open the output files and run the event loop until SIGTERM/SIGINT.

use std::io::Write;
use std::fs::File;
use std::process::exit;
use tcpdelay_link::config::{self, Config, DirectionConfig, LinkConfig};
use tcpdelay_link::aqm::Aqm;
use tcpdelay_link::counters::{DirCounters, SojournHistogram};
use tcpdelay_link::delay::{DelayLine, DelaySampler};
use tcpdelay_link::event_loop::{raw, Direction, Emulator, LinkOutputs};
use tcpdelay_link::events::EventWriter;
use tcpdelay_link::link::{Bottleneck, Link};
use tcpdelay_link::loss::LossProcess;
use tcpdelay_link::outage::OutageSchedule;
use tcpdelay_link::pcap::PcapWriter;
use tcpdelay_link::queue::DropTailQueue;
use tcpdelay_link::rate::RateShaper;
use tcpdelay_link::rng::{stream, Rng};
use tcpdelay_link::trace::TraceShaper;
use tcpdelay_link::writer::BackgroundWriter;
use tcpdelay_link::{gso, netns, sys, tun};

const PROG: &str = "tcpdelay-link";
/// SCHED_FIFO priority of the loop (docs/emulator.md "Process").
const REALTIME_PRIORITY: i32 = 20;

/// Exit 2 with the message; a configuration with several errors gives one line per error.
fn usage_error(msg: &str) -> ! {
    for line in msg.lines() {
        eprintln!("{PROG}: {line}");
    }
    exit(2)
}

fn fatal(msg: &str) -> ! {
    eprintln!("{PROG}: {msg}");
    exit(1)
}

fn build_link(d: &DirectionConfig, seed: u64, streams: [u64; 3], mtu: u32) -> Link {
    let [loss_stream, jitter_stream, aqm_stream] = streams;
    let bottleneck = match (&d.trace, d.rate_bps) {
        (Some(t), _) => Bottleneck::Trace(TraceShaper::new(t.clone())),
        (None, Some(r)) => Bottleneck::Rate(RateShaper::new(r)),
        (None, None) => Bottleneck::Unlimited,
    };
    Link {
        outages: OutageSchedule::new(d.outages.clone()),
        loss: LossProcess::new(d.loss.clone(), Rng::new(seed, loss_stream)),
        queue: DropTailQueue::new(d.queue),
        bottleneck,
        delay: DelaySampler::new(d.delay_ns, d.jitter_ns, d.reorder, Rng::new(seed, jitter_stream)),
        aqm: Aqm::new(&d.aqm, d.queue, mtu, Rng::new(seed, aqm_stream)),
        busy_until_ns: 0,
        service_floor_ns: 0,
        sojourn: SojournHistogram::default(),
    }
}

fn create(key: &str, path: &str) -> BackgroundWriter {
    match File::create(path) {
        Ok(f) => BackgroundWriter::new(f),
        Err(e) => usage_error(&format!("{key}: cannot create {path}: {e}")),
    }
}

/// A panic anywhere (any thread) ends the whole process at once, as `panic = "abort"` would:
/// the message first (the default hook), then SIGABRT. Done here rather than in the release
/// profile so that `cargo test --release` builds on the same compiled dependencies (the tests
/// need unwinding; with the profile's abort every dependency was compiled twice).
fn abort_on_panic() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        std::process::abort();
    }));
}

fn main() {
    abort_on_panic();
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = config::parse_args(&argv).unwrap_or_else(|e| usage_error(&e.0));
    if args.help {
        print!("{}", config::help_text());
        return;
    }
    if args.version {
        println!("{PROG} {}", env!("CARGO_PKG_VERSION"));
        return;
    }
    if args.schema {
        println!("{}", serde_json::to_string_pretty(&tcpdelay_link::schema::schema_json()).unwrap());
        return;
    }
    let cfg: Config = args.config().unwrap_or_else(|e| usage_error(&e.0));
    if args.check {
        println!("{}", serde_json::to_string_pretty(&cfg.to_json()).unwrap());
        return;
    }

    if !sys::die_with_parent() {
        fatal("the parent process exited before the emulator started");
    }
    // Timer slack 1 ns before any thread starts (threads inherit it).
    sys::set_timer_slack_ns(1);
    // Block the signals before any thread starts (writer threads inherit the mask),
    // so they all arrive through the signalfd.
    let sigfd = sys::signal_fd().unwrap_or_else(|e| fatal(&format!("signalfd: {e}")));

    // Attach to the devices (each inside its namespace). A missing namespace or
    // device is a configuration error: exit 2, nothing has moved yet.
    sys::raise_fd_limit();
    let key = |l: usize, k: &str| if cfg.multi { format!("links[{l}].{k}") } else { k.to_string() };
    let mut tuns: Vec<(File, File)> = Vec::with_capacity(cfg.links.len());
    for (i, l) in cfg.links.iter().enumerate() {
        let whole = gso::link_passes_whole(l);
        let a = netns::in_netns(&l.a.netns, || tun::open_existing(&l.a.tun, whole))
            .unwrap_or_else(|e| usage_error(&format!("{}: {e}", key(i, "a"))));
        let b = netns::in_netns(&l.b.netns, || tun::open_existing(&l.b.tun, whole))
            .unwrap_or_else(|e| usage_error(&format!("{}: {e}", key(i, "b"))));
        tuns.push((a, b));
    }

    let mut dirs = Vec::with_capacity(2 * cfg.links.len());
    let mut outputs = Vec::with_capacity(cfg.links.len());
    for (i, (l, (tun_a, tun_b))) in cfg.links.iter().zip(&tuns).enumerate() {
        dirs.extend(directions(&cfg, l, i, &key(i, ""), raw(tun_a), raw(tun_b)));
        outputs.push(outputs_of(&cfg, l, &key(i, "")));
    }
    // The files' writer threads start above at normal priority; only the loop runs real time.
    let mut realtime_active = false;
    if cfg.realtime {
        // Above the testbed's real-time programs (SCHED_RR 10): a due packet never waits for a
        // program's time slice. One thread takes at most one core, so they keep the others.
        match sys::try_sched_fifo(REALTIME_PRIORITY) {
            Ok(()) => realtime_active = true,
            Err(e) => eprintln!("{PROG}: realtime: SCHED_FIFO not available ({e}); running with normal priority"),
        }
    }

    // Timer precision as it stands (SCHED_FIFO reads 0 slack), and a warning
    // when the kernel's timers are tick-based (a sleep then ends on a tick).
    let timer_slack_ns = sys::timer_slack_ns();
    let clock_resolution_ns = sys::clock_resolution_ns();
    if clock_resolution_ns > 1_000 {
        eprintln!(
            "{PROG}: warning: the kernel's timers have {} us resolution (high-resolution timers inactive); \
             deliveries may be that late unless spin_us covers it",
            clock_resolution_ns / 1000
        );
    }
    let mut emu = Emulator::new(dirs, outputs, &cfg, realtime_active);
    emu.timer_slack_ns = timer_slack_ns;
    emu.clock_resolution_ns = clock_resolution_ns;
    let ready = cfg.ready_file.clone();
    let result = emu.run(sigfd, || {
        if let Some(p) = &ready {
            if let Err(e) = std::fs::write(p, format!("{}\n", std::process::id())) {
                eprintln!("{PROG}: ready_file: cannot write {p}: {e}");
            }
        }
    });
    if let Err(e) = result {
        fatal(&format!("event loop: {e}"));
    }
    if let Some(msg) = &emu.fatal {
        fatal(msg);
    }
    drop(tuns);
}

/// The key of a link's setting in messages: `prefix` is "" (single link) or `links[i].`.
fn key_in(prefix: &str, k: &str) -> String {
    format!("{prefix}{k}")
}

/// Link `i`'s two directions: a_to_b reads `a` and writes `b`, b_to_a the reverse; each draws
/// loss and jitter from its own stream of the link's seed. A delay-only link passes
/// super-packets whole (`gso`).
fn directions(cfg: &Config, l: &LinkConfig, i: usize, prefix: &str, a: std::os::fd::RawFd, b: std::os::fd::RawFd) -> [Direction; 2] {
    let pcap = |key: &str, p: &Option<String>| {
        p.as_ref().map(|p| {
            PcapWriter::new(create(key, p), cfg.pcap_snaplen)
                .unwrap_or_else(|e| usage_error(&format!("{key}: cannot write {p}: {e}")))
        })
    };
    [
        Direction {
            name: "a_to_b",
            owner: i,
            link: build_link(&l.a_to_b, l.seed, [stream::LOSS_A_TO_B, stream::JITTER_A_TO_B, stream::AQM_A_TO_B], cfg.mtu),
            line: DelayLine::new(l.a_to_b.reorder),
            counters: DirCounters::default(),
            pcap: pcap(&key_in(prefix, "a_to_b.pcap_file"), &l.a_to_b.pcap_file),
            next_id: 0,
            src: a,
            dst: b,
            whole: gso::link_passes_whole(l),
            whole_extra_in_flight: 0,
        },
        Direction {
            name: "b_to_a",
            owner: i,
            link: build_link(&l.b_to_a, l.seed, [stream::LOSS_B_TO_A, stream::JITTER_B_TO_A, stream::AQM_B_TO_A], cfg.mtu),
            line: DelayLine::new(l.b_to_a.reorder),
            counters: DirCounters::default(),
            pcap: pcap(&key_in(prefix, "b_to_a.pcap_file"), &l.b_to_a.pcap_file),
            next_id: 0,
            src: b,
            dst: a,
            whole: gso::link_passes_whole(l),
            whole_extra_in_flight: 0,
        },
    ]
}

/// A link's event stream and queue trace, opened.
fn outputs_of(cfg: &Config, l: &LinkConfig, prefix: &str) -> LinkOutputs {
    let events = l.events_file.as_ref().map(|p| {
        let key = key_in(prefix, "events_file");
        EventWriter::new(create(&key, p), cfg.events_format)
            .unwrap_or_else(|e| usage_error(&format!("{key}: cannot write {p}: {e}")))
    });
    let queue_out = l.queue_file.as_ref().map(|p| {
        let key = key_in(prefix, "queue_file");
        let mut w = create(&key, p);
        w.write_all(b"time_s,direction,packets,bytes\n")
            .unwrap_or_else(|e| usage_error(&format!("{key}: cannot write {p}: {e}")));
        w
    });
    LinkOutputs { name: l.name.clone(), seed: l.seed, events, queue_out }
}
