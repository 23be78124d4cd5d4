//! When each packet reached the TUN device: a packet socket on the device with a receive ring
//! (Documentation/networking/packet_mmap.rst, TPACKET_V2) sees every packet the kernel hands
//! to the TUN, stamped as it is handed over (net/core/dev.c `dev_queue_xmit_nit`, just before
//! the device's xmit). The router reads the packet from the TUN some time later: at once while
//! it polls, after a wake-up (tens of µs on a virtual CPU, more when it was idle) while it
//! sleeps. Stamping a packet with the ring's time instead of its read time keeps that wake-up
//! out of the emulated path.
//!
//! The ring holds the first `SNAP_BYTES` of each packet the kernel sent to the device (a
//! classic BPF filter keeps PACKET_OUTGOING only and truncates), and a TUN read is matched to
//! its frame by the IPv4 header, which both copies share: frames come in the TUN's order, and a
//! frame with no TUN packet (the TUN dropped it) is skipped when a later frame matches.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};

/// Bytes of each packet kept in the ring: an IPv4 header with options and then some (the
/// value is ours).
const SNAP_BYTES: u32 = 64;
/// Bytes compared to match a TUN read to its frame: the IPv4 header without options (total
/// length, identification, checksum, addresses).
pub const MATCH_BYTES: usize = 20;
/// Ring geometry: 256-byte frames (the 32-byte tpacket2_hdr, the sockaddr_ll and the snap fit),
/// 16 per 4 KiB block, 1024 blocks: 16384 frames, more than the TUN's queue (txqueuelen 10000)
/// can hold, so a frame is never dropped for want of room while its packet waits in the TUN.
const FRAME_BYTES: u32 = 256;
const BLOCK_BYTES: u32 = 4096;
const BLOCKS: u32 = 1024;
/// Ready frames searched for a TUN read's match before giving up on it (the value is ours; a
/// frame with no TUN packet comes only from a drop at a full TUN queue).
pub const LOOKAHEAD: usize = 64;

/// `ETH_P_ALL` in network byte order, as packet(7) wants the protocol.
fn eth_p_all_be() -> u16 {
    (libc::ETH_P_ALL as u16).to_be()
}

/// The packet socket and its mapped ring.
pub struct Tap {
    /// Held open: the ring lives as long as the socket.
    _socket: OwnedFd,
    ring: *mut u8,
    frames: usize,
    /// The frame the kernel fills next (the oldest not yet consumed).
    head: usize,
}

impl Tap {
    /// A tap on interface `ifname` (the TUN) in the caller's network namespace.
    pub fn open(ifname: &str) -> io::Result<Tap> {
        let name = std::ffi::CString::new(ifname)
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: a NUL-terminated name.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: plain socket(2) call.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                eth_p_all_be() as libc::c_int,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // A = pkttype; keep SNAP_BYTES of outgoing packets, nothing of the rest.
        let mut prog = [
            bpf(
                BPF_LD | BPF_B | BPF_ABS,
                0,
                0,
                (libc::SKF_AD_OFF + libc::SKF_AD_PKTTYPE) as u32,
            ),
            bpf(
                BPF_JMP | BPF_JEQ | BPF_K,
                0,
                1,
                libc::PACKET_OUTGOING as u32,
            ),
            bpf(BPF_RET | BPF_K, 0, 0, SNAP_BYTES),
            bpf(BPF_RET | BPF_K, 0, 0, 0),
        ];
        let fprog = libc::sock_fprog {
            len: prog.len() as u16,
            filter: prog.as_mut_ptr(),
        };
        setsockopt(&fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &fprog)?;
        setsockopt(
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            &(libc::tpacket_versions::TPACKET_V2 as libc::c_int),
        )?;
        let req = libc::tpacket_req {
            tp_block_size: BLOCK_BYTES,
            tp_block_nr: BLOCKS,
            tp_frame_size: FRAME_BYTES,
            tp_frame_nr: BLOCKS * (BLOCK_BYTES / FRAME_BYTES),
        };
        setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)?;
        let len = (BLOCK_BYTES * BLOCKS) as usize;
        // SAFETY: maps the ring the kernel just allocated for this socket (packet_mmap.rst).
        let ring = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ring == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: zeroed sockaddr_ll, then the fields packet(7) reads for bind.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = eth_p_all_be();
        sll.sll_ifindex = ifindex as libc::c_int;
        // SAFETY: a valid sockaddr_ll of the size passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Tap {
            _socket: fd,
            ring: ring.cast(),
            frames: (BLOCKS * (BLOCK_BYTES / FRAME_BYTES)) as usize,
            head: 0,
        })
    }

    fn frame(&self, i: usize) -> *mut libc::tpacket2_hdr {
        // SAFETY: i < frames, inside the mapping; frames are FRAME_BYTES apart from its start.
        unsafe {
            self.ring
                .add((i % self.frames) * FRAME_BYTES as usize)
                .cast()
        }
    }

    /// The `k`-th ready frame from the head: (CLOCK_REALTIME ns, its first bytes), or None if
    /// the kernel has not filled it.
    fn ready(&self, k: usize) -> Option<(u64, &[u8])> {
        let h = self.frame(self.head + k);
        // SAFETY: the header lies in the mapping; tp_status is written by the kernel, so it is
        // read volatile, and the rest only after an acquire fence once it says TP_STATUS_USER.
        unsafe {
            if std::ptr::read_volatile(&(*h).tp_status) & libc::TP_STATUS_USER == 0 {
                return None;
            }
            fence(Ordering::Acquire);
            let ns = (*h).tp_sec as u64 * 1_000_000_000 + (*h).tp_nsec as u64;
            let data = std::slice::from_raw_parts(
                h.cast::<u8>().add((*h).tp_net as usize),
                (*h).tp_snaplen as usize,
            );
            Some((ns, data))
        }
    }

    /// Hand the head frame back to the kernel.
    fn release(&mut self) {
        let h = self.frame(self.head);
        fence(Ordering::Release);
        // SAFETY: the header lies in the mapping; TP_STATUS_KERNEL (0) returns the frame.
        unsafe { std::ptr::write_volatile(&mut (*h).tp_status, libc::TP_STATUS_KERNEL) };
        self.head = (self.head + 1) % self.frames;
    }

    /// When the packet starting with `ip` reached the TUN (CLOCK_REALTIME ns), consuming its
    /// frame and the unmatched ones before it; None if none of the next `LOOKAHEAD` ready
    /// frames is its own (they stay for later reads).
    pub fn stamp(&mut self, ip: &[u8]) -> Option<u64> {
        let (skip, ns) = match_frame((0..LOOKAHEAD).map_while(|k| self.ready(k)), ip)?;
        for _ in 0..=skip {
            self.release();
        }
        Some(ns)
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in open.
        unsafe { libc::munmap(self.ring.cast(), (BLOCK_BYTES * BLOCKS) as usize) };
    }
}

