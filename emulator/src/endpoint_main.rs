//! tcpdelay-endpoint: the testbed's media flows' per-packet loop (docs/native-endpoint.md).
//!
//! Usage: tcpdelay-endpoint [--spin-us N] [--spin-budget-pct P] [--rt-priority N]
//! Commands on stdin, events on stdout (see `tcpdelay_link::endpoint::engine`). Bad input
//! (arguments or a command) is one line on stderr and exit status 2.

use tcpdelay_link::endpoint::engine::{BadInput, Engine, Options};
use tcpdelay_link::sys;

fn bad(msg: &str) -> ! {
    eprintln!("tcpdelay-endpoint: {msg}");
    std::process::exit(2);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut spin_us, mut budget_pct, mut rt_priority) = (20u64, 0.5f64, 0i32);
    let mut i = 0;
    while i < args.len() {
        let val = args.get(i + 1).map(String::as_str);
        match (args[i].as_str(), val) {
            ("--spin-us", Some(v)) => spin_us = v.parse().unwrap_or_else(|_| bad(&format!("--spin-us {v:?}: not a whole number of µs"))),
            ("--spin-budget-pct", Some(v)) => {
                budget_pct = v.parse().ok().filter(|p: &f64| (0.0..=100.0).contains(p))
                    .unwrap_or_else(|| bad(&format!("--spin-budget-pct {v:?}: not a percentage 0..100")))
            }
            ("--rt-priority", Some(v)) => {
                rt_priority = v.parse().ok().filter(|p| (0..=99).contains(p))
                    .unwrap_or_else(|| bad(&format!("--rt-priority {v:?}: not 0..99")))
            }
            ("-h" | "--help", _) => {
                println!("usage: tcpdelay-endpoint [--spin-us N] [--spin-budget-pct P] [--rt-priority N]");
                return;
            }
            (a, _) => bad(&format!("unknown or incomplete argument {a:?} (--spin-us, --spin-budget-pct, --rt-priority)")),
        }
        i += 2;
    }
    if !sys::die_with_parent() {
        bad("its parent is gone");
    }
    sys::set_timer_slack_ns(1);
    let mut realtime = false;
    if rt_priority > 0 {
        let p = libc::sched_param { sched_priority: rt_priority };
        realtime = unsafe { libc::sched_setscheduler(0, libc::SCHED_RR, &p) } == 0; // refused: normal priority
    }
    let window_ns = 100_000_000u64;
    let opts = Options { spin_ns: spin_us * 1000, window_ns, budget_ns: (window_ns as f64 * budget_pct / 100.0) as u64,
                         realtime };
    let mut engine = Engine::new(opts).unwrap_or_else(|BadInput(m)| bad(&m));
    match engine.run() {
        Ok(code) => std::process::exit(code),
        Err(BadInput(m)) => bad(&m),
    }
}
