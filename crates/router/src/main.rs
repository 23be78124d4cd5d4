//! `aqmlab-router --config router.json`: the emulator's bottleneck router (crates/router/README.md).
//!
//! One thread, one loop: read the pending packets from the TUN device (each stamped with the
//! time the kernel handed it to the TUN, from a packet socket's ring on the device:
//! `router::tap`), run the pipeline up to now, write the packets whose
//! delivery time has come, then sleep in `ppoll` until shortly before the next due time
//! (`SPIN_NS`, polling from there within a CPU budget) or the next packet.
//! Timer slack is set to 1 ns (PR_SET_TIMERSLACK) so the sleep ends when asked. With
//! `--realtime` the thread runs under SCHED_FIFO, so busy senders on the same cores do not delay
//! it (the emulator instead starts it under `chrt -f`, which the router leaves alone).
//!
//! When the engine config's hosts have offloads (`engine.host.offloads`), every read and write
//! carries a virtio-net header: a TCP super-packet is cut into its segments before the
//! pipeline (`router::gso`), spaced at the senders' NIC rate; writes come at most once per
//! `host.rx_coalesce`, each run of a flow's due segments that GRO would merge written as one
//! super-packet (docs/emulator.md §Offloads).
//!
//! Ends at scenario time `duration + 200 ms` (the drain: packets still in the delay lines get
//! out) with `"complete": true`, or on SIGTERM/SIGINT with `"complete": false`; either way the
//! results are written atomically (temp file + rename) and the exit status is 0. A bad config
//! is one line on stderr naming the key, exit status 2, nothing written.

use std::io::{IoSlice, Write};

use router::gso::{self, Coalescer, VnetHdr};
use router::measure::write_json_atomically;
use router::pipeline::Emit;
use router::tap::Tap;
use router::tun::{monotonic_ns, realtime_ns, Tun};
use router::{Pipeline, RouterConfig};

/// Time the router keeps forwarding after the scenario's end, ns (the contract: 200 ms).
const DRAIN_NS: u64 = 200_000_000;
/// Longest single sleep, ns: bounds the reaction time to a signal that lands between the flag
/// check and `ppoll` (10 ms; the choice is ours).
const MAX_SLEEP_NS: u64 = 10_000_000;
/// Polling lead before a due time, ns: the router sleeps in `ppoll` only until this long
/// before the next due time and polls the TUN and the clock from there, since a timer wake-up
/// comes tens of µs late on a busy virtual CPU (`late_p50_ns`) and the delay lines would add
/// that to every round trip (docs/emulator.md, "What differs from the simulator"). 60 µs: the
/// value is ours.
const SPIN_NS: u64 = 60_000;
/// At most `SPIN_BUDGET_NS` of polling per `SPIN_WINDOW_NS`, then plain sleeps to the window's
/// end: at 200 Mbit/s and more the router would otherwise poll nearly all the time, and under
/// SCHED_FIFO the kernel's RT throttling (95 % of each second) would idle the link. 3 ms per
/// 10 ms: the values are ours.
const SPIN_BUDGET_NS: u64 = 3_000_000;
const SPIN_WINDOW_NS: u64 = 10_000_000;
/// A ring stamp older than this at the read is not believed (the realtime clock stepped):
/// the packet is stamped at its read and counted `unstamped` (1 s; the value is ours).
const MAX_READ_LAG_NS: u64 = 1_000_000_000;
/// Largest packet a TUN read can return: a virtio-net header and an IPv4 packet (16-bit total
/// length).
const SCRATCH_BYTES: usize = gso::VNET_HDR_LEN + 65_536;

/// Packets received per round (a super-packet's segments each count) before the due packets
/// are written: bounds how long a flood of arrivals can hold back departures (64 × ≈ 1–2 µs;
/// the value is ours). The rest is read at once in the next round, `ppoll` returning
/// immediately.
const MAX_PKTS_PER_ROUND: u64 = 64;

