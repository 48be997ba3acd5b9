//! Entering a network namespace for the duration of one operation.
//!
//! A file descriptor opened while the thread is inside a namespace stays bound
//! to it (ip-netns(8) keeps namespaces as bind mounts under /var/run/netns;
//! setns(2) moves the calling thread into one). The emulator opens each TUN
//! inside its namespace and then returns to where it started.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// The file that names a namespace: `/var/run/netns/NAME`, or `name` itself if absolute.
pub fn netns_path(name: &str) -> String {
    if name.starts_with('/') {
        name.to_string()
    } else {
        format!("/var/run/netns/{name}")
    }
}

fn setns(f: &File) -> io::Result<()> {
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Runs `f` inside namespace `name`, then returns to the original namespace.
/// The error says which step failed.
pub fn in_netns<T>(name: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    let path = netns_path(name);
    let target = File::open(&path).map_err(|e| format!("cannot open {path}: {e}"))?;
    let home = File::open("/proc/thread-self/ns/net").map_err(|e| format!("cannot open /proc/thread-self/ns/net: {e}"))?;
    setns(&target).map_err(|e| format!("cannot enter namespace {path}: {e}"))?;
    let out = f();
    if let Err(e) = setns(&home) {
        return Err(format!("cannot return to the original namespace: {e}"));
    }
    out
}
