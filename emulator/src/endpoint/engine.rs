//! The endpoint's loop: commands in (stdin: a Unix SOCK_SEQPACKET socket whose messages are
//! one JSON object each, media sockets attached with SCM_RIGHTS; or a pipe of JSON lines,
//! without sockets), events out (stdout: JSON lines), flows served in between.
//!
//! Timekeeping is the emulator's (`sys::Epoll` with epoll_pwait2's nanosecond timeout and
//! `wait::Waiter`'s rationed busy-wait): the loop sleeps until shortly before the earliest
//! due packet of any sender and sends every packet due by then (a UDP flow's in one
//! `sendmmsg`). UDP is read with `recvmmsg` and each datagram's kernel receive time
//! (`SO_TIMESTAMPING`, RX_SOFTWARE|SOFTWARE; CLOCK_REALTIME) is moved onto CLOCK_MONOTONIC with
//! an offset measured every second (`Clocks`).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::io::Write;
use std::net::IpAddr;
use std::os::fd::RawFd;

use serde_json::{json, Value};

use super::records::{summary_us, RawFile, FLUSH_NS};
use super::wire::{self, Msg};
use crate::sys;
use crate::wait::{Plan, Waiter};

const TOKEN_CMD: u64 = u64::MAX - 1;
const TOKEN_SIGNAL: u64 = u64::MAX - 2;
const MAX_FDS: usize = 64;
const UDP_BATCH: usize = 32;
const UDP_BUF: usize = 65536;
const TCP_BUF: usize = 256 * 1024;
const CMSG_BYTES: usize = 128;
const DRAIN_POLL_NS: u64 = 20_000_000;
const SILENCE_FACTOR_NUM: u64 = 3; // 1.5 = 3/2 packet intervals of silence (sender.py)
const MAX_PARTIAL_PACKETS: usize = 4096;
const SOF_FLAGS: libc::c_int = (libc::SOF_TIMESTAMPING_RX_SOFTWARE | libc::SOF_TIMESTAMPING_SOFTWARE) as libc::c_int;

/// Bad input: the one line the caller gets before exit status 2.
pub struct BadInput(pub String);

pub struct Options {
    pub spin_ns: u64,
    pub window_ns: u64,
    pub budget_ns: u64,
    /// Whether it runs SCHED_RR (said in its ready line).
    pub realtime: bool,
}

/// CLOCK_REALTIME − CLOCK_MONOTONIC, measured as the reading of the real-time clock between
/// two monotonic readings closest together out of a few (the kernel's software receive stamps
/// are CLOCK_REALTIME; records are CLOCK_MONOTONIC).
struct Clocks {
    offset_ns: i128,
    measured_ns: u64,
}

impl Clocks {
    fn measure() -> Clocks {
        let mut best = (u64::MAX, 0i128);
        for _ in 0..5 {
            let a = sys::mono_ns();
            let r = sys::realtime_ns();
            let b = sys::mono_ns();
            if b - a < best.0 {
                best = (b - a, r as i128 - ((a as i128 + b as i128) / 2));
            }
        }
        Clocks { offset_ns: best.1, measured_ns: sys::mono_ns() }
    }

    fn to_mono(&self, real_ns: u64) -> u64 {
        (real_ns as i128 - self.offset_ns).max(0) as u64
    }
}

// ------------------------------------------------------------------------------- senders

struct Entry {
    at_ns: u64,
    rtp_ts: u32,
    size: u32,
    frame_id: i64,
    frame_type: u8,
    frame_last: bool,
}

/// A schedule file (Python's `tcpdelay.native.schedule`): 32-byte little-endian rows
/// at_ns u64, rtp_ts u32, size_bytes u32, frame_id i64, frame_type u8, frame_last u8, pad 6.
fn read_schedule(path: &str) -> Result<Vec<Entry>, String> {
    let data = std::fs::read(path).map_err(|e| format!("schedule {path}: {e}"))?;
    if data.len() % 32 != 0 {
        return Err(format!("schedule {path}: {} B is not a whole number of 32-byte rows", data.len()));
    }
    let mut out = Vec::with_capacity(data.len() / 32);
    let mut last = 0;
    for r in data.chunks_exact(32) {
        let e = Entry {
            at_ns: u64::from_le_bytes(r[0..8].try_into().unwrap()),
            rtp_ts: u32::from_le_bytes(r[8..12].try_into().unwrap()),
            size: u32::from_le_bytes(r[12..16].try_into().unwrap()),
            frame_id: i64::from_le_bytes(r[16..24].try_into().unwrap()),
            frame_type: r[24],
            frame_last: r[25] != 0,
        };
        if e.at_ns < last {
            return Err(format!("schedule {path}: row {} goes back in time", out.len()));
        }
        if (e.size as usize) < wire::MIN_MEDIA_RTP_BYTES || e.size as usize > wire::RFC4571_MAX_BYTES {
            return Err(format!("schedule {path}: row {}: size {} B outside [32, 65535]", out.len(), e.size));
        }
        last = e.at_ns;
        out.push(e);
    }
    Ok(out)
}

struct SConn {
    fd: RawFd,
    out: Vec<u8>, // TCP: framed bytes the socket has not taken yet
    out_at: usize,
    dgrams: VecDeque<Vec<u8>>, // UDP
    dgram_bytes: usize,
    last_tx: u64,
    blocked: bool, // registered for EPOLLOUT
}

impl SConn {
    fn queued(&self) -> usize {
        self.out.len() - self.out_at + self.dgram_bytes
    }
    fn idle(&self) -> bool {
        self.queued() == 0
    }
}

struct Sender {
    key: String,
    flow_id: u32,
    tcp: bool,
    conns: Vec<SConn>,
    sched: Vec<Entry>,
    next: usize,
    start_ns: u64,
    split: usize,
    keepalive: bool,
    interval_ns: u64,
    ka_rtt_ns: u64,
    max_queue_bytes: usize,
    drain_timeout_ns: u64,
    drain_deadline: Option<u64>,
    rr: usize,
    rtp_seq: u16,
    seq: u64,
    last_media_ns: u64,
    rec: RawFile,
    lateness_ns: Vec<u64>,
    packets: u64,
    queue_full: u64,
    keepalives: u64,
    rtp_packets: u64,
    wire_bytes: u64,
    per_conn: Vec<u64>,
    status: Option<&'static str>,
    error: Option<String>,
}