fn usage_error(msg: &str) -> ! {
    eprintln!("aqmlab-router: {msg}");
    std::process::exit(2);
}

/// Real-time priority `--realtime` asks for (SCHED_FIFO, 1..99): above every normal task, so
/// that senders and compilers sharing the router's core do not delay its writes; low among
/// real-time ones. The value is ours; the write lateness with and without it is in
/// bench/README.md §Router, "Real-time priority".
const RT_PRIORITY: libc::c_int = 10;

/// Whether this thread runs under a real-time policy (SCHED_FIFO or SCHED_RR), e.g. because
/// the orchestrator started it with `chrt -f`.
fn is_realtime() -> bool {
    // SAFETY: sched_getscheduler on ourselves.
    let p = unsafe { libc::sched_getscheduler(0) };
    p == libc::SCHED_FIFO || p == libc::SCHED_RR
}

/// `--realtime`: put this thread under SCHED_FIFO unless it already runs real-time (a policy
/// given from outside, such as `chrt -f 20`, is kept). A failure is reported on stderr and in
/// the results' `counters.sched_fifo`, never hidden.
fn go_realtime() {
    if is_realtime() {
        return;
    }
    let param = libc::sched_param {
        sched_priority: RT_PRIORITY,
    };
    // SAFETY: sched_setscheduler on ourselves (pid 0) with a valid param.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        eprintln!(
            "aqmlab-router: warning: --realtime: cannot use SCHED_FIFO ({}); packets will be written late whenever the CPU is busy",
            std::io::Error::last_os_error()
        );
    }
}

/// `--config FILE` and `--realtime`.
fn load_config() -> (RouterConfig, bool) {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let realtime = match args.iter().position(|a| a == "--realtime") {
        Some(i) => {
            args.remove(i);
            true
        }
        None => false,
    };
    let path = match args.as_slice() {
        [flag, p] if flag == "--config" => p.clone(),
        [flag] if flag == "--help" || flag == "-h" => {
            println!("usage: aqmlab-router --config router.json [--realtime]   (see crates/router/README.md)");
            std::process::exit(0);
        }
        _ => usage_error("usage: aqmlab-router --config router.json [--realtime]"),
    };
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| usage_error(&format!("--config: cannot read {path}: {e}")));
    (
        RouterConfig::from_json(&text).unwrap_or_else(|e| usage_error(&e)),
        realtime,
    )
}

/// Writes due packets to the TUN device. With virtio-net headers, a run of consecutive packets
/// that the receiver's GRO would merge ([`Coalescer`]) goes out as one super-packet: its
/// header, then each segment's payload, gathered with `writev`; any other packet alone with an
/// empty header (its checksums are complete).
struct Writer {
    hdr: Vec<u8>,
    errors: u64,
    /// The receiver's `gro_max_size`: a coalesced write stays below it.
    gro_max_bytes: usize,
}

/// The polling allowance of the current `SPIN_WINDOW_NS` (monotonic ns).
#[derive(Default)]
struct Spin {
    window_start: u64,
    spent: u64,
    /// When the poll in progress began.
    since: Option<u64>,
}

impl Spin {
    /// At `now`: count the poll that ends here, and return how long before the next due
    /// time to start polling (`SPIN_NS`, or 0 once the window's budget is spent).
    fn lead(&mut self, now: u64) -> u64 {
        if now >= self.window_start + SPIN_WINDOW_NS {
            self.window_start = now;
            self.spent = 0;
        }
        if let Some(since) = self.since.take() {
            self.spent += now - since;
        }
        if self.spent < SPIN_BUDGET_NS {
            SPIN_NS
        } else {
            0
        }
    }

    /// A poll begins at `now` (the router goes round its loop instead of sleeping).
    fn polling(&mut self, now: u64) {
        self.since = Some(now);
    }
}

/// Transmission time of `bits` at the NIC rate, ns (0 without offloads).
fn nic_ns(nic_rate: Option<u64>, bits: u64) -> u64 {
    nic_rate.map_or(0, |r| (bits as u128 * 1_000_000_000 / r as u128) as u64)
}

