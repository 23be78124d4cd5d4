//! The end hosts' offloads (`[host]` with `offloads`, docs/model.md "Host model"): the sender's
//! NIC, which puts each TSO/GSO burst on the wire as back-to-back MTU packets at its line rate,
//! and the receiver's GRO, which coalesces a flow's back-to-back segments per NAPI poll so
//! that TCP receives, and acknowledges, them as one packet.
//!
//! Both are per flow (each flow has its own sender and receiver host in the simulator). The
//! TCP side — TSO autosizing and TCP Small Queues — is in `tcp::output`; the receiver's one
//! ACK decision per GRO packet is `tcp::Receiver::on_gro`. [`Stalls`] are the times the
//! hosts' CPU is away (`[host] stall`).

use std::collections::VecDeque;
use std::ops::Range;

use link::Serializer;
use rand_core::Rng as _;

use crate::engine::Nanos;
use crate::packet::{flags, DataPkt, MSS_BYTES, TCP_IP_HEADER_BYTES};

/// A sender's NIC: a FIFO drained at the line rate, exact over a busy period
/// ([`link::Serializer`], as the bottleneck). What TCP hands over at one instant (its skbs of
/// one `tcp_write_xmit`) is ready for the NIC only after the host's timing noise, one delay
/// drawn uniformly from [0, `jitter_ns`] (`[host] jitter`), so a TSO burst still leaves back
/// to back; packets ready before the ones ahead of them wait for them.
#[derive(Debug)]
pub struct Nic {
    /// Packets and the time each is ready, the one on the wire (or waiting to be ready) first.
    queue: VecDeque<(DataPkt, Nanos)>,
    serializer: Serializer,
    jitter_ns: Nanos,
    rng: aqm::Rng,
    /// The last hand-over's time and ready time.
    handed: Option<(Nanos, Nanos)>,
}

impl Nic {
    pub fn new(rate_bps: u64, jitter_ns: Nanos, rng: aqm::Rng) -> Self {
        Nic {
            queue: VecDeque::new(),
            serializer: Serializer::new(rate_bps),
            jitter_ns,
            rng,
            handed: None,
        }
    }

    /// Queue a packet at `now`. If the NIC was idle it sends it once it is ready: returns when
    /// that transmission ends.
    #[inline]
    pub fn push(&mut self, pkt: DataPkt, now: Nanos) -> Option<Nanos> {
        let ready = match self.handed {
            _ if self.jitter_ns == 0 => now,
            Some((at, ready)) if at == now => ready,
            _ => now + self.rng.next_u64() % (self.jitter_ns + 1),
        };
        self.handed = Some((now, ready));
        self.queue.push_back((pkt, ready));
        (self.queue.len() == 1).then(|| self.start(now, ready, pkt.wire_len))
    }

    /// The head's transmission ended at `now`: it leaves, and the next (if any) starts when it
    /// is ready; returns the packet and when the next transmission ends.
    #[inline]
    pub fn finish(&mut self, now: Nanos) -> (DataPkt, Option<Nanos>) {
        let (pkt, _) = self
            .queue
            .pop_front()
            .expect("NIC transmission done with an empty queue");
        match self.queue.front() {
            Some(&(next, ready)) => (pkt, Some(self.start(now, ready, next.wire_len))),
            None => {
                self.serializer.idle();
                (pkt, None)
            }
        }
    }

    /// When a packet of `wire_len` bytes, ready at `ready`, ends its transmission if the wire
    /// is free from `now`; a wait for it ends the busy period.
    fn start(&mut self, now: Nanos, ready: Nanos, wire_len: u32) -> Nanos {
        if ready > now {
            self.serializer.idle();
        }
        now.max(ready) + self.serializer.tx_ns(wire_len)
    }

    /// Packets still at the NIC, the one on the wire first.
    pub fn iter(&self) -> impl Iterator<Item = &DataPkt> {
        self.queue.iter().map(|(p, _)| p)
    }
}

