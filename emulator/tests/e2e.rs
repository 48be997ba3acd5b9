//! End to end through real namespaces and TUN devices (needs root and
//! /dev/net/tun, as in CI; without them the test says so and returns).
//!
//! Two namespaces with a TUN each, the emulator between them, UDP sockets
//! opened inside the namespaces by this process (setns on the test thread), so
//! one clock times both ends: the one-way delay, Bernoulli loss, the counters,
//! the pcap and a clean SIGTERM exit are checked on real packets — for a lone
//! link and for the same link served with two others by one process; and one
//! link's burst does not hold back another link's packets. A TCP transfer through a
//! delay-only link (whose TUNs carry GSO super-packets whole) arrives intact and is counted
//! in segments.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Steal time so far (/proc/stat, USER_HZ ticks): CPU time the hypervisor gave
/// to others while this VM wanted it. Printed so a failure says whether the host
/// starved the machine.
fn steal_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    stat.lines().next().and_then(|l| l.split_whitespace().nth(8)).and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn clock_resolution_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().expect("run ip");
    assert!(st.success(), "ip {}", args.join(" "));
}

/// Namespaces and the emulator, removed on drop (also when an assertion fails).
/// Link k joins namespace `ns[2k]` (address 10.199.k.1, TUN `tun[2k]`) and `ns[2k + 1]`
/// (10.199.k.2, `tun[2k + 1]`); IPv6 is off, so only the test's datagrams cross.
struct Net {
    ns: Vec<String>,
    tun: Vec<String>,
    emu: Option<Child>,
    dir: std::path::PathBuf,
}