impl Writer {
    fn new(gro_max_bytes: usize) -> Writer {
        Writer {
            hdr: Vec::new(),
            errors: 0,
            gro_max_bytes,
        }
    }

    fn write_all(&mut self, tun: &Tun, due: &mut [Emit], c: &mut router::measure::Counters) {
        let plain = VnetHdr::default().bytes();
        let mut co = Coalescer::new(self.gro_max_bytes);
        let mut i = 0;
        while i < due.len() {
            let mut j = i + 1;
            if tun.vnet_hdr && co.start(&due[i].buf) {
                while j < due.len()
                    && due[j].flow == due[i].flow
                    && co.push(&due[i].buf, &due[j - 1].buf, &due[j].buf)
                {
                    j += 1;
                }
            }
            let r = if j - i > 1 {
                let v = co
                    .super_header(&due[i].buf, &due[j - 1].buf, &mut self.hdr)
                    .bytes();
                let hl = self.hdr.len();
                let mut parts: Vec<IoSlice<'_>> = Vec::with_capacity(2 + j - i);
                parts.push(IoSlice::new(&v));
                parts.push(IoSlice::new(&self.hdr));
                for e in &due[i..j] {
                    let total = u16::from_be_bytes([e.buf[2], e.buf[3]]) as usize;
                    parts.push(IoSlice::new(&e.buf[hl..total]));
                }
                c.gso_packets_out += 1;
                tun.write_parts(&parts)
            } else if tun.vnet_hdr {
                tun.write_parts(&[IoSlice::new(&plain), IoSlice::new(&due[i].buf)])
            } else {
                tun.write(&due[i].buf)
            };
            c.writes += 1;
            if r.is_err() {
                self.errors += (j - i) as u64;
            }
            i = j;
        }
    }
}