// ------------------------------------------------------------------------------- receivers

struct RConn {
    fd: RawFd,
    parser: wire::Parser,
}

struct Receiver {
    key: String,
    flow_id: u32,
    udp: Option<RawFd>,
    peer: IpAddr,
    max_msg: usize,
    conns: HashMap<u16, RConn>,
    partial: HashMap<u64, ([u64; 4], u64, u64)>, // seq -> (pieces seen, bytes, send_ns)
    done: HashSet<u64>,
    max_done: i64,
    rec: RawFile,
    lags_ns: Vec<u64>,
    received: u64,
    received_bytes: u64,
    rtp_packets: u64,
    keepalives: u64,
    duplicates: u64,
    incomplete: u64,
    foreign: u64,
    bytes_in: u64,
    first_ns: Option<u64>,
    last_ns: u64,
    got_media: bool,
    failed: bool,
    kernel_stamps: u64,
    /// Media silence after which an "idle" event is sent (again every such period; 0: never).
    idle_ns: u64,
    last_rx_ns: u64,
    idle_said_ns: u64,
}

enum Flow {
    Send(Sender),
    Recv(Receiver),
}

pub struct Engine {
    opts: Options,
    ep: sys::Epoll,
    flows: HashMap<u32, Flow>,
    keys: HashMap<String, u32>,
    next_slot: u32,
    clocks: Clocks,
    out: Vec<u8>,
    seqpacket: bool,
    stdin_buf: Vec<u8>,
    stdin_open: bool,
    sigfd: RawFd,
    udp_bufs: Vec<Vec<u8>>,
    cmsg_bufs: Vec<[u8; CMSG_BYTES]>,
    tcp_buf: Vec<u8>,
    scratch: Vec<u8>,
    msgs: Vec<Msg>,
    next_flush: u64,
    /// Senders by when they are next due (entries whose time is not `due_of`'s are stale): a
    /// wake-up serves only the senders due, not every flow.
    dues: BinaryHeap<Reverse<(u64, u32)>>,
    due_of: HashMap<u32, u64>,
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn strerror(e: i32) -> String {
    std::io::Error::from_raw_os_error(e).to_string()
}

fn epoll_ctl(ep: &sys::Epoll, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> std::io::Result<()> {
    ep.ctl(op, fd, events, token)
}

fn close(fd: RawFd) {
    unsafe { libc::close(fd) };
}

fn token(slot: u32, conn: u16) -> u64 {
    ((slot as u64) << 16) | conn as u64
}

fn set_timestamping(fd: RawFd) {
    let v = SOF_FLAGS;
    unsafe {
        libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPING, &v as *const _ as *const libc::c_void,
                         std::mem::size_of::<libc::c_int>() as libc::socklen_t);
    }
}

/// The kernel's software receive stamp (CLOCK_REALTIME ns) in a message's control data.
unsafe fn rx_stamp(mh: &libc::msghdr) -> Option<u64> {
    let mut c = libc::CMSG_FIRSTHDR(mh);
    while !c.is_null() {
        if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPING {
            let ts = libc::CMSG_DATA(c) as *const libc::timespec;
            let t = std::ptr::read_unaligned(ts);
            if t.tv_sec != 0 || t.tv_nsec != 0 {
                return Some(t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64);
            }
        }
        c = libc::CMSG_NXTHDR(mh, c);
    }
    None
}

fn sockaddr_ip(sa: &libc::sockaddr_storage) -> Option<IpAddr> {
    unsafe {
        match sa.ss_family as libc::c_int {
            libc::AF_INET => {
                let a = &*(sa as *const _ as *const libc::sockaddr_in);
                Some(IpAddr::from(u32::from_be(a.sin_addr.s_addr).to_be_bytes()))
            }
            libc::AF_INET6 => {
                let a = &*(sa as *const _ as *const libc::sockaddr_in6);
                Some(IpAddr::from(a.sin6_addr.s6_addr))
            }
            _ => None,
        }
    }
}

fn tcp_rtt_ns(fd: RawFd) -> u64 {
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let r = unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, &mut info as *mut _ as *mut libc::c_void, &mut len) };
    if r != 0 { 0 } else { info.tcpi_rtt as u64 * 1000 }
}

/// Bytes the kernel holds that it has not sent yet (SIOCOUTQNSD).
fn unsent_bytes(fd: RawFd) -> i64 {
    let mut n: libc::c_int = 0;
    if unsafe { libc::ioctl(fd, 0x894B, &mut n) } != 0 { 0 } else { n as i64 }
}

fn so_error(fd: RawFd) -> i32 {
    let mut e: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_ERROR, &mut e as *mut _ as *mut libc::c_void, &mut len) };
    e
}

fn get_str(v: &Value, k: &str) -> Result<String, BadInput> {
    v.get(k).and_then(Value::as_str).map(str::to_owned).ok_or_else(|| BadInput(format!("command {}: '{k}' must be a string", v)))
}

fn get_u64(v: &Value, k: &str) -> Result<u64, BadInput> {
    v.get(k).and_then(Value::as_u64).ok_or_else(|| BadInput(format!("command {}: '{k}' must be a non-negative integer", cut(v))))
}

fn get_bool(v: &Value, k: &str) -> Result<bool, BadInput> {
    v.get(k).and_then(Value::as_bool).ok_or_else(|| BadInput(format!("command {}: '{k}' must be true or false", cut(v))))
}

fn cut(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 200 { format!("{}...", &s[..200]) } else { s }
}