/// A receiver's GRO under interrupt moderation: packets wait for the next NAPI poll, which
/// comes at once if the last one is at least `interval` ago, else `interval` after it (an
/// interrupt throttle, as `ethtool -C rx-usecs`); the poll merges them (dev_gro_receive) and
/// flushes every held packet at its end (napi_complete_done → napi_gro_flush).
#[derive(Debug)]
pub struct Gro {
    pending: Vec<DataPkt>,
    poll_at: Option<Nanos>,
    last_poll: Option<Nanos>,
    interval_ns: Nanos,
    max_bytes: u32,
}

impl Gro {
    pub fn new(interval_ns: Nanos, max_bytes: u32) -> Self {
        Gro {
            pending: Vec::with_capacity(8),
            poll_at: None,
            last_poll: None,
            interval_ns,
            max_bytes,
        }
    }

    /// A packet reaches the receiving NIC at `now`; returns when to poll, if no poll is due yet.
    #[inline]
    pub fn arrive(&mut self, pkt: DataPkt, now: Nanos) -> Option<Nanos> {
        self.pending.push(pkt);
        if self.poll_at.is_some() {
            return None;
        }
        let at = self
            .last_poll
            .map_or(now, |l| now.max(l + self.interval_ns));
        self.poll_at = Some(at);
        Some(at)
    }

    /// The poll at `now`: the packets that arrived since the last one, and the GRO packets
    /// they form (ranges into them, in order) in `units`. Call [`Gro::done`] after using them.
    pub fn poll(&mut self, now: Nanos, units: &mut Vec<Range<usize>>) -> &[DataPkt] {
        self.poll_at = None;
        self.last_poll = Some(now);
        coalesce(&self.pending, self.max_bytes, units);
        &self.pending
    }

    /// The poll's packets were delivered.
    pub fn done(&mut self) {
        self.pending.clear();
    }

    /// Packets waiting for the poll.
    pub fn iter(&self) -> impl Iterator<Item = &DataPkt> {
        self.pending.iter()
    }
}

/// GRO's merge rules for one flow's packets in arrival order, as consecutive ranges. A packet
/// joins the held one when (tcp_gro_receive, inet_gro_receive, skb_gro_receive):
/// - its sequence follows on (`(th2->seq + skb_gro_len(p)) ^ th->seq` flushes otherwise);
/// - its IP ToS, hence ECN codepoint, equals the held packet's (`iph->tos ^ iph2->tos`): CE
///   is never merged with not-CE;
/// - its TCP options, hence the timestamp, are the same (the options compared word by word);
/// - it carries no CWR (`flags & TCP_FLAG_CWR` flushes: CWR starts a new packet);
/// - it is no longer than the held packet's MSS (`(len - 1) >= mss`), and the held packet did
///   not end with a short segment (`len < mss` flushes after merging) or with PSH (merged, then
///   flushed: every GSO packet's last segment carries PSH, so one GRO packet never spans two
///   of the sender's skbs);
/// - the merged IP packet stays below the GRO limit (`p->len + len >= gro_max_size` flushes).
pub fn coalesce(pkts: &[DataPkt], max_bytes: u32, units: &mut Vec<Range<usize>>) {
    units.clear();
    let mut start = 0;
    while start < pkts.len() {
        let first = &pkts[start];
        let mss = first.payload;
        let mut ip_len = first.payload + TCP_IP_HEADER_BYTES;
        let mut end = start + 1;
        let mut closed = first.payload < MSS_BYTES || first.flags & flags::PSH != 0;
        while !closed && end < pkts.len() {
            let (prev, p) = (&pkts[end - 1], &pkts[end]);
            let joins = p.seq == prev.seq + 1
                && p.ecn == first.ecn
                && p.tsval == first.tsval
                && p.flags & flags::CWR == 0
                && p.payload <= mss
                && ip_len + p.payload < max_bytes;
            if !joins {
                break;
            }
            ip_len += p.payload;
            closed = p.payload < mss || p.flags & flags::PSH != 0;
            end += 1;
        }
        units.push(start..end);
        start = end;
    }
}