fn main() {
    let (cfg, realtime) = load_config();
    let mut pipe = Pipeline::new(&cfg.engine, cfg.class_sources.clone())
        .unwrap_or_else(|e| usage_error(&e))
        .with_ect1_classes(&cfg.ect1_classes);
    router::stop::install();
    // SAFETY: prctl with constant arguments.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    if realtime {
        go_realtime();
    }
    let host = cfg.offloads().cloned();
    let tun = match Tun::open(&cfg.tun, host.is_some()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!(
                "aqmlab-router: tun: cannot open {:?}: {e} (needs CAP_NET_ADMIN and /dev/net/tun)",
                cfg.tun
            );
            std::process::exit(1);
        }
    };
    let mut tap = match Tap::open(&cfg.tun) {
        Ok(t) => t,
        Err(e) => {
            eprintln!(
                "aqmlab-router: tap: cannot open a packet socket on {:?}: {e} (needs CAP_NET_RAW)",
                cfg.tun
            );
            std::process::exit(1);
        }
    };
    let t0 = cfg.t0_monotonic_ns.unwrap_or_else(monotonic_ns);
    // Scenario time; before t0 it is 0 (packets that early count at time 0).
    let scenario_now = || monotonic_ns().saturating_sub(t0);
    let end = cfg.engine.duration_ns + DRAIN_NS;
    println!("ready");
    let _ = std::io::stdout().flush();

    let mut scratch = vec![0u8; SCRATCH_BYTES];
    let mut segs: Vec<Vec<u8>> = Vec::new();
    let mut due: Vec<Emit> = Vec::new();
    let mut out = Writer::new(host.as_ref().map_or(65_536, |h| h.gro_max_bytes as usize));
    let mut complete = true;
    let mut readable = true;
    let mut polls: u64 = 0;
    // With offloads: after a round that wrote packets, the next write waits the receiver's
    // interrupt moderation (`host.rx_coalesce`), so the departures due meanwhile reach it
    // together, coalesced as its GRO would (arrivals still wake the router at once).
    let batch_ns = host.as_ref().map_or(0, |h| h.rx_coalesce_ns);
    // A burst leaves the sender's NIC as back-to-back packets at `host.nic_rate`: the router
    // reads the super-packet whole, and stamps segment k at its arrival plus the NIC's
    // transmission time of segments 0..=k.
    let nic_rate = host.as_ref().map(|h| h.nic_rate_bps);
    let mut spin = Spin::default();
    // Read time − arrival time (the ring's stamp) of each packet, and the reads with no stamp.
    let mut read_lag = router::measure::Lateness::default();
    let mut unstamped: u64 = 0;
    'run: loop {
        // A plugin discipline whose call failed drops every arrival from then on: end the run
        // with its error (module, function, time), writing no results.
        if let Some(e) = pipe.discipline_error() {
            eprintln!("aqmlab-router: {e}");
            std::process::exit(1);
        }
        if router::stop::requested() {
            complete = false;
            break;
        }
        // 1. What is pending (until MAX_PKTS_PER_ROUND), each packet stamped with its arrival
        // at the TUN; a super-packet's segments one NIC transmission apart from it.
        let received = pipe.counters.rx_pkts;
        // CLOCK_REALTIME − CLOCK_MONOTONIC, to put the ring's stamps on the router's clock.
        let real_minus_mono = realtime_ns().wrapping_sub(monotonic_ns());
        while readable && pipe.counters.rx_pkts - received < MAX_PKTS_PER_ROUND {
            let n = match tun.read_raw(&mut scratch) {
                Ok(Some(n)) => n,
                Ok(None) => break,
                Err(e) => {
                    // The device went away or broke: stop, and say the results are partial.
                    eprintln!("aqmlab-router: tun read: {e}; stopping");
                    complete = false;
                    break 'run;
                }
            };
            let read_at = scenario_now();
            // The packet's arrival at the TUN, in scenario time; the read time if the ring
            // has no stamp for it, or one older than MAX_READ_LAG_NS (a realtime clock step).
            // (A read shorter than its virtio-net header has no IP header to match: unstamped,
            // then counted `malformed` below.)
            let ip = scratch
                .get(if tun.vnet_hdr { gso::VNET_HDR_LEN } else { 0 }..n)
                .unwrap_or(&[]);
            let now = match tap.stamp(ip).map(|rt| {
                rt.wrapping_sub(real_minus_mono)
                    .saturating_sub(t0)
                    .min(read_at)
            }) {
                Some(at) if read_at - at <= MAX_READ_LAG_NS => at,
                _ => {
                    unstamped += 1;
                    read_at
                }
            };
            read_lag.record(read_at - now, now);
            if !tun.vnet_hdr {
                let mut buf = pipe.take_buf();
                buf.extend_from_slice(&scratch[..n]);
                pipe.receive(buf, now);
                continue;
            }
            let Some(h) = VnetHdr::parse(&scratch[..n]) else {
                pipe.counters.malformed += 1;
                continue;
            };
            let pkt = &mut scratch[gso::VNET_HDR_LEN..n];
            if h.gso_type == gso::GSO_NONE {
                // A partial checksum is completed here, as the sender's NIC would have; one
                // whose offsets lie outside the packet is forwarded as it is, counted
                // `malformed` (the receiver will drop it).
                if h.flags & gso::F_NEEDS_CSUM != 0
                    && !gso::complete_checksum(pkt, h.csum_start as usize, h.csum_offset as usize)
                {
                    pipe.counters.malformed += 1;
                }
                let mut buf = pipe.take_buf();
                buf.extend_from_slice(pkt);
                let at = now + nic_ns(nic_rate, buf.len() as u64 * 8);
                pipe.receive(buf, at);
                continue;
            }
            pipe.counters.gso_packets_in += 1;
            let r = if h.gso_type & !gso::GSO_ECN == gso::GSO_TCPV4 {
                gso::segment(pkt, h.gso_size, || pipe.take_buf(), |s| segs.push(s))
            } else {
                Err(gso::Refused::GsoType(h.gso_type))
            };
            match r {
                Ok(k) => pipe.counters.gso_segments_in += k as u64,
                Err(_) => pipe.counters.gso_refused += 1,
            }
            let mut bits = 0;
            for s in segs.drain(..) {
                bits += s.len() as u64 * 8;
                pipe.receive(s, now + nic_ns(nic_rate, bits));
            }
        }
        // 2. The link up to now, then every packet due, written (back-to-back segments of one
        // flow as one super-packet when offloading).
        let now = scenario_now();
        pipe.advance(now);
        while let Some(e) = pipe.pop_due(now) {
            due.push(e);
        }
        let wrote = !due.is_empty();
        if wrote {
            out.write_all(&tun, &mut due, &mut pipe.counters);
            let t = scenario_now();
            for e in due.drain(..) {
                pipe.lateness.record(t.saturating_sub(e.due_ns), e.due_ns);
                pipe.recycle(e.buf);
            }
        }
        if now >= end {
            break;
        }
        // 3. Sleep until shortly before the next due time, a packet, or a signal; poll the
        // rest.
        let mut wake = pipe.next_wakeup().unwrap_or(end).min(end);
        if wrote {
            wake = wake.max(now + batch_ns);
        }
        // On CLOCK_MONOTONIC: before t0 scenario time stands at 0, and a wake-up at scenario
        // time w is t0 + w.
        let mono = monotonic_ns();
        let lead = spin.lead(mono);
        if t0 + wake <= mono + lead {
            if t0 + wake > mono {
                spin.polling(mono);
            }
            readable = true;
            continue;
        }
        let d = (t0 + wake - lead - mono).min(MAX_SLEEP_NS);
        let ts = libc::timespec {
            tv_sec: (d / 1_000_000_000) as libc::time_t,
            tv_nsec: (d % 1_000_000_000) as libc::c_long,
        };
        let mut pfd = libc::pollfd {
            fd: tun.raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        polls += 1;
        // SAFETY: one pollfd, a valid timespec, no signal mask change.
        let r = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        // Read only when there is something to read (or ppoll failed: try anyway).
        readable = r != 0;
    }
    let mut report = pipe.report(complete);
    report["counters"]["write_errors"] = out.errors.into();
    report["counters"]["polls"] = polls.into();
    report["counters"]["read_lag_p50_ns"] = read_lag.quantile_ns(0.5).into();
    report["counters"]["read_lag_p99_ns"] = read_lag.quantile_ns(0.99).into();
    report["counters"]["read_lag_max_ns"] = read_lag.max_ns.into();
    report["counters"]["unstamped"] = unstamped.into();
    report["counters"]["sched_fifo"] = is_realtime().into();
    // CPU time of the process (user, system: the kernel work of reads and writes, including
    // the forwarding a TUN write triggers in this context), for the cost per packet.
    // SAFETY: getrusage writes one rusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    report["counters"]["cpu_user_ns"] = ns(ru.ru_utime).into();
    report["counters"]["cpu_sys_ns"] = ns(ru.ru_stime).into();
    if let Err(e) = write_json_atomically(&cfg.output, &report) {
        eprintln!(
            "aqmlab-router: output: cannot write {}: {e}",
            cfg.output.display()
        );
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polling_stops_when_the_window_budget_is_spent() {
        let mut spin = Spin::default();
        assert_eq!(spin.lead(0), SPIN_NS);
        // 2 ms of polling: 1 ms of the 3 ms budget left, so still a lead.
        spin.polling(0);
        assert_eq!(spin.lead(2_000_000), SPIN_NS);
        // 1.5 ms more: 3.5 ms spent, the rest of the window sleeps to each due time.
        spin.polling(2_000_000);
        assert_eq!(spin.lead(3_500_000), 0);
        assert_eq!(spin.lead(9_999_999), 0);
        // Sleeping costs nothing; a new window starts with the whole budget.
        assert_eq!(spin.lead(10_000_000), SPIN_NS);
    }
}