impl Engine {
    pub fn new(opts: Options) -> Result<Engine, BadInput> {
        let ep = sys::Epoll::new().map_err(|e| BadInput(format!("epoll: {e}")))?;
        let sigfd = sys::signal_fd().map_err(|e| BadInput(format!("signalfd: {e}")))?;
        ep.add(sigfd, TOKEN_SIGNAL).map_err(|e| BadInput(format!("epoll: {e}")))?;
        // stdin: a Unix socket (commands with sockets) or a pipe of lines
        let mut ty: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        let is_sock = unsafe { libc::getsockopt(0, libc::SOL_SOCKET, libc::SO_TYPE, &mut ty as *mut _ as *mut libc::c_void, &mut len) } == 0;
        if is_sock && ty != libc::SOCK_SEQPACKET {
            return Err(BadInput("stdin is a socket but not SOCK_SEQPACKET (one command per message)".into()));
        }
        if let Err(e) = ep.add(0, TOKEN_CMD) {
            return Err(BadInput(format!("stdin cannot be waited on (a pipe or a Unix socket is needed): {e}")));
        }
        Ok(Engine {
            opts, ep, flows: HashMap::new(), keys: HashMap::new(), next_slot: 1, clocks: Clocks::measure(),
            out: Vec::new(), seqpacket: is_sock, stdin_buf: Vec::new(), stdin_open: true, sigfd,
            udp_bufs: (0..UDP_BATCH).map(|_| vec![0u8; UDP_BUF]).collect(),
            cmsg_bufs: vec![[0u8; CMSG_BYTES]; UDP_BATCH],
            tcp_buf: vec![0u8; TCP_BUF], scratch: Vec::new(), msgs: Vec::new(), next_flush: 0,
            dues: BinaryHeap::new(), due_of: HashMap::new(),
        })
    }

    fn event(&mut self, v: Value) {
        self.out.extend_from_slice(v.to_string().as_bytes());
        self.out.push(b'\n');
    }

    fn write_events(&mut self) {
        if self.out.is_empty() {
            return;
        }
        let mut so = std::io::stdout().lock();
        let _ = so.write_all(&self.out);
        let _ = so.flush();
        self.out.clear();
    }

