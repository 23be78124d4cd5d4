//! The TUN device and the clock: the only I/O of the router (used by the binary).
//!
//! `open` attaches to (or creates) a TUN device with `IFF_TUN | IFF_NO_PI`
//! (Documentation/networking/tuntap.rst: `open("/dev/net/tun")`, `ioctl(TUNSETIFF)`), so each
//! `read` returns exactly one IP packet and each `write` injects one; the descriptor is
//! non-blocking. If the device is down it is brought up (`SIOCSIFFLAGS`).
//!
//! With `offloads`, it also sets `IFF_VNET_HDR` (every read and write starts with a
//! `struct virtio_net_hdr`, [`crate::gso::VnetHdr`]) and offers the kernel, with
//! `TUNSETOFFLOAD`, partial checksums and TCP/IPv4 segmentation (`TUN_F_CSUM | TUN_F_TSO4 |
//! TUN_F_TSO_ECN`, include/uapi/linux/if_tun.h): the device then advertises
//! NETIF_F_HW_CSUM/TSO/TSO_ECN (drivers/net/tun.c `set_offload`), so a TCP super-packet
//! forwarded into it arrives whole, up to 64 KB, instead of being cut by the kernel's software
//! GSO first. TSO6 and UFO are not offered: the testbed is IPv4 and its UDP is datagram-sized,
//! and the kernel segments anything it cannot hand over.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `ioctl` numbers of <linux/if_tun.h>: `TUNSETIFF = _IOW('T', 202, int)`.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
/// <linux/if_tun.h> flags.
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;
/// `TUNSETOFFLOAD = _IOW('T', 208, unsigned int)` and its flags (<linux/if_tun.h>).
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO_ECN: libc::c_uint = 0x08;

pub struct Tun {
    fd: OwnedFd,
    pub name: String,
    /// Every read and write carries a virtio-net header (`IFF_VNET_HDR`).
    pub vnet_hdr: bool,
}

fn ifreq_with_name(name: &str) -> io::Result<libc::ifreq> {
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "interface name must be 1 to 15 bytes",
        ));
    }
    for (d, s) in req.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok(req)
}

impl Tun {
    /// Attach to the TUN device `name` (creating it if absent), non-blocking, and bring it up;
    /// with `offloads`, with virtio-net headers and the kernel's offloads (module header).
    pub fn open(name: &str, offloads: bool) -> io::Result<Tun> {
        // SAFETY: a plain open(2) of a NUL-terminated path.
        let fd = unsafe {
            libc::open(
                c"/dev/net/tun".as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a freshly opened descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut req = ifreq_with_name(name)?;
        req.ifr_ifru.ifru_flags = IFF_TUN | IFF_NO_PI | if offloads { IFF_VNET_HDR } else { 0 };
        // SAFETY: TUNSETIFF takes a pointer to an ifreq that lives across the call.
        if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut req) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // Without offloads the device offers none (a device left with offloads by an earlier
        // run would otherwise hand this one super-packets it reads as plain packets).
        let off = if offloads {
            TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO_ECN
        } else {
            0
        };
        // SAFETY: TUNSETOFFLOAD takes its flags by value.
        if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD as _, off as libc::c_ulong) } < 0 {
            return Err(io::Error::last_os_error());
        }
        bring_up(name)?;
        Ok(Tun {
            fd,
            name: name.to_string(),
            vnet_hdr: offloads,
        })
    }

    /// Read one packet (with its virtio-net header when `vnet_hdr`) into `scratch`; its length,
    /// or None when none is pending.
    #[inline]
    pub fn read_raw(&self, scratch: &mut [u8]) -> io::Result<Option<usize>> {
        // SAFETY: scratch is a valid writable region of its length.
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                scratch.as_mut_ptr().cast(),
                scratch.len(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(e),
            };
        }
        Ok(Some(n as usize))
    }

    /// Write one packet gathered from `parts` (the virtio-net header first when `vnet_hdr`).
    #[inline]
    pub fn write_parts(&self, parts: &[io::IoSlice<'_>]) -> io::Result<()> {
        // SAFETY: IoSlice is ABI-compatible with struct iovec; the slices outlive the call.
        let n = unsafe {
            libc::writev(
                self.fd.as_raw_fd(),
                parts.as_ptr().cast(),
                parts.len() as libc::c_int,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Write one packet. Err on failure (the caller counts it; the packet is lost).
    #[inline]
    pub fn write(&self, pkt: &[u8]) -> io::Result<()> {
        // SAFETY: pkt is a valid readable region of its length.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), pkt.as_ptr().cast(), pkt.len()) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Set IFF_UP on `name` if it is not up (SIOCGIFFLAGS / SIOCSIFFLAGS on a datagram socket).
fn bring_up(name: &str) -> io::Result<()> {
    // SAFETY: socket(2) with constant arguments.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: s is ours.
    let s = unsafe { OwnedFd::from_raw_fd(s) };
    let mut req = ifreq_with_name(name)?;
    // SAFETY: the ioctls take a pointer to an ifreq living across the call.
    unsafe {
        if libc::ioctl(s.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut req) < 0 {
            return Err(io::Error::last_os_error());
        }
        let flags = req.ifr_ifru.ifru_flags;
        if flags & libc::IFF_UP as libc::c_short == 0 {
            req.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
            if libc::ioctl(s.as_raw_fd(), libc::SIOCSIFFLAGS as _, &mut req) < 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// CLOCK_MONOTONIC, ns: the clock shared by every namespace (the contract's `t0_monotonic_ns`).
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME in ns: the packet socket's stamps (`crate::tap`) are on it.
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
