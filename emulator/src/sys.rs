//! Thin wrappers over the Linux calls the event loop uses: clocks, epoll with a
//! nanosecond timeout (`epoll_pwait2`, Linux 5.11), signalfd, process settings.

use std::io;
use std::os::fd::RawFd;

/// CLOCK_MONOTONIC in nanoseconds.
#[inline]
pub fn mono_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME in nanoseconds since the Unix epoch.
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

#[inline]
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The resolution the kernel's timers have for CLOCK_MONOTONIC (`clock_getres`):
/// 1 ns with high-resolution timers active, one scheduler tick (e.g. 4 ms at
/// HZ=250) without them, when no sleep can end between two ticks.
pub fn clock_resolution_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    if unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sets this thread's timer slack (prctl `PR_SET_TIMERSLACK`, man 2 prctl). The
/// kernel may fire a sleeping task's timer up to the slack late (50 µs by
/// default, inherited from the parent, and set much larger by some
/// supervisors); a SCHED_FIFO task has none, but the emulator also runs where
/// SCHED_FIFO is refused.
pub fn set_timer_slack_ns(ns: u64) {
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
}

/// The timer slack in force for this thread (0 under SCHED_FIFO).
pub fn timer_slack_ns() -> u64 {
    let got = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
    if got < 0 { 0 } else { got as u64 }
}

pub fn last_err() -> io::Error {
    io::Error::last_os_error()
}

/// An epoll instance with level-triggered read interest.
pub struct Epoll {
    fd: RawFd,
    /// False once `epoll_pwait2` answered ENOSYS (a kernel before 5.11, or a
    /// seccomp filter): timeouts are then whole milliseconds.
    pub pwait2: bool,
}

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(last_err());
        }
        Ok(Epoll { fd, pwait2: true })
    }

    pub fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: token };
        if unsafe { libc::epoll_ctl(self.fd, libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
            return Err(last_err());
        }
        Ok(())
    }

    /// `epoll_ctl(op, fd)` with these events (the endpoint: EPOLLOUT on and off, EPOLL_CTL_DEL).
    pub fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        if unsafe { libc::epoll_ctl(self.fd, op, fd, &mut ev) } != 0 {
            return Err(last_err());
        }
        Ok(())
    }

    /// Waits for readiness; `timeout_ns = None` waits forever. Returns the tokens ready.
    pub fn wait(&mut self, events: &mut [libc::epoll_event], timeout_ns: Option<u64>) -> io::Result<usize> {
        let n = if self.pwait2 {
            let ts = timeout_ns.map(|t| libc::timespec { tv_sec: (t / 1_000_000_000) as _, tv_nsec: (t % 1_000_000_000) as _ });
            let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
            let r = unsafe {
                libc::syscall(
                    libc::SYS_epoll_pwait2,
                    self.fd,
                    events.as_mut_ptr(),
                    events.len() as libc::c_int,
                    tsp,
                    std::ptr::null::<libc::sigset_t>(),
                    0usize,
                )
            };
            if r < 0 && matches!(last_err().raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM)) {
                self.pwait2 = false;
                return self.wait(events, timeout_ns);
            }
            r as i64
        } else {
            // Millisecond fallback for kernels before 5.11: round up, the loop re-checks due times.
            let ms = timeout_ns.map_or(-1, |t| t.div_ceil(1_000_000).min(i32::MAX as u64) as libc::c_int);
            unsafe { libc::epoll_wait(self.fd, events.as_mut_ptr(), events.len() as libc::c_int, ms) as i64 }
        };
        if n < 0 {
            let e = last_err();
            if e.raw_os_error() == Some(libc::EINTR) {
                return Ok(0);
            }
            return Err(e);
        }
        Ok(n as usize)
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        unsafe { libc::close(self.fd) };
    }
}

/// Blocks SIGTERM, SIGINT, SIGHUP and SIGUSR1 and returns a non-blocking signalfd
/// that reports them; ignores SIGPIPE.
pub fn signal_fd() -> io::Result<RawFd> {
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGUSR1] {
            libc::sigaddset(&mut set, s);
        }
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return Err(last_err());
        }
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        let fd = libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC);
        if fd < 0 {
            return Err(last_err());
        }
        Ok(fd)
    }
}

/// Reads one pending signal number from a signalfd, if any.
pub fn read_signal(fd: RawFd) -> Option<i32> {
    let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
    let n = unsafe {
        libc::read(fd, &mut info as *mut _ as *mut libc::c_void, std::mem::size_of::<libc::signalfd_siginfo>())
    };
    if n == std::mem::size_of::<libc::signalfd_siginfo>() as isize {
        Some(info.ssi_signo as i32)
    } else {
        None
    }
}

/// Asks the kernel to send SIGTERM when the parent exits. Returns false if the
/// parent is already gone.
pub fn die_with_parent() -> bool {
    let parent = unsafe { libc::getppid() };
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0) };
    unsafe { libc::getppid() == parent }
}

/// Tries SCHED_FIFO at `priority`.
pub fn try_sched_fifo(priority: i32) -> io::Result<()> {
    let p = libc::sched_param { sched_priority: priority };
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } != 0 {
        return Err(last_err());
    }
    Ok(())
}

/// Writes `data` to `path` atomically (temporary file + rename).
pub fn write_atomic(path: &str, data: &[u8]) -> io::Result<()> {
    let tmp = format!("{path}.tmp");
    std::fs::write(&tmp, data)?;
    std::fs::rename(&tmp, path)
}

/// Raises the soft limit of open files to the hard limit (each link holds two TUN
/// descriptors); returns the limit now in force.
pub fn raise_fd_limit() -> u64 {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return 0;
        }
        if r.rlim_cur < r.rlim_max {
            let want = libc::rlimit { rlim_cur: r.rlim_max, rlim_max: r.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                r.rlim_cur = r.rlim_max;
            }
        }
    }
    r.rlim_cur
}