    /// Runs until stdin closes and every flow has ended, or a signal; Err: bad input.
    pub fn run(&mut self) -> Result<i32, BadInput> {
        let mut waiter = Waiter::new(self.opts.spin_ns, self.opts.window_ns, self.opts.budget_ns);
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 64];
        self.event(json!({"event": "ready", "pid": std::process::id(), "realtime": self.opts.realtime}));
        self.write_events();
        loop {
            let now = sys::mono_ns();
            if now >= self.clocks.measured_ns + 1_000_000_000 {
                self.clocks = Clocks::measure();
            }
            let mut next = self.service_senders(now);
            if now >= self.next_flush {
                self.flush_all();
                self.say_idle(now);
                self.next_flush = now + FLUSH_NS;
            }
            next = next.min(self.next_flush);
            self.write_events();
            if !self.stdin_open && self.flows.is_empty() {
                return Ok(0);
            }
            let n = match waiter.plan(sys::mono_ns(), Some(next)) {
                Plan::Deliver => continue,
                Plan::Spin { until_ns } => {
                    let mut n = 0;
                    while sys::mono_ns() < until_ns {
                        n = self.ep.wait(&mut evs, Some(0)).map_err(|e| BadInput(format!("epoll: {e}")))?;
                        if n > 0 {
                            break;
                        }
                        std::hint::spin_loop();
                    }
                    n
                }
                Plan::Sleep { timeout_ns } => self.ep.wait(&mut evs, timeout_ns).map_err(|e| BadInput(format!("epoll: {e}")))?,
            };
            for ev in &evs[..n] {
                match ev.u64 {
                    TOKEN_CMD => self.read_commands()?,
                    TOKEN_SIGNAL => {
                        // SIGINT is the caller's to handle (it ends its flows with "finish");
                        // SIGTERM (e.g. PR_SET_PDEATHSIG: the caller is gone) and SIGHUP end it
                        if let Some(sig) = sys::read_signal(self.sigfd).filter(|&s| s != libc::SIGINT) {
                            self.flush_all();
                            self.write_events();
                            return Ok(128 + sig);
                        }
                    }
                    t => self.ready((t >> 16) as u32, (t & 0xFFFF) as u16, ev.events),
                }
            }
        }
    }

    /// An "idle" event for every receiving flow whose media has been silent for its idle
    /// period (the Python side ends the run if its control connection was silent too).
    fn say_idle(&mut self, now: u64) {
        let mut idle = Vec::new();
        for f in self.flows.values_mut() {
            if let Flow::Recv(r) = f {
                if r.idle_ns > 0 && now.saturating_sub(r.last_rx_ns) > r.idle_ns && now.saturating_sub(r.idle_said_ns) > r.idle_ns {
                    r.idle_said_ns = now;
                    idle.push(json!({"event": "idle", "key": r.key, "silent_s": (now - r.last_rx_ns) as f64 / 1e9}));
                }
            }
        }
        for ev in idle {
            self.event(ev);
        }
    }

    fn flush_all(&mut self) {
        for f in self.flows.values_mut() {
            let _ = match f {
                Flow::Send(s) => s.rec.flush(),
                Flow::Recv(r) => r.rec.flush(),
            };
        }
    }

    // ---------------------------------------------------------------------------- commands

    fn read_commands(&mut self) -> Result<(), BadInput> {
        if self.seqpacket {
            loop {
                let mut buf = vec![0u8; 65536];
                let mut cbuf = [0u8; 512];
                let mut iov = libc::iovec { iov_base: buf.as_mut_ptr() as *mut libc::c_void, iov_len: buf.len() };
                let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
                mh.msg_iov = &mut iov;
                mh.msg_iovlen = 1;
                mh.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
                mh.msg_controllen = cbuf.len() as _;
                let n = unsafe { libc::recvmsg(0, &mut mh, libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC) };
                if n < 0 {
                    let e = errno();
                    if e == libc::EAGAIN || e == libc::EINTR {
                        return Ok(());
                    }
                    return Err(BadInput(format!("reading commands: {}", strerror(e))));
                }
                let mut fds = Vec::new();
                unsafe {
                    let mut c = libc::CMSG_FIRSTHDR(&mh);
                    while !c.is_null() {
                        if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                            let k = ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / 4;
                            let p = libc::CMSG_DATA(c) as *const RawFd;
                            for i in 0..k {
                                fds.push(std::ptr::read_unaligned(p.add(i)));
                            }
                        }
                        c = libc::CMSG_NXTHDR(&mh, c);
                    }
                }
                if n == 0 {
                    self.stdin_closed();
                    return Ok(());
                }
                if mh.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
                    fds.iter().for_each(|&f| close(f));
                    return Err(BadInput(format!("a command longer than 64 KiB or with more than {MAX_FDS} sockets")));
                }
                let line = buf[..n as usize].to_vec();
                self.command(&line, fds)?;
            }
        } else {
            let mut buf = [0u8; 65536];
            let n = unsafe { libc::read(0, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
            if n < 0 {
                let e = errno();
                if e == libc::EAGAIN || e == libc::EINTR {
                    return Ok(());
                }
                return Err(BadInput(format!("reading commands: {}", strerror(e))));
            }
            if n == 0 {
                if !self.stdin_buf.iter().all(u8::is_ascii_whitespace) {
                    let rest = std::mem::take(&mut self.stdin_buf);
                    self.command(&rest, Vec::new())?;
                }
                self.stdin_closed();
                return Ok(());
            }
            self.stdin_buf.extend_from_slice(&buf[..n as usize]);
            while let Some(i) = self.stdin_buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.stdin_buf.drain(..=i).collect();
                self.command(&line, Vec::new())?;
            }
            Ok(())
        }
    }

    /// Stdin closed: the caller is gone or done; every flow still served ends now.
    fn stdin_closed(&mut self) {
        self.stdin_open = false;
        let _ = self.ep.ctl(libc::EPOLL_CTL_DEL, 0, 0, 0);
        let slots: Vec<u32> = self.flows.keys().copied().collect();
        for slot in slots {
            self.finish_flow(slot, Some("interrupted"));
        }
    }

    fn command(&mut self, line: &[u8], fds: Vec<RawFd>) -> Result<(), BadInput> {
        let r = self.command_inner(line, &fds);
        if r.is_err() {
            fds.iter().for_each(|&f| close(f));
        }
        r
    }

    fn command_inner(&mut self, line: &[u8], fds: &[RawFd]) -> Result<(), BadInput> {
        let text = std::str::from_utf8(line).map_err(|_| BadInput("a command that is not UTF-8".into()))?.trim();
        if text.is_empty() {
            return Ok(());
        }
        let v: Value = serde_json::from_str(text).map_err(|e| {
            let shown: String = text.chars().take(80).collect();
            BadInput(format!("a command that is not JSON ({e}): {shown:?}"))
        })?;
        let cmd = get_str(&v, "cmd")?;
        match cmd.as_str() {
            "send" => self.cmd_send(&v, fds),
            "recv" => self.cmd_recv(&v, fds),
            "conn" => self.cmd_conn(&v, fds),
            "finish" => {
                let key = get_str(&v, "key")?;
                if !fds.is_empty() {
                    return Err(BadInput("finish takes no sockets".into()));
                }
                if let Some(&slot) = self.keys.get(&key) {
                    self.finish_flow(slot, Some("interrupted"));
                }
                Ok(())
            }
            other => Err(BadInput(format!("unknown command {other:?} (send, recv, conn, finish)"))),
        }
    }

    fn new_slot(&mut self, key: &str) -> Result<u32, BadInput> {
        if self.keys.contains_key(key) {
            return Err(BadInput(format!("flow {key:?} is served already")));
        }
        if key.is_empty() || key.len() > 64 {
            return Err(BadInput("key: 1 to 64 characters".into()));
        }
        let slot = self.next_slot;
        self.next_slot += 1;
        self.keys.insert(key.to_owned(), slot);
        Ok(slot)
    }

    fn transport(v: &Value) -> Result<bool, BadInput> {
        match get_str(v, "transport")?.as_str() {
            "tcp" => Ok(true),
            "udp" => Ok(false),
            t => Err(BadInput(format!("transport {t:?}: tcpdelay-endpoint serves tcp and udp"))),
        }
    }

    fn cmd_send(&mut self, v: &Value, fds: &[RawFd]) -> Result<(), BadInput> {
        let key = get_str(v, "key")?;
        let tcp = Self::transport(v)?;
        if fds.is_empty() || (!tcp && fds.len() != 1) {
            return Err(BadInput(format!("send {key}: {} sockets attached (udp: one; tcp: one per connection)", fds.len())));
        }
        let flow_id = get_u64(v, "flow_id")?;
        let split = get_u64(v, "split")?;
        if flow_id > u32::MAX as u64 || !(1..=255).contains(&split) {
            return Err(BadInput(format!("send {key}: flow_id must fit 32 bits and split be 1..255")));
        }
        let sched = read_schedule(&get_str(v, "schedule")?).map_err(BadInput)?;
        let records = get_str(v, "records")?;
        let rec = RawFile::create(&records).map_err(|e| BadInput(format!("records {records}: {e}")))?;
        let start_ns = get_u64(v, "start_ns")?;
        let s = Sender {
            key: key.clone(), flow_id: flow_id as u32, tcp,
            conns: fds.iter().map(|&fd| SConn { fd, out: Vec::new(), out_at: 0, dgrams: VecDeque::new(), dgram_bytes: 0, last_tx: start_ns, blocked: false }).collect(),
            sched, next: 0, start_ns, split: split as usize, keepalive: get_bool(v, "keepalive")?,
            interval_ns: get_u64(v, "interval_ns")?.max(1), ka_rtt_ns: get_u64(v, "keepalive_rtt_ns")?,
            max_queue_bytes: get_u64(v, "max_queue_bytes")? as usize, drain_timeout_ns: get_u64(v, "drain_timeout_ns")?,
            drain_deadline: None, rr: 0, rtp_seq: 0, seq: 0, last_media_ns: start_ns, rec, lateness_ns: Vec::new(),
            packets: 0, queue_full: 0, keepalives: 0, rtp_packets: 0, wire_bytes: 0, per_conn: vec![0; fds.len()],
            status: None, error: None,
        };
        let slot = self.new_slot(&key)?;
        for (i, &fd) in fds.iter().enumerate() {
            unsafe { libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK) };
            epoll_ctl(&self.ep, libc::EPOLL_CTL_ADD, fd, 0, token(slot, i as u16))
                .map_err(|e| BadInput(format!("send {key}: socket {i}: {e}")))?;
        }
        self.flows.insert(slot, Flow::Send(s));
        self.schedule(slot, 0); // served at once: it works out when it is next due
        Ok(())
    }

    fn cmd_recv(&mut self, v: &Value, fds: &[RawFd]) -> Result<(), BadInput> {
        let key = get_str(v, "key")?;
        let tcp = Self::transport(v)?;
        if fds.len() != usize::from(!tcp) {
            return Err(BadInput(format!("recv {key}: {} sockets attached (udp: its socket; tcp: none, connections come with 'conn')", fds.len())));
        }
        let flow_id = get_u64(v, "flow_id")?;
        let peer: IpAddr = get_str(v, "peer")?.parse().map_err(|_| BadInput(format!("recv {key}: peer must be an IP address")))?;
        let records = get_str(v, "records")?;
        let rec = RawFile::create(&records).map_err(|e| BadInput(format!("records {records}: {e}")))?;
        let r = Receiver {
            key: key.clone(), flow_id: flow_id as u32, udp: fds.first().copied(), peer,
            max_msg: get_u64(v, "max_message_bytes")? as usize, conns: HashMap::new(), partial: HashMap::new(),
            done: HashSet::new(), max_done: -1, rec, lags_ns: Vec::new(), received: 0, received_bytes: 0, rtp_packets: 0,
            keepalives: 0, duplicates: 0, incomplete: 0, foreign: 0, bytes_in: 0, first_ns: None, last_ns: 0,
            got_media: false, failed: false, kernel_stamps: 0,
            idle_ns: v.get("idle_timeout_ns").and_then(Value::as_u64).unwrap_or(0), last_rx_ns: sys::mono_ns(), idle_said_ns: 0,
        };
        let slot = self.new_slot(&key)?;
        if let Some(fd) = r.udp {
            set_timestamping(fd);
            unsafe { libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK) };
            epoll_ctl(&self.ep, libc::EPOLL_CTL_ADD, fd, libc::EPOLLIN as u32, token(slot, 0xFFFF))
                .map_err(|e| BadInput(format!("recv {key}: {e}")))?;
        }
        self.flows.insert(slot, Flow::Recv(r));
        Ok(())
    }

    fn cmd_conn(&mut self, v: &Value, fds: &[RawFd]) -> Result<(), BadInput> {
        let key = get_str(v, "key")?;
        let index = get_u64(v, "index")?;
        if fds.len() != 1 || index >= 0xFFFF {
            return Err(BadInput(format!("conn {key}: one socket and an index below 65535")));
        }
        let rest = get_str(v, "rest_hex")?;
        if rest.len() % 2 != 0 || !rest.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(BadInput(format!("conn {key}: rest_hex is not hex")));
        }
        let rest: Vec<u8> = (0..rest.len()).step_by(2).map(|i| u8::from_str_radix(&rest[i..i + 2], 16).unwrap()).collect();
        let slot = *self.keys.get(&key).ok_or_else(|| BadInput(format!("conn: no flow {key:?}")))?;
        let fd = fds[0];
        let Some(Flow::Recv(r)) = self.flows.get_mut(&slot) else {
            return Err(BadInput(format!("conn {key}: not a receiving flow")));
        };
        if r.conns.contains_key(&(index as u16)) {
            return Err(BadInput(format!("conn {key}: connection {index} is served already")));
        }
        set_timestamping(fd);
        unsafe { libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK) };
        epoll_ctl(&self.ep, libc::EPOLL_CTL_ADD, fd, libc::EPOLLIN as u32, token(slot, index as u16))
            .map_err(|e| BadInput(format!("conn {key}: {e}")))?;
        r.conns.insert(index as u16, RConn { fd, parser: wire::Parser::new(r.max_msg, r.flow_id) });
        if !rest.is_empty() {
            let t = sys::mono_ns();
            self.feed_tcp(slot, index as u16, &rest, t, None);
        }
        Ok(())
    }

    /// Ends a flow: its records flushed, its result out, its sockets closed (Python holds its
    /// own descriptors of them and closes or shuts them down itself).
    fn finish_flow(&mut self, slot: u32, status: Option<&'static str>) {
        let Some(flow) = self.flows.remove(&slot) else { return };
        self.due_of.remove(&slot);
        let now = sys::mono_ns();
        let ev = match flow {
            Flow::Send(mut s) => {
                let _ = s.rec.flush();
                for c in &s.conns {
                    let _ = self.ep.ctl(libc::EPOLL_CTL_DEL, c.fd, 0, 0);
                    close(c.fd);
                }
                self.keys.remove(&s.key);
                json!({"event": "result", "key": s.key, "status": s.status.or(status).unwrap_or("interrupted"),
                       "error": s.error, "packets": s.packets, "queue_full_packets": s.queue_full,
                       "queued_bytes_at_end": s.conns.iter().map(SConn::queued).sum::<usize>(),
                       "keepalive_packets": s.keepalives, "rtp_packets": s.rtp_packets, "wire_bytes": s.wire_bytes,
                       "per_connection_packets": s.per_conn, "records": s.rec.rows,
                       "elapsed_s": now.saturating_sub(s.start_ns) as f64 / 1e9,
                       "send_lateness_us": summary_us(&mut s.lateness_ns)})
            }
            Flow::Recv(mut r) => {
                r.incomplete += r.partial.len() as u64;
                let _ = r.rec.flush();
                for fd in r.udp.iter().copied().chain(r.conns.values().map(|c| c.fd)) {
                    let _ = self.ep.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0);
                    close(fd);
                }
                self.keys.remove(&r.key);
                json!({"event": "result", "key": r.key, "received_packets": r.received, "received_bytes": r.received_bytes,
                       "rtp_packets": r.rtp_packets, "keepalive_packets": r.keepalives, "duplicate_packets": r.duplicates,
                       "incomplete_packets": r.incomplete, "foreign_datagrams": r.foreign, "bytes_in": r.bytes_in,
                       "first_recv_time_s": r.first_ns.map(|t| t as f64 / 1e9),
                       "last_recv_time_s": r.first_ns.map(|_| r.last_ns as f64 / 1e9),
                       "records": r.rec.rows, "kernel_stamped": r.kernel_stamps,
                       "recv_lag_us": summary_us(&mut r.lags_ns)})
            }
        };
        self.event(ev);
    }

    // ---------------------------------------------------------------------------- senders

    /// Sends what is due; returns the earliest instant something is due next.
    fn service_senders(&mut self, now: u64) -> u64 {
        let mut ended = Vec::new();
        while let Some(&Reverse((due, slot))) = self.dues.peek() {
            if due > now {
                break;
            }
            self.dues.pop();
            if self.due_of.get(&slot) != Some(&due) {
                continue; // stale
            }
            match self.flows.get_mut(&slot) {
                Some(Flow::Send(s)) => {
                    let next = s.service(now, &self.ep, slot, &mut self.scratch);
                    if s.status.is_some() {
                        self.due_of.remove(&slot);
                        ended.push(slot);
                    } else {
                        let next = next.max(now + 1);
                        self.due_of.insert(slot, next);
                        self.dues.push(Reverse((next, slot)));
                    }
                }
                _ => {
                    self.due_of.remove(&slot);
                }
            }
        }
        for slot in ended {
            self.finish_flow(slot, None);
        }
        while let Some(&Reverse((due, slot))) = self.dues.peek() {
            if self.due_of.get(&slot) == Some(&due) {
                return due;
            }
            self.dues.pop();
        }
        u64::MAX
    }

    fn schedule(&mut self, slot: u32, due: u64) {
        self.due_of.insert(slot, due);
        self.dues.push(Reverse((due, slot)));
    }

    fn ready(&mut self, slot: u32, conn: u16, events: u32) {
        let now = sys::mono_ns();
        match self.flows.get_mut(&slot) {
            Some(Flow::Send(s)) => {
                if let Some(c) = s.conns.get(conn as usize) {
                    if events & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0 {
                        let e = so_error(c.fd);
                        s.status = Some("connection-lost");
                        s.error = Some(if e != 0 { strerror(e) } else { format!("connection {conn}: the receiver closed it") });
                    } else {
                        s.flush(conn as usize, &self.ep, slot);
                    }
                }
                if s.status.is_some() {
                    self.finish_flow(slot, None);
                }
                let _ = now;
            }
            Some(Flow::Recv(_)) => {
                if conn == 0xFFFF {
                    self.read_udp(slot);
                } else {
                    self.read_tcp(slot, conn);
                }
            }
            None => {}
        }
    }

    // ---------------------------------------------------------------------------- receivers

    fn read_udp(&mut self, slot: u32) {
        let Some(Flow::Recv(r)) = self.flows.get_mut(&slot) else { return };
        let Some(fd) = r.udp else { return };
        for _round in 0..8 {
            let mut iovs: Vec<libc::iovec> = self.udp_bufs.iter_mut()
                .map(|b| libc::iovec { iov_base: b.as_mut_ptr() as *mut libc::c_void, iov_len: b.len() }).collect();
            let mut addrs: Vec<libc::sockaddr_storage> = vec![unsafe { std::mem::zeroed() }; UDP_BATCH];
            let mut hdrs: Vec<libc::mmsghdr> = (0..UDP_BATCH).map(|i| {
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_iov = &mut iovs[i];
                h.msg_hdr.msg_iovlen = 1;
                h.msg_hdr.msg_name = &mut addrs[i] as *mut _ as *mut libc::c_void;
                h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
                h.msg_hdr.msg_control = self.cmsg_bufs[i].as_mut_ptr() as *mut libc::c_void;
                h.msg_hdr.msg_controllen = CMSG_BYTES as _;
                h
            }).collect();
            let n = unsafe { libc::recvmmsg(fd, hdrs.as_mut_ptr(), UDP_BATCH as libc::c_uint, libc::MSG_DONTWAIT, std::ptr::null_mut()) };
            let t_read = sys::mono_ns();
            if n <= 0 {
                return;
            }
            for i in 0..n as usize {
                let h = &hdrs[i];
                let len = h.msg_len as usize;
                let stamp = unsafe { rx_stamp(&h.msg_hdr) }.map(|s| self.clocks.to_mono(s));
                if sockaddr_ip(&addrs[i]) != Some(r.peer) {
                    r.foreign += 1;
                    continue;
                }
                r.bytes_in += len as u64;
                r.last_rx_ns = t_read;
                if h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                    r.foreign += 1;
                    continue;
                }
                let t = match stamp {
                    Some(s) => {
                        r.kernel_stamps += 1;
                        r.lags_ns.push(t_read.saturating_sub(s));
                        s.min(t_read)
                    }
                    None => t_read,
                };
                match wire::decode(&self.udp_bufs[i][..len], None) {
                    Ok(m) => r.piece(m, 0, t, &mut self.out),
                    Err(_) => r.foreign += 1,
                }
            }
            if (n as usize) < UDP_BATCH {
                return;
            }
        }
    }

    fn read_tcp(&mut self, slot: u32, index: u16) {
        let Some(Flow::Recv(r)) = self.flows.get_mut(&slot) else { return };
        let Some(c) = r.conns.get(&index) else { return };
        let fd = c.fd;
        let key = r.key.clone();
        let mut buf = std::mem::take(&mut self.tcp_buf);
        let mut cbuf = [0u8; CMSG_BYTES];
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr() as *mut libc::c_void, iov_len: buf.len() };
        let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
        mh.msg_iov = &mut iov;
        mh.msg_iovlen = 1;
        mh.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
        mh.msg_controllen = CMSG_BYTES as _;
        let n = unsafe { libc::recvmsg(fd, &mut mh, libc::MSG_DONTWAIT) };
        let t_read = sys::mono_ns();
        if n < 0 {
            let e = errno();
            if e != libc::EAGAIN && e != libc::EINTR {
                self.out_event(json!({"event": "error", "key": key, "index": index, "error": format!("connection {index}: {}", strerror(e))}));
                self.tcp_eof(slot, index);
            }
        } else if n == 0 {
            self.tcp_eof(slot, index);
        } else {
            let stamp = unsafe { rx_stamp(&mh) }.map(|s| self.clocks.to_mono(s));
            self.feed_tcp(slot, index, &buf[..n as usize], t_read, stamp);
        }
        self.tcp_buf = buf;
    }

    fn out_event(&mut self, v: Value) {
        self.event(v);
    }

    fn tcp_eof(&mut self, slot: u32, index: u16) {
        let Some(Flow::Recv(r)) = self.flows.get_mut(&slot) else { return };
        let Some(mut c) = r.conns.remove(&index) else { return };
        let cut = c.parser.finish().err().map(|e| format!("connection {index}: {e}"));
        let _ = self.ep.ctl(libc::EPOLL_CTL_DEL, c.fd, 0, 0);
        close(c.fd);
        let ev = json!({"event": "eof", "key": r.key, "index": index, "cut": cut});
        self.event(ev);
    }

    /// Bytes of a TCP media connection, read at `t_read` (the instant every message they
    /// complete is recorded with: the bytes readable in order, read by the application).
    fn feed_tcp(&mut self, slot: u32, index: u16, data: &[u8], t_read: u64, stamp: Option<u64>) {
        let Some(Flow::Recv(r)) = self.flows.get_mut(&slot) else { return };
        if r.failed {
            return;
        }
        let Some(c) = r.conns.get_mut(&index) else { return };
        r.bytes_in += data.len() as u64;
        r.last_rx_ns = t_read;
        if let Some(s) = stamp {
            r.kernel_stamps += 1;
            r.lags_ns.push(t_read.saturating_sub(s));
        }
        self.msgs.clear();
        let res = c.parser.feed(data, &mut self.msgs);
        for &m in &self.msgs {
            r.piece(m, index as i16, t_read, &mut self.out);
        }
        if let Err(e) = res {
            r.failed = true;
            let ev = json!({"event": "corrupted", "key": r.key, "reason": format!("connection {index}: {e}")});
            // stop reading this flow: Python fails the run and closes the connections
            let fds: Vec<RawFd> = r.conns.values().map(|c| c.fd).collect();
            for fd in fds {
                let _ = self.ep.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0);
            }
            self.event(ev);
        }
    }
}