impl Drop for Net {
    fn drop(&mut self) {
        if let Some(c) = self.emu.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for n in &self.ns {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Root, /dev/net/tun and iproute2, or a line saying why the test does not run.
fn can_run(test: &str) -> bool {
    let root = unsafe { libc::geteuid() } == 0;
    if !root || !std::path::Path::new("/dev/net/tun").exists() || Command::new("ip").arg("-V").output().is_err() {
        eprintln!("{test}: needs root, /dev/net/tun and iproute2; not run here");
        return false;
    }
    // No timer slack for this thread and the reader threads it starts (a
    // supervisor may have left a large one to inherit).
    let inherited_slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    eprintln!("{test}: timer slack inherited {inherited_slack} ns (now 1 ns), timer resolution {} ns", clock_resolution_ns());
    true
}

impl Net {
    fn new(tag: &str, links: usize) -> Net {
        let id = std::process::id();
        let dir = std::env::temp_dir().join(format!("tdl-{tag}-{id}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut net = Net { ns: Vec::new(), tun: Vec::new(), emu: None, dir };
        for k in 0..links {
            for side in 0..2 {
                let ns = format!("tdl-{tag}-{id}-{k}{side}");
                let tun = format!("tdl{id}{tag}{k}{side}");
                assert!(tun.len() <= 15, "{tun}");
                ip(&["netns", "add", &ns]);
                net.ns.push(ns.clone());
                let _ = Command::new("ip")
                    .args(["netns", "exec", &ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"])
                    .status();
                ip(&["-n", &ns, "tuntap", "add", "dev", &tun, "mode", "tun"]);
                let (me, peer) = (format!("10.199.{k}.{}", side + 1), format!("10.199.{k}.{}", 2 - side));
                ip(&["-n", &ns, "addr", "add", &me, "peer", &peer, "dev", &tun]);
                ip(&["-n", &ns, "link", "set", &tun, "txqueuelen", "10000", "up"]);
                net.tun.push(tun);
            }
        }
        net
    }

    fn path(&self, f: &str) -> String {
        self.dir.join(f).to_str().unwrap().to_string()
    }

    /// `{"a": ..., "b": ...}` of link k.
    fn ends(&self, k: usize) -> serde_json::Value {
        serde_json::json!({"a": {"netns": self.ns[2 * k], "tun": self.tun[2 * k]},
                           "b": {"netns": self.ns[2 * k + 1], "tun": self.tun[2 * k + 1]}})
    }

    /// Starts the emulator with `args` and waits for its ready file (`ready`).
    fn start(&mut self, args: &[String], ready: &str) -> i32 {
        let child = Command::new(env!("CARGO_BIN_EXE_tcpdelay-link")).args(args).stderr(Stdio::inherit()).spawn().unwrap();
        let pid = child.id() as i32;
        self.emu = Some(child);
        let t0 = Instant::now();
        while !std::path::Path::new(ready).exists() {
            assert!(t0.elapsed() < Duration::from_secs(10), "emulator never became ready");
            std::thread::sleep(Duration::from_millis(10));
        }
        pid
    }

    /// SIGTERM; the exit status must be 0. Returns the counters file's JSON.
    fn stop(&mut self, pid: i32, counters: &str) -> serde_json::Value {
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let st = self.emu.as_mut().unwrap().wait().unwrap();
        self.emu = None;
        assert_eq!(st.code(), Some(0));
        serde_json::from_str(&std::fs::read_to_string(counters).unwrap()).unwrap()
    }

    /// UDP sockets at link k's two ends (port 7000).
    fn sockets(&self, k: usize) -> (UdpSocket, UdpSocket) {
        (socket_in(&self.ns[2 * k], &format!("10.199.{k}.1:7000")), socket_in(&self.ns[2 * k + 1], &format!("10.199.{k}.2:7000")))
    }
}

fn socket_in(ns: &str, addr: &str) -> UdpSocket {
    let home = File::open("/proc/thread-self/ns/net").unwrap();
    let target = File::open(format!("/var/run/netns/{ns}")).unwrap();
    assert_eq!(unsafe { libc::setns(target.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
    let s = UdpSocket::bind(addr);
    assert_eq!(unsafe { libc::setns(home.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
    s.unwrap()
}

/// What `one_way` saw: each received datagram's (sequence number, one-way delay ns), and how
/// late each of the sender's sleeps ended (ns): how punctually this machine wakes a thread
/// while the emulator works.
struct Probe {
    got: Vec<(u64, u64)>,
    overshoot: Vec<u64>,
}

impl Probe {
    fn delays(&self) -> Vec<u64> {
        let mut d: Vec<u64> = self.got.iter().map(|x| x.1).collect();
        d.sort();
        d
    }
}

/// Sends `n` datagrams `gap` apart, each `size` bytes (at least 16: send time, sequence number).
fn one_way(tx: &UdpSocket, rx: &UdpSocket, to: &str, n: u64, gap: Duration, size: usize) -> Probe {
    rx.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let rx = rx.try_clone().unwrap();
    let reader = std::thread::spawn(move || {
        let mut d = Vec::new();
        let mut buf = [0u8; 2048];
        while let Ok(k) = rx.recv(&mut buf) {
            let now = mono_ns();
            if k >= 16 {
                let sent = u64::from_ne_bytes(buf[..8].try_into().unwrap());
                d.push((u64::from_ne_bytes(buf[8..16].try_into().unwrap()), now - sent));
            }
        }
        d
    });
    let mut overshoot = Vec::with_capacity(n as usize);
    let mut msg = vec![0u8; size.max(16)];
    for i in 0..n {
        msg[8..16].copy_from_slice(&i.to_ne_bytes());
        msg[..8].copy_from_slice(&mono_ns().to_ne_bytes());
        tx.send_to(&msg, to).unwrap();
        if gap > Duration::ZERO {
            let t = mono_ns();
            std::thread::sleep(gap);
            overshoot.push((mono_ns() - t).saturating_sub(gap.as_nanos() as u64));
        }
    }
    Probe { got: reader.join().unwrap(), overshoot }
}

fn median_overshoot(probes: &[&Probe]) -> u64 {
    let mut over: Vec<u64> = probes.iter().flat_map(|p| p.overshoot.iter().copied()).collect();
    over.sort();
    over[over.len() / 2]
}

/// The checks of one link configured as `--ab-delay-s 0.02 --ba-delay-s 0.01
/// --ab-loss-bernoulli 0.2 --seed 5` with an a->b pcap: 300 datagrams a->b, 50 b->a.
/// `counters` is that link's part of the counters (`a_to_b`, `b_to_a`). Returns the
/// sequence numbers lost a->b.
fn check_delay_loss_counters_pcap(test: &str, ab: &Probe, ba: &Probe, counters: &serde_json::Value, pcap: &str) -> Vec<u64> {
    let wake_late = median_overshoot(&[ab, ba]);
    eprintln!("{test}: while measuring, a 2 ms sleep ended {} us late (median)", wake_late / 1000);
    // Loss: Binomial(300, 0.2) lies in [35, 85] with probability > 0.9999.
    let lost = 300 - ab.got.len();
    assert!((35..=85).contains(&lost), "a->b lost {lost} of 300 at p = 0.2");
    assert_eq!(ba.got.len(), 50, "b->a has no loss configured");
    // Delay: never early; median within 1 ms of the setting, plus twice how late
    // this machine woke a sleeping thread meanwhile (tens of µs on a calm machine;
    // milliseconds when the host starves the VM, which no emulator can beat).
    let late_ok = 1_000_000 + 2 * wake_late;
    let (dab, dba) = (ab.delays(), ba.delays());
    assert!(dab[0] >= 20_000_000 && dba[0] >= 10_000_000, "a packet arrived early");
    let (mab, mba) = (dab[dab.len() / 2], dba[dba.len() / 2]);
    eprintln!("{test}: one-way delay medians a->b {} us (20 ms set), b->a {} us (10 ms set); lost {lost}/300", mab / 1000, mba / 1000);
    assert!(mab < 20_000_000 + late_ok, "a->b median one-way delay {} us", mab / 1000);
    assert!(mba < 10_000_000 + late_ok, "b->a median one-way delay {} us", mba / 1000);

    let a = &counters["a_to_b"];
    assert_eq!(a["packets_in"].as_u64().unwrap(), 300, "only the test's datagrams crossed a->b");
    assert_eq!(a["drops"]["loss"].as_u64().unwrap() as usize, lost, "loss drops vs datagrams missing");
    assert!(a["packets_out"].as_u64().unwrap() as usize >= ab.got.len());
    for d in ["a_to_b", "b_to_a"] {
        let x = &counters[d];
        let total = x["packets_out"].as_u64().unwrap() + x["drops"]["total"].as_u64().unwrap() + x["in_flight_packets"].as_u64().unwrap();
        assert_eq!(x["packets_in"].as_u64().unwrap(), total, "{d}: packets not accounted for");
    }

    // The pcap holds every delivered a->b packet.
    let b = std::fs::read(pcap).unwrap();
    assert_eq!(u32::from_ne_bytes(b[0..4].try_into().unwrap()), 0xA1B2_3C4D);
    assert_eq!(u32::from_ne_bytes(b[20..24].try_into().unwrap()), 101);
    let (mut off, mut n) = (24usize, 0u64);
    while off + 16 <= b.len() {
        let cap = u32::from_ne_bytes(b[off + 8..off + 12].try_into().unwrap()) as usize;
        let version = b[off + 16] >> 4;
        assert!(version == 4 || version == 6, "record {n} is not an IP packet");
        off += 16 + cap;
        n += 1;
    }
    assert_eq!(off, b.len(), "truncated pcap");
    assert_eq!(n, a["packets_out"].as_u64().unwrap());
    let got: std::collections::HashSet<u64> = ab.got.iter().map(|x| x.0).collect();
    (0..300).filter(|i| !got.contains(i)).collect()
}

fn the_link_settings(pcap: &str) -> serde_json::Value {
    serde_json::json!({"seed": 5, "a_to_b": {"delay_s": 0.02, "loss": {"model": "bernoulli", "p": 0.2}, "pcap_file": pcap},
                       "b_to_a": {"delay_s": 0.01}})
}

/// Runs the link of `check_delay_loss_counters_pcap` alone (flags) or as the middle one of
/// three links in one process (a file with `links`; the others carry traffic meanwhile).
/// Returns the sequence numbers lost a->b.
fn delay_loss_counters_pcap(many: bool) -> Option<Vec<u64>> {
    let test = if many { "e2e (one of three links)" } else { "e2e (a lone link)" };
    if !can_run(test) {
        return None;
    }
    let tag = if many { "m" } else { "s" };
    let mut net = Net::new(tag, if many { 3 } else { 1 });
    let (ready, counters, pcap) = (net.path("ready"), net.path("counters.json"), net.path("ab.pcap"));
    let k = if many { 1 } else { 0 };
    let args: Vec<String> = if many {
        let mut mid = the_link_settings(&pcap);
        let ends = net.ends(1);
        mid["name"] = serde_json::json!("mid");
        mid["a"] = ends["a"].clone();
        mid["b"] = ends["b"].clone();
        let mut first = net.ends(0);
        first["name"] = serde_json::json!("first");
        first["a_to_b"] = serde_json::json!({"delay_s": 0.005, "loss": {"model": "bernoulli", "p": 0.5}});
        let mut last = net.ends(2);
        last["name"] = serde_json::json!("last");
        last["a_to_b"] = serde_json::json!({"delay_s": 0.03, "rate_bps": 1e6, "queue_packets": 5});
        let cfg = serde_json::json!({"ready_file": ready, "counters_file": counters, "links": [first, mid, last]});
        let file = net.path("links.json");
        std::fs::write(&file, cfg.to_string()).unwrap();
        vec!["--config".into(), file]
    } else {
        ["--a-netns", &net.ns[0], "--a-tun", &net.tun[0], "--b-netns", &net.ns[1], "--b-tun", &net.tun[1]]
            .iter()
            .map(|s| s.to_string())
            .chain(["--ab-delay-s", "0.02", "--ba-delay-s", "0.01", "--ab-loss-bernoulli", "0.2", "--seed", "5"].map(String::from))
            .chain(["--ready-file".into(), ready.clone(), "--counters-file".into(), counters.clone(), "--ab-pcap-file".into(), pcap.clone()])
            .collect()
    };
    let pid = net.start(&args, &ready);
    let (sa, sb) = net.sockets(k);
    // The other links carry traffic at the same time (their own threads).
    let others: Vec<_> = if many {
        [0usize, 2]
            .iter()
            .map(|&o| {
                let (ta, tb) = net.sockets(o);
                std::thread::spawn(move || one_way(&ta, &tb, &format!("10.199.{o}.2:7000"), 200, Duration::from_millis(3), 1000))
            })
            .collect()
    } else {
        Vec::new()
    };
    let steal0 = steal_ticks();
    let ab = one_way(&sa, &sb, &format!("10.199.{k}.2:7000"), 300, Duration::from_millis(2), 16);
    let ba = one_way(&sb, &sa, &format!("10.199.{k}.1:7000"), 50, Duration::from_millis(2), 16);
    eprintln!("{test}: steal {} ticks while measuring", steal_ticks() - steal0);
    let other: Vec<Probe> = others.into_iter().map(|h| h.join().unwrap()).collect();
    let c = net.stop(pid, &counters);
    eprintln!("{test}: emulator timing {}", c["timing"]);
    assert!(c["timing"]["timer_slack_ns"].as_u64().unwrap() <= 1, "the emulator runs without timer slack (SCHED_FIFO reads 0)");
    let mine = if many { &c["links"]["mid"] } else { &c };
    let lost = check_delay_loss_counters_pcap(test, &ab, &ba, mine, &pcap);
    if many {
        // Counters per link: each link counted its own packets and drops only.
        let names: Vec<&String> = c["links"].as_object().unwrap().keys().collect();
        assert_eq!(names.len(), 3, "{names:?}");
        let first = &c["links"]["first"]["a_to_b"];
        assert_eq!(first["packets_in"].as_u64().unwrap(), 200);
        assert_eq!(first["drops"]["loss"].as_u64().unwrap() as usize, 200 - other[0].got.len());
        assert_eq!(first["drops"]["queue"].as_u64().unwrap(), 0);
        let last = &c["links"]["last"]["a_to_b"];
        assert_eq!(last["packets_in"].as_u64().unwrap(), 200);
        assert_eq!(last["drops"]["loss"].as_u64().unwrap(), 0);
        assert_eq!(last["packets_out"].as_u64().unwrap() as usize, other[1].got.len());
        // 1028-byte packets every 3 ms into 1 Mb/s (8.2 ms each): the 5-packet queue overflows
        assert!(last["drops"]["queue"].as_u64().unwrap() > 0 && last["peak_queue_packets"].as_u64().unwrap() == 5);
        assert_eq!(mine["seed"].as_u64().unwrap(), 5);
        assert!(c.get("a_to_b").is_none(), "named links are counted under links only");
    }
    Some(lost)
}

#[test]
fn a_link_alone_and_the_same_link_among_others_lose_the_same_packets() {
    // Each link's fate decisions come from its own seed's streams: the same link, alone or one
    // of three in one process, drops exactly the same datagrams of the same sequence.
    let Some(alone) = delay_loss_counters_pcap(false) else { return };
    let Some(among) = delay_loss_counters_pcap(true) else { return };
    assert_eq!(alone, among, "the same seed loses the same datagrams");
}

#[test]
fn a_burst_on_one_link_does_not_hold_back_another() {
    if !can_run("e2e burst") {
        return;
    }
    let mut net = Net::new("b", 2);
    let (ready, counters) = (net.path("ready"), net.path("counters.json"));
    // Link "burst": 1 Mb/s with room for the whole burst; link "quiet": 10 ms, no bottleneck.
    const BURST: u64 = 300;
    const SIZE: usize = 1000; // UDP payload; 1028 bytes on the link
    let mut burst = net.ends(0);
    burst["name"] = serde_json::json!("burst");
    burst["a_to_b"] = serde_json::json!({"rate_bps": 1e6, "queue_packets": 1000});
    let mut quiet = net.ends(1);
    quiet["name"] = serde_json::json!("quiet");
    quiet["a_to_b"] = serde_json::json!({"delay_s": 0.01});
    let file = net.path("links.json");
    std::fs::write(&file, serde_json::json!({"ready_file": ready, "counters_file": counters, "links": [burst, quiet]}).to_string()).unwrap();
    let pid = net.start(&["--config".to_string(), file], &ready);
    let (ba, bb) = net.sockets(0);
    let (qa, qb) = net.sockets(1);
    // The burst's backlog drains for BURST * 1028 * 8 / 1e6 s = 2.47 s (the configuration's
    // numbers). Were the quiet link's packets queued behind it, they would wait for part of
    // that; a quarter of it is the tolerance, far above any scheduling delay.
    let drain_ns = BURST * (SIZE as u64 + 28) * 8 * 1_000; // ns at 1 Mb/s
    let burster = std::thread::spawn(move || one_way(&ba, &bb, "10.199.0.2:7000", BURST, Duration::ZERO, SIZE));
    std::thread::sleep(Duration::from_millis(50));
    // Probes through the quiet link during the first half of the drain.
    let n = (drain_ns / 2 / 10_000_000).max(10);
    let quiet_probe = one_way(&qa, &qb, "10.199.1.2:7000", n, Duration::from_millis(10), 16);
    let burst_probe = burster.join().unwrap();
    let c = net.stop(pid, &counters);
    let q = quiet_probe.delays();
    let b = burst_probe.delays();
    eprintln!(
        "e2e burst: quiet link one-way p50 {} us, max {} us (10 ms set); burst's last packet {} ms (drain {} ms)",
        q[q.len() / 2] / 1000, q[q.len() - 1] / 1000, b[b.len() - 1] / 1_000_000, drain_ns / 1_000_000
    );
    assert_eq!(q.len() as u64, n, "the quiet link lost nothing");
    assert_eq!(b.len() as u64, BURST, "the burst fit its queue");
    // The burst was held by its own bottleneck: its last packet left after (nearly) the drain.
    assert!(b[b.len() - 1] >= drain_ns * 9 / 10, "burst last packet after {} ms", b[b.len() - 1] / 1_000_000);
    assert!(q[0] >= 10_000_000, "a quiet packet arrived early");
    assert!(q[q.len() - 1] < 10_000_000 + drain_ns / 4, "a quiet packet waited {} ms behind the burst", q[q.len() - 1] / 1_000_000);
    let wake_late = median_overshoot(&[&quiet_probe]);
    assert!(q[q.len() / 2] < 10_000_000 + 1_000_000 + 2 * wake_late, "quiet median {} us", q[q.len() / 2] / 1000);
    assert_eq!(c["links"]["burst"]["a_to_b"]["drops"]["total"].as_u64().unwrap(), 0);
    assert!(c["links"]["burst"]["a_to_b"]["peak_queue_packets"].as_u64().unwrap() > 100);
    assert_eq!(c["links"]["quiet"]["a_to_b"]["peak_queue_packets"].as_u64().unwrap(), 0);
}

/// Runs `f` with this thread in namespace `ns`, then comes back.
fn in_ns<T>(ns: &str, f: impl FnOnce() -> T) -> T {
    let home = File::open("/proc/thread-self/ns/net").unwrap();
    let target = File::open(format!("/var/run/netns/{ns}")).unwrap();
    assert_eq!(unsafe { libc::setns(target.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
    let out = f();
    assert_eq!(unsafe { libc::setns(home.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
    out
}

/// Whether device `dev` in namespace `ns` has TCP segmentation offload on (the ethtool
/// ioctl ETHTOOL_GTSO, which `ethtool -k` reads as tcp-segmentation-offload).
fn tso_on(ns: &str, dev: &str) -> bool {
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    #[repr(C)]
    struct IfReq {
        name: [u8; 16],
        data: *mut EthtoolValue,
        _pad: [u8; 16],
    }
    in_ns(ns, || {
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
        assert!(fd >= 0);
        let mut v = EthtoolValue { cmd: 0x1e, data: 0 }; // ETHTOOL_GTSO
        let mut req = IfReq { name: [0; 16], data: &mut v, _pad: [0; 16] };
        req.name[..dev.len()].copy_from_slice(dev.as_bytes());
        let rc = unsafe { libc::ioctl(fd, 0x8946, &mut req) }; // SIOCETHTOOL
        unsafe { libc::close(fd) };
        assert_eq!(rc, 0, "SIOCETHTOOL on {dev}");
        v.data != 0
    })
}

#[test]
fn tcp_through_a_delay_only_link_passes_super_packets_whole_and_counts_segments() {
    if !can_run("e2e tcp") {
        return;
    }
    let mut net = Net::new("t", 2);
    let (ready, counters) = (net.path("ready"), net.path("counters.json"));
    // Link "plain": 2 ms each way, nothing else (super-packets pass whole); link "lossy": the
    // same with a loss draw per packet (one packet per read, offloads left off).
    let mut plain = net.ends(0);
    plain["name"] = serde_json::json!("plain");
    plain["a_to_b"] = serde_json::json!({"delay_s": 0.002});
    plain["b_to_a"] = serde_json::json!({"delay_s": 0.002});
    let mut lossy = net.ends(1);
    lossy["name"] = serde_json::json!("lossy");
    lossy["a_to_b"] = serde_json::json!({"delay_s": 0.002, "loss": {"model": "bernoulli", "p": 0.001}});
    let file = net.path("links.json");
    std::fs::write(&file, serde_json::json!({"ready_file": ready, "counters_file": counters, "links": [plain, lossy]}).to_string()).unwrap();
    let pid = net.start(&["--config".to_string(), file], &ready);
    assert!(tso_on(&net.ns[0], &net.tun[0]) && tso_on(&net.ns[1], &net.tun[1]), "the delay-only link's TUNs offload");
    assert!(!tso_on(&net.ns[2], &net.tun[2]) && !tso_on(&net.ns[3], &net.tun[3]), "the lossy link's TUNs do not");

    const BYTES: usize = 32 << 20;
    let listener = in_ns(&net.ns[1], || TcpListener::bind("10.199.0.2:7001").unwrap());
    let reader = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 1 << 20];
        let (mut got, mut bad) = (0usize, 0usize);
        loop {
            let n = c.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            bad += buf[..n].iter().enumerate().filter(|&(i, &b)| b != ((got + i) % 251) as u8).count();
            got += n;
        }
        (got, bad)
    });
    let mut tx = in_ns(&net.ns[0], || TcpStream::connect("10.199.0.2:7001").unwrap());
    let data: Vec<u8> = (0..BYTES).map(|i| (i % 251) as u8).collect();
    tx.write_all(&data).unwrap();
    tx.shutdown(std::net::Shutdown::Write).unwrap();
    let (got, bad) = reader.join().unwrap();
    drop(tx);
    std::thread::sleep(Duration::from_millis(50)); // the last ACKs and FINs cross
    let c = net.stop(pid, &counters);
    assert_eq!(got, BYTES, "every byte arrived");
    assert_eq!(bad, 0, "and intact");
    let ab = &c["links"]["plain"]["a_to_b"];
    eprintln!("e2e tcp: plain a_to_b {ab}");
    let n = |k: &str| ab[k].as_u64().unwrap();
    // Counted in segments: at least one per MSS of payload (at most 1460 bytes at MTU 1500),
    // each with its 40 bytes of IP and TCP headers or more.
    let segments = BYTES as u64 / 1460;
    assert!(n("packets_out") >= segments, "{} packets out for {segments} segments of payload", n("packets_out"));
    assert!(n("bytes_out") >= BYTES as u64 + 40 * segments, "{} bytes out", n("bytes_out"));
    assert_eq!(n("packets_in"), n("packets_out") + ab["drops"]["total"].as_u64().unwrap() + n("in_flight_packets"));
}