/// When the end hosts' CPU is away (`[host] stall`, `stall_every`): windows of `stall_ns`
/// whose starts follow a Poisson process of mean interval `stall_every_ns`, drawn for the
/// whole run up front from their own stream. The world holds back, to a window's end,
/// everything that would run on a host inside it (docs/model.md, "Host stalls").
#[derive(Debug, Default)]
pub struct Stalls {
    /// (start, end) of each window, in order, disjoint.
    windows: Vec<(Nanos, Nanos)>,
}

impl Stalls {
    /// The windows up to `until_ns`; none when `stall_ns` is 0.
    pub fn new(stall_ns: Nanos, every_ns: Nanos, until_ns: Nanos, rng: &mut aqm::Rng) -> Stalls {
        let mut windows = Vec::new();
        if stall_ns == 0 {
            return Stalls { windows };
        }
        let mut t = 0.0f64;
        loop {
            // Exponential gaps by inversion, as the workloads' Poisson arrivals (world::flow_plan).
            t += -(1.0 - aqm::uniform01(rng)).ln() * every_ns as f64;
            let start = (t as Nanos).max(windows.last().map_or(0, |w: &(Nanos, Nanos)| w.1));
            if start >= until_ns {
                return Stalls { windows };
            }
            windows.push((start, start + stall_ns));
        }
    }

    /// When something due at `t` on a host runs: at `t`, or at the end of the stall `t` falls in.
    #[inline]
    pub fn release(&self, t: Nanos) -> Nanos {
        let k = self.windows.partition_point(|w| w.0 <= t);
        match k.checked_sub(1).map(|i| self.windows[i]) {
            Some((_, end)) if t < end => end,
            _ => t,
        }
    }

    #[cfg(test)]
    pub fn windows(&self) -> &[(Nanos, Nanos)] {
        &self.windows
    }

    /// Given windows (sorted, disjoint): for tests.
    #[cfg(test)]
    pub fn from_windows(windows: Vec<(Nanos, Nanos)>) -> Stalls {
        Stalls { windows }
    }
}