impl Receiver {
    /// One RTP packet of the flow (receiver.py's `_piece` and `_complete`, "read" delivery).
    fn piece(&mut self, m: Msg, conn: i16, t: u64, out: &mut Vec<u8>) {
        let (flow_id, seq, send_ns, piece, pieces, size) = match m {
            Msg::KeepAlive { .. } => {
                self.keepalives += 1;
                return;
            }
            Msg::Media { flow_id, seq, send_ns, piece, pieces, size } => (flow_id, seq, send_ns, piece, pieces, size),
        };
        if flow_id != self.flow_id {
            self.foreign += 1;
            return;
        }
        if !self.got_media {
            self.got_media = true;
            out.extend_from_slice(json!({"event": "media", "key": self.key}).to_string().as_bytes());
            out.push(b'\n');
        }
        self.rtp_packets += 1;
        if pieces == 1 {
            self.complete(conn, seq, size as u64, send_ns, t);
            return;
        }
        if !self.partial.contains_key(&seq) {
            if self.done.contains(&seq) {
                self.duplicates += 1;
                return;
            }
            if self.partial.len() >= MAX_PARTIAL_PACKETS {
                let oldest = *self.partial.keys().min().unwrap();
                self.partial.remove(&oldest);
                self.incomplete += 1;
            }
            self.partial.insert(seq, ([0; 4], 0, send_ns));
        }
        let st = self.partial.get_mut(&seq).unwrap();
        let (w, bit) = ((piece / 64) as usize, 1u64 << (piece % 64));
        if st.0[w] & bit != 0 {
            self.duplicates += 1;
            return;
        }
        st.0[w] |= bit;
        st.1 += size as u64;
        let have: u32 = st.0.iter().map(|x| x.count_ones()).sum();
        if have == pieces as u32 {
            let (_, bytes, sn) = self.partial.remove(&seq).unwrap();
            self.complete(conn, seq, bytes, sn, t);
        }
    }