/// Among ready frames (oldest first), the first whose first `MATCH_BYTES` equal the packet's:
/// (its index, its time). A packet shorter than `MATCH_BYTES` matches nothing.
pub fn match_frame<'a>(
    frames: impl Iterator<Item = (u64, &'a [u8])>,
    ip: &[u8],
) -> Option<(usize, u64)> {
    let key = ip.get(..MATCH_BYTES)?;
    frames
        .enumerate()
        .find(|(_, (_, d))| d.get(..MATCH_BYTES) == Some(key))
        .map(|(i, (ns, _))| (i, ns))
}

// Classic BPF opcodes (include/uapi/linux/bpf_common.h).
const BPF_LD: u16 = 0x00;
const BPF_JMP: u16 = 0x05;
const BPF_RET: u16 = 0x06;
const BPF_B: u16 = 0x10;
const BPF_ABS: u16 = 0x20;
const BPF_JEQ: u16 = 0x10;
const BPF_K: u16 = 0x00;

fn bpf(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

fn setsockopt<T>(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: v points to a T of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as u32,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(id: u16) -> Vec<u8> {
        let mut h = vec![
            0x45,
            0,
            5,
            0xdc,
            (id >> 8) as u8,
            id as u8,
            0x40,
            0,
            64,
            6,
            0,
            0,
            10,
            77,
            1,
            2,
            10,
            77,
            200,
            2,
        ];
        h.extend_from_slice(&[0xaa; 8]);
        h
    }

    #[test]
    fn a_read_matches_its_own_frame_past_frames_the_tun_dropped() {
        let (a, b, c) = (hdr(1), hdr(2), hdr(3));
        let frames: Vec<(u64, &[u8])> = vec![(10, &a), (20, &b), (30, &c)];
        let frames = || frames.iter().copied();
        // The TUN dropped packet 1: packet 2's read skips its frame.
        assert_eq!(match_frame(frames(), &b), Some((1, 20)));
        assert_eq!(match_frame(frames(), &a), Some((0, 10)));
        // A packet with no frame among the ready ones: no stamp, nothing consumed.
        assert_eq!(match_frame(frames(), &hdr(4)), None);
        // Only the header decides: a packet differing past MATCH_BYTES still matches.
        let mut c2 = c.clone();
        c2[MATCH_BYTES] ^= 1;
        assert_eq!(match_frame(frames(), &c2), Some((2, 30)));
        assert_eq!(match_frame(frames(), &c[..MATCH_BYTES - 1]), None);
    }
}