#[cfg(test)]
// The GRO packets of a poll are ranges into its packets: a poll of one packet is `[0..n]`, a
// one-element array of ranges, which is what the tests mean.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;
    use aqm::Ecn;

    fn seg(seq: u32) -> DataPkt {
        DataPkt {
            flow: 0,
            seq,
            payload: MSS_BYTES,
            wire_len: MSS_BYTES + TCP_IP_HEADER_BYTES,
            ecn: Ecn::Ect0,
            flags: 0,
            hop: 0,
            enqueue_ns: 0,
            value: 0,
            tsval: 7,
        }
    }

    fn units(pkts: &[DataPkt], max: u32) -> Vec<Range<usize>> {
        let mut u = Vec::new();
        coalesce(pkts, max, &mut u);
        u
    }

    #[test]
    fn contiguous_alike_segments_merge_and_each_flush_rule_splits() {
        let run: Vec<DataPkt> = (10..15).map(seg).collect();
        assert_eq!(units(&run, 65_536), [0..5]);
        // A gap in sequence (segment 12 lost): 10, 11 | 13, 14.
        let gap = [seg(10), seg(11), seg(13), seg(14)];
        assert_eq!(units(&gap, 65_536), [0..2, 2..4]);
        // CE on 12 and 13 only: never merged with not-CE, in either direction.
        let mut ce = run.clone();
        ce[2].ecn = Ecn::Ce;
        ce[3].ecn = Ecn::Ce;
        assert_eq!(units(&ce, 65_536), [0..2, 2..4, 4..5]);
        // A new millisecond of the sender's clock (another TSval) starts a new packet.
        let mut ts = run.clone();
        ts[3].tsval = 8;
        ts[4].tsval = 8;
        assert_eq!(units(&ts, 65_536), [0..3, 3..5]);
        // CWR on 13 flushes what is held; 13 heads the next packet and 14 joins it.
        let mut cwr = run.clone();
        cwr[3].flags = flags::CWR;
        assert_eq!(units(&cwr, 65_536), [0..3, 3..5]);
        // PSH on 12 (the last segment of a sender's skb): merged, then the packet ends.
        let mut psh = run.clone();
        psh[2].flags = flags::PSH;
        assert_eq!(units(&psh, 65_536), [0..3, 3..5]);
        // A short segment (the tail of a finite flow) is merged, then ends the packet.
        let mut short = run.clone();
        short[2].payload = 500;
        assert_eq!(units(&short, 65_536), [0..3, 3..5]);
    }

    #[test]
    fn the_gro_limit_caps_a_packet_at_45_full_segments() {
        // 52 + n·1448 < 65 536 ⇔ n ≤ 45 (52 + 45·1448 = 65 212; 46 segments make 66 660).
        let run: Vec<DataPkt> = (0..100).map(seg).collect();
        assert_eq!(units(&run, 65_536), [0..45, 45..90, 90..100]);
        // A limit of one MTU (1500 B) merges nothing: 1500 + 1448 ≥ 1500.
        assert_eq!(units(&run[..3], 1500), [0..1, 1..2, 2..3]);
    }

    #[test]
    fn polls_come_at_most_once_per_interval() {
        let mut g = Gro::new(50_000, 65_536);
        let mut u = Vec::new();
        // Idle: the first arrival is polled at once.
        assert_eq!(g.arrive(seg(0), 1_000), Some(1_000));
        assert_eq!(g.poll(1_000, &mut u).len(), 1);
        g.done();
        // Arrivals every 12 µs (1500 B at 1 Gbit/s) after it wait for 1 000 + 50 000 ns: four
        // of them (at 13, 25, 37 and 49 µs) make one packet.
        assert_eq!(g.arrive(seg(1), 13_000), Some(51_000));
        for (k, t) in [(2, 25_000), (3, 37_000), (4, 49_000)] {
            assert_eq!(g.arrive(seg(k), t), None);
        }
        assert_eq!(g.poll(51_000, &mut u).len(), 4);
        assert_eq!(u, [0..4]);
        g.done();
        // After a pause longer than the interval the next arrival is polled at once again.
        assert_eq!(g.arrive(seg(5), 200_000), Some(200_000));
    }

    #[test]
    fn the_hosts_timing_noise_delays_each_hand_over_as_a_whole_and_keeps_the_order() {
        // 10 Gbit/s (1200 ns per 1500 B packet), jitter 100 µs. A burst of 30 handed over at 0
        // shares one ready time r in [0, 100 µs] and leaves back to back: packet k at
        // r + (k + 1)·1200 ns. A second hand-over of 20 at 10 µs draws its own ready time r'
        // and starts at max(r + 36 µs, r'), back to back again.
        let (jitter, tx) = (100_000, 1_200);
        let mut nic = Nic::new(10_000_000_000, jitter, aqm::rng_from_seed(7));
        let mut end = nic.push(seg(0), 0);
        for k in 1..30 {
            assert_eq!(nic.push(seg(k), 0), None);
        }
        let r = end.unwrap() - tx;
        assert!(r <= jitter);
        let mut departures = Vec::new();
        let mut handed_second = false;
        while let Some(t) = end {
            if !handed_second && t >= 10_000 {
                for k in 30..50 {
                    assert_eq!(nic.push(seg(k), 10_000), None);
                }
                handed_second = true;
            }
            let (p, next) = nic.finish(t);
            departures.push((p.seq, t));
            end = next;
        }
        assert!(handed_second);
        assert_eq!(
            departures.iter().map(|d| d.0).collect::<Vec<_>>(),
            (0..50).collect::<Vec<_>>()
        );
        for (k, &(_, t)) in departures[..30].iter().enumerate() {
            assert_eq!(t, r + (k as u64 + 1) * tx);
        }
        let start2 = departures[30].1 - tx;
        assert!(start2 >= departures[29].1 && start2 <= (10_000 + jitter).max(departures[29].1));
        assert!(departures[30..].windows(2).all(|w| w[1].1 - w[0].1 == tx));
        // Same seed, same draw (determinism); jitter 0 is the noise-free NIC.
        let mut twin = Nic::new(10_000_000_000, jitter, aqm::rng_from_seed(7));
        assert_eq!(twin.push(seg(0), 0), Some(r + tx));
        let mut exact = Nic::new(10_000_000_000, 0, aqm::rng_from_seed(7));
        assert_eq!(exact.push(seg(0), 0), Some(tx));
    }

    #[test]
    fn a_burst_leaves_the_nic_back_to_back_at_its_line_rate() {
        // 10 Gbit/s: a 1500 B packet takes 1500·8/1e10 s = 1200 ns; three queued at t = 5000
        // leave at 6200, 7400 and 8600.
        let mut nic = Nic::new(10_000_000_000, 0, aqm::rng_from_seed(1));
        assert_eq!(nic.push(seg(0), 5_000), Some(6_200));
        assert_eq!(nic.push(seg(1), 5_000), None);
        assert_eq!(nic.push(seg(2), 5_000), None);
        let (p, next) = nic.finish(6_200);
        assert_eq!((p.seq, next), (0, Some(7_400)));
        let (p, next) = nic.finish(7_400);
        assert_eq!((p.seq, next), (1, Some(8_600)));
        let (p, next) = nic.finish(8_600);
        assert_eq!((p.seq, next), (2, None));
        // At 3 Gbit/s a 1500 B packet takes exactly 4000 ns.
        let mut nic = Nic::new(3_000_000_000, 0, aqm::rng_from_seed(1));
        assert_eq!(nic.push(seg(0), 0), Some(4_000));
        nic.push(seg(1), 0);
        assert_eq!(nic.finish(4_000).1, Some(8_000));
    }

    #[test]
    fn a_stall_holds_what_falls_in_it_until_its_end() {
        let s = Stalls::from_windows(vec![(1_000, 1_500), (4_000, 4_500)]);
        assert_eq!(
            [0, 999, 1_000, 1_200, 1_499, 1_500, 3_999, 4_000, 4_499, 4_500].map(|t| s.release(t)),
            [0, 999, 1_500, 1_500, 1_500, 1_500, 3_999, 4_500, 4_500, 4_500]
        );
        assert_eq!(Stalls::default().release(1_200), 1_200);
    }

    #[test]
    fn stalls_start_as_a_poisson_process_of_the_given_mean_interval() {
        // 1 ms stalls every 100 ms on average over 1000 s: about 10 000 windows, whose gaps
        // (start to start) are exponential with mean 100 ms, so their mean is within 3 % of it
        // with near certainty (standard error 1 %).
        let mut rng = aqm::rng_from_seed(7);
        let s = Stalls::new(1_000_000, 100_000_000, 1_000_000_000_000, &mut rng);
        let w = s.windows();
        assert!(w.iter().all(|&(a, b)| b - a == 1_000_000));
        assert!(w.windows(2).all(|p| p[0].1 <= p[1].0), "windows overlap");
        let mean_gap = (w[w.len() - 1].0 - w[0].0) as f64 / (w.len() - 1) as f64;
        assert!(
            (mean_gap / 100e6 - 1.0).abs() < 0.03,
            "mean gap {mean_gap} ns"
        );
        assert!(Stalls::new(0, 0, 1_000_000_000, &mut rng)
            .windows()
            .is_empty());
    }
}