    fn complete(&mut self, conn: i16, seq: u64, size: u64, send_ns: u64, t: u64) {
        let s = seq as i64;
        if self.done.contains(&seq) || s < self.max_done - 65536 {
            self.duplicates += 1;
            return;
        }
        self.done.insert(seq);
        self.max_done = self.max_done.max(s);
        if self.done.len() > 4 * 65536 {
            let floor = self.max_done - 65536;
            self.done.retain(|&x| x as i64 >= floor);
        }
        self.received += 1;
        self.received_bytes += size;
        self.first_ns.get_or_insert(t);
        self.last_ns = t;
        self.rec.received(self.flow_id, conn, seq, size as u32, send_ns, t);
    }
}

impl Sender {
    /// Sends every packet due at `now` (and keep-alives), checks the drain; returns when
    /// something is next due.
    fn service(&mut self, now: u64, ep: &sys::Epoll, slot: u32, scratch: &mut Vec<u8>) -> u64 {
        while self.next < self.sched.len() && self.start_ns + self.sched[self.next].at_ns <= now && self.status.is_none() {
            self.emit(self.next, now, ep, slot, scratch);
            self.next += 1;
        }
        if !self.tcp {
            for i in 0..self.conns.len() {
                if !self.conns[i].blocked && self.conns[i].dgram_bytes > 0 {
                    self.flush(i, ep, slot);
                }
            }
        }
        if self.status.is_some() {
            return now;
        }
        let mut wake = u64::MAX;
        if self.next < self.sched.len() {
            wake = self.start_ns + self.sched[self.next].at_ns;
        } else {
            let deadline = *self.drain_deadline.get_or_insert(now + self.drain_timeout_ns);
            if self.conns.iter().all(|c| c.idle() && (!self.tcp || unsent_bytes(c.fd) == 0)) {
                self.status = Some("completed");
                return now;
            }
            if now >= deadline {
                self.status = Some("drain-timeout");
                return now;
            }
            wake = wake.min(deadline).min(now + DRAIN_POLL_NS);
        }
        if self.keepalive && self.next < self.sched.len() {
            let silence = SILENCE_FACTOR_NUM * self.interval_ns / 2;
            if now - self.last_media_ns.min(now) > silence {
                for i in 0..self.conns.len() {
                    if !self.conns[i].idle() {
                        continue;
                    }
                    let gap = self.ka_gap_ns(i);
                    let mut due = self.conns[i].last_tx + gap;
                    if due <= now {
                        scratch.clear();
                        let ts = ((now - self.start_ns.min(now)) as u128 * 9 / 100_000) as u32;
                        wire::encode_keepalive(scratch, self.flow_id, self.rtp_seq, ts);
                        self.rtp_seq = self.rtp_seq.wrapping_add(1);
                        self.enqueue(i, scratch);
                        self.conns[i].last_tx = now;
                        self.keepalives += 1;
                        self.flush(i, ep, slot);
                        due = now + gap;
                    }
                    wake = wake.min(due);
                }
            } else {
                wake = wake.min(self.last_media_ns + silence + 1);
            }
        }
        wake
    }

