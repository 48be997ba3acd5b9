//! Attaching to an existing TUN device (Linux Documentation/networking/tuntap.rst).
//!
//! The testbed creates persistent devices (`ip tuntap add dev NAME mode tun`);
//! the emulator opens `/dev/net/tun` inside the device's namespace and attaches
//! with `TUNSETIFF` and `IFF_TUN | IFF_NO_PI`, so each read returns one IP packet
//! with no extra header and each write injects one. The descriptor is
//! non-blocking: the event loop reads until `EAGAIN`.
//!
//! A link that passes super-packets whole (`crate::gso`) attaches with `IFF_VNET_HDR` too and
//! turns the device's offloads on (`TUNSETOFFLOAD`: checksum, TSO4/6, TSO-ECN): each read then
//! starts with a `struct virtio_net_hdr` and may carry a GSO super-packet, and each write
//! must start with one.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;

const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;
/// `_IOW('T', 208, unsigned int)`
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
/// TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN (include/uapi/linux/if_tun.h).
const TUN_OFFLOADS: libc::c_ulong = 0x01 | 0x02 | 0x04 | 0x08;
/// `_IOW('T', 202, int)`
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;

#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// Opens the existing TUN device `name` in the current namespace; `offload`: with the vnet
/// header and the device's segmentation offloads on.
pub fn open_existing(name: &str, offload: bool) -> Result<File, String> {
    let cname = std::ffi::CString::new(name).map_err(|_| "invalid device name".to_string())?;
    if unsafe { libc::if_nametoindex(cname.as_ptr()) } == 0 {
        return Err(format!("no device {name:?} in this namespace (create it first: ip tuntap add dev {name} mode tun)"));
    }
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open("/dev/net/tun")
        .map_err(|e| format!("cannot open /dev/net/tun: {e}"))?;
    let mut req = IfReq { name: [0; libc::IFNAMSIZ], flags: IFF_TUN | IFF_NO_PI | if offload { IFF_VNET_HDR } else { 0 }, _pad: [0; 22] };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    let rc = unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&f), TUNSETIFF as _, &mut req as *mut IfReq) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        let hint = match e.raw_os_error() {
            Some(libc::EINVAL) => " (is it a TAP or multi-queue device? tcpdelay-link needs mode tun, single queue)",
            Some(libc::EBUSY) => " (another process is attached to it)",
            Some(libc::EPERM) => " (needs CAP_NET_ADMIN or to own the device)",
            _ => "",
        };
        return Err(format!("cannot attach to TUN device {name:?}: {e}{hint}"));
    }
    if offload {
        let rc = unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&f), TUNSETOFFLOAD as _, TUN_OFFLOADS) };
        if rc != 0 {
            return Err(format!("cannot turn on segmentation offload on TUN device {name:?}: {}", io::Error::last_os_error()));
        }
    }
    Ok(f)
}