    fn ka_gap_ns(&self, i: usize) -> u64 {
        let mut rtt = self.ka_rtt_ns;
        if self.tcp {
            let r = tcp_rtt_ns(self.conns[i].fd);
            if r > 0 {
                rtt = r;
            }
        }
        (rtt / 3).max(self.interval_ns)
    }

    fn enqueue(&mut self, i: usize, rtp: &[u8]) {
        let c = &mut self.conns[i];
        if self.tcp {
            if c.out_at == c.out.len() {
                c.out.clear();
                c.out_at = 0;
            }
            c.out.extend_from_slice(&(rtp.len() as u16).to_be_bytes());
            c.out.extend_from_slice(rtp);
        } else {
            c.dgrams.push_back(rtp.to_vec());
            c.dgram_bytes += rtp.len();
        }
    }

    fn emit(&mut self, idx: usize, now: u64, ep: &sys::Epoll, slot: u32, scratch: &mut Vec<u8>) {
        let e = &self.sched[idx];
        let (size, frame_type, frame_last, frame_id, rtp_ts) = (e.size as usize, e.frame_type, e.frame_last, e.frame_id, e.rtp_ts);
        self.lateness_ns.push(now.saturating_sub(self.start_ns + e.at_ns));
        let ci = self.rr;
        self.rr = (self.rr + 1) % self.conns.len();
        let seq = self.seq;
        self.seq += 1;
        self.packets += 1;
        let dropped = self.conns[ci].queued() + size > self.max_queue_bytes;
        if dropped {
            self.queue_full += 1;
            self.rec.sent(self.flow_id, -1, frame_type, frame_last, true, seq, size as u32, now, frame_id);
            return;
        }
        let n = self.split.min(size / wire::MIN_MEDIA_RTP_BYTES).max(1);
        let mut sizes = Vec::with_capacity(n);
        wire::split_sizes(size, n, &mut sizes);
        for (k, &s) in sizes.iter().enumerate() {
            scratch.clear();
            wire::encode_media(scratch, self.flow_id, self.rtp_seq, rtp_ts, frame_last && k == n - 1, seq, now,
                               k as u8, n as u8, s);
            self.rtp_seq = self.rtp_seq.wrapping_add(1);
            self.enqueue(ci, scratch);
            // TCP: each piece its own write (sender.py: split-N puts N packets on the wire)
            if self.tcp && !self.conns[ci].blocked {
                self.flush(ci, ep, slot);
            }
        }
        self.rtp_packets += n as u64;
        self.per_conn[ci] += 1;
        self.conns[ci].last_tx = now;
        self.last_media_ns = now;
        self.rec.sent(self.flow_id, ci as i16, frame_type, frame_last, false, seq, size as u32, now, frame_id);
    }

    /// Hands connection `i`'s queue to its socket as far as it takes it (TCP: `send`; UDP:
    /// `sendmmsg` of every queued datagram); waits for EPOLLOUT when it takes no more.
    fn flush(&mut self, i: usize, ep: &sys::Epoll, slot: u32) {
        let c = &mut self.conns[i];
        let mut blocked = false;
        if self.tcp {
            while c.out_at < c.out.len() {
                let rest = &c.out[c.out_at..];
                let n = unsafe { libc::send(c.fd, rest.as_ptr() as *const libc::c_void, rest.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
                if n < 0 {
                    let e = errno();
                    if e == libc::EAGAIN || e == libc::EINTR {
                        blocked = true;
                        break;
                    }
                    self.status = Some("connection-lost");
                    self.error = Some(strerror(e));
                    return;
                }
                c.out_at += n as usize;
                self.wire_bytes += n as u64;
            }
            if c.out_at == c.out.len() {
                c.out.clear();
                c.out_at = 0;
            }
        } else {
            while !c.dgrams.is_empty() {
                let k = c.dgrams.len().min(64);
                let mut iovs: Vec<libc::iovec> = c.dgrams.iter().take(k)
                    .map(|d| libc::iovec { iov_base: d.as_ptr() as *mut libc::c_void, iov_len: d.len() }).collect();
                let mut hdrs: Vec<libc::mmsghdr> = iovs.iter_mut().map(|v| {
                    let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                    h.msg_hdr.msg_iov = v;
                    h.msg_hdr.msg_iovlen = 1;
                    h
                }).collect();
                let n = unsafe { libc::sendmmsg(c.fd, hdrs.as_mut_ptr(), k as libc::c_uint, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
                if n < 0 {
                    let e = errno();
                    if e == libc::EAGAIN || e == libc::EINTR || e == libc::ENOBUFS {
                        blocked = e == libc::EAGAIN;
                        break;
                    }
                    if e == libc::ECONNREFUSED {
                        // ICMP port unreachable from an earlier datagram (sender.py keeps going)
                        let d = c.dgrams.pop_front().unwrap();
                        c.dgram_bytes -= d.len();
                        continue;
                    }
                    self.status = Some("connection-lost");
                    self.error = Some(strerror(e));
                    return;
                }
                for _ in 0..n {
                    let d = c.dgrams.pop_front().unwrap();
                    c.dgram_bytes -= d.len();
                    self.wire_bytes += d.len() as u64;
                }
            }
        }
        if blocked != c.blocked {
            c.blocked = blocked;
            let ev = if blocked { libc::EPOLLOUT as u32 } else { 0 };
            let _ = ep.ctl(libc::EPOLL_CTL_MOD, c.fd, ev, token(slot, i as u16));
        }
    }
}
