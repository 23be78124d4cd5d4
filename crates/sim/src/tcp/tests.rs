//! Packet-level tests of the TCP model against Linux's behaviour (net/ipv4/tcp_input.c,
//! tcp_output.c and the RFCs they implement), and the helpers the tests of the sender's parts
//! share. Each test scripts an exchange between a sender or a receiver and hand-made packets,
//! with the expected values worked out in comments.

use aqm::Ecn;

use crate::cc::{CaState, CcConfig};
use crate::engine::{Event, Nanos, Scheduler};
use crate::packet::{ack_wire_len, flags, AckPkt, DataPkt, MAX_SACK_BLOCKS, MSS_BYTES};
use crate::tcp::{EcnFeedback, Receiver, Sender, SenderConfig};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

pub(super) const MS: Nanos = 1_000_000;

fn cc(name: &str) -> crate::cc::AnyCc {
    let cfg: CcConfig = serde_json::from_str(&format!("{{\"name\": \"{name}\"}}")).unwrap();
    cfg.build(0)
}

pub(super) fn sender(name: &str, rtt_ns: Nanos, ecn: bool) -> Sender {
    Sender::new(
        &SenderConfig {
            flow: 0,
            size_bytes: None,
            ecn,
            fq_pacing: false,
            handshake_rtt_ns: rtt_ns,
            tso: None,
        },
        cc(name),
    )
}

pub(super) fn ack(n: u32, sack: &[(u32, u32)], ece: bool) -> AckPkt {
    let mut s = [(0, 0); MAX_SACK_BLOCKS];
    s[..sack.len()].copy_from_slice(sack);
    AckPkt {
        flow: 0,
        ack: n,
        sack: s,
        n_sack: sack.len() as u8,
        ece,
        ce_count: 0,
        tsecr: 0,
        wire_len: ack_wire_len(sack.len()),
        hop: 0,
        enqueue_ns: 0,
    }
}

fn data(seq: u32, ecn: Ecn, f: u8) -> DataPkt {
    DataPkt {
        flow: 0,
        seq,
        payload: MSS_BYTES,
        wire_len: 1500,
        ecn,
        flags: f,
        hop: 0,
        enqueue_ns: 0,
        value: 0,
        tsval: 1,
    }
}

/// Advance the scheduler to `t`, firing the sender's timers due until then.
pub(super) fn run_sender_timers(
    s: &mut Sender,
    sched: &mut Scheduler,
    t: Nanos,
    out: &mut Vec<DataPkt>,
) {
    while let Some((_, ev)) = sched.pop_until(t) {
        match ev {
            Event::SenderTimer(_) => s.on_xmit_timer(sched, out),
            Event::PacingTimer(_) => s.on_pacing_timer(sched, out),
            _ => {}
        }
    }
    sched.advance_to(t);
}

/// Move the clock to `t` without running what is due before it (the test drives the sender by
/// hand; timers it armed meanwhile are discarded, as if they had been cancelled).
pub(super) fn skip_to(sched: &mut Scheduler, t: Nanos) {
    while sched.pop_until(t).is_some() {}
    sched.advance_to(t);
}

pub(super) fn seqs(out: &[DataPkt]) -> Vec<u32> {
    out.iter().map(|p| p.seq).collect()
}

// ---------------------------------------------------------------------------------------------
// Sender: initial window and slow start
// ---------------------------------------------------------------------------------------------

#[test]
fn initial_window_is_ten_segments() {
    // TCP_INIT_CWND = 10 (RFC 6928; include/net/tcp.h).
    let mut sched = Scheduler::new();
    let mut s = sender("reno", 10 * MS, false);
    let mut out = vec![];
    s.start(&mut sched, &mut out);
    assert_eq!(seqs(&out), (0..10).collect::<Vec<_>>());
    assert!(out
        .iter()
        .all(|p| p.wire_len == 1500 && p.payload == 1448 && p.ecn == Ecn::NotEct));
}

#[test]
fn slow_start_doubles_per_round_with_delayed_acks() {
    // Appropriate Byte Counting (RFC 3465) without a per-ACK limit (tcp_cong.c
    // `tcp_slow_start`: cwnd + acked): an ACK for 2 segments grows cwnd by 2, so the
    // 5 ACKs of the first round take cwnd from 10 to 20, and each releases 4 segments.
    let mut sched = Scheduler::new();
    let mut s = sender("reno", 10 * MS, false);
    let mut out = vec![];
    s.start(&mut sched, &mut out);
    skip_to(&mut sched, 10 * MS);
    out.clear();
    for k in 1..=5 {
        s.on_ack(&ack(2 * k, &[], false), &mut sched, &mut out);
    }
    assert_eq!(s.tp.cwnd, 20);
    assert_eq!(out.len(), 20);
    assert_eq!(out[0].seq, 10);
    assert_eq!(s.inflight(), 20);
}

// ---------------------------------------------------------------------------------------------
// Sender: recovery and PRR
// ---------------------------------------------------------------------------------------------

#[test]
fn prr_paces_recovery_down_to_ssthresh_and_snaps_cwnd_at_exit() {
    // cwnd 10, segment 0 lost, segments 1..9 SACKed one by one (worked by hand, RFC 6937 and
    // tcp_cwnd_reduction):
    // - SACK [1,2) and [1,3): Disorder; each SACKed segment leaves the pipe, so new segments
    //   10 and 11 go out (inflight = packets_out − sacked_out < cwnd).
    // - SACK [1,4): RACK marks 0 lost; Recovery with prior_cwnd 10, ssthresh 5, high_seq 12;
    //   inflight = 12 − 3 − 1 = 8 > ssthresh, so PRR sends ⌈5·prr_delivered/10⌉ − prr_out:
    //   delivered 1 → 1 (the retransmission of 0), 2 → 0, 3 → 1 (segment 12), 4 → 0,
    //   5 → 1 (segment 13), 6 → 0; at the 7th delivery inflight = 14 − 9 − 1 + 1 = 5 =
    //   ssthresh and the slow-start bound allows min(delta = 0, ·) = 0.
    // - ACK 12 passes high_seq: Recovery ends with cwnd = ssthresh = 5.
    let mut sched = Scheduler::new();
    let mut s = sender("reno", 10 * MS, false);
    let mut out = vec![];
    s.start(&mut sched, &mut out);
    skip_to(&mut sched, 10 * MS);
    out.clear();
    s.on_ack(&ack(0, &[(1, 2)], false), &mut sched, &mut out);
    s.on_ack(&ack(0, &[(1, 3)], false), &mut sched, &mut out);
    assert_eq!(seqs(&out), vec![10, 11]);
    out.clear();
    for k in 4..=10 {
        s.on_ack(&ack(0, &[(1, k)], false), &mut sched, &mut out);
    }
    assert_eq!(s.tp.ca_state, CaState::Recovery);
    assert_eq!(seqs(&out), vec![0, 12, 13]);
    assert!(out[0].flags & flags::RETRANS != 0);
    assert_eq!(s.tp.cwnd, 5);
    skip_to(&mut sched, 20 * MS);
    out.clear();
    s.on_ack(&ack(12, &[], false), &mut sched, &mut out);
    assert_eq!(s.tp.ca_state, CaState::Open);
    assert_eq!(s.tp.cwnd, 5);
}

// ---------------------------------------------------------------------------------------------
// Sender: classic ECN
// ---------------------------------------------------------------------------------------------

#[test]
fn ece_reduces_once_per_window_and_sets_cwr_on_new_data() {
    // RFC 3168 §6.1.2: ECE ⇒ CWR state, ssthresh = cwnd/2 (Reno), the next new segment carries
    // CWR; later ECEs in the same window are ignored; CWR ends once snd_una passes high_seq.
    let mut sched = Scheduler::new();
    let mut s = sender("reno", 10 * MS, true);
    let mut out = vec![];
    s.start(&mut sched, &mut out);
    assert!(out.iter().all(|p| p.ecn == Ecn::Ect0));
    skip_to(&mut sched, 10 * MS);
    out.clear();
    s.on_ack(&ack(2, &[], true), &mut sched, &mut out);
    assert_eq!(s.tp.ca_state, CaState::Cwr);
    assert_eq!(s.tp.ssthresh, 5);
    let first_new = out.first().expect("PRR lets something out");
    assert!(first_new.flags & flags::CWR != 0);
    assert!(out[1..].iter().all(|p| p.flags & flags::CWR == 0));
    let high = s.tp.snd_nxt;
    s.on_ack(&ack(4, &[], true), &mut sched, &mut out);
    assert_eq!(s.tp.ssthresh, 5, "second ECE in the same window ignored");
    assert_eq!(s.report.stats.cwr_count, 1);
    // Acknowledging up to exactly high_seq keeps CWR (the CWR bit must be known delivered)...
    let _ = high;
    s.on_ack(&ack(10, &[], false), &mut sched, &mut out);
    assert_eq!(s.tp.ca_state, CaState::Cwr);
    // ...anything beyond ends it with cwnd = ssthresh.
    s.on_ack(&ack(11, &[], false), &mut sched, &mut out);
    assert_eq!(s.tp.ca_state, CaState::Open);
    assert_eq!(s.tp.cwnd, 5);
}

// ---------------------------------------------------------------------------------------------
// Receiver: delayed ACKs
// ---------------------------------------------------------------------------------------------

fn receiver(ecn: EcnFeedback) -> Receiver {
    Receiver::new(0, ecn, None, 10 * MS)
}

fn feed(r: &mut Receiver, sched: &mut Scheduler, seq: u32, ecn: Ecn, f: u8) -> Vec<AckPkt> {
    let mut out = vec![];
    r.on_data(&data(seq, ecn, f), sched, &mut out);
    out
}

#[test]
fn quick_acks_at_start_then_every_second_segment() {
    // TCP_MAX_QUICKACKS = 16: the first 16 segments are acknowledged one by one; after that,
    // every second full segment (rcv_nxt − rcv_wup > rcv_mss) triggers an ACK.
    let mut sched = Scheduler::new();
    let mut r = receiver(EcnFeedback::Off);
    let mut acks = vec![];
    for seq in 0..26 {
        skip_to(&mut sched, seq as u64 * 100_000);
        for a in feed(&mut r, &mut sched, seq, Ecn::NotEct, 0) {
            acks.push(a.ack);
        }
    }
    let expected: Vec<u32> = (1..=16).chain([18, 20, 22, 24, 26]).collect();
    assert_eq!(acks, expected);
}

/// A receiver that has received segments 0..16 and used up its 16 quick ACKs
/// (TCP_MAX_QUICKACKS).
fn past_quick_acks() -> (Scheduler, Receiver) {
    let mut sched = Scheduler::new();
    let mut r = receiver(EcnFeedback::Off);
    for seq in 0..16 {
        feed(&mut r, &mut sched, seq, Ecn::NotEct, 0);
    }
    (sched, r)
}

#[test]
fn a_lone_segment_waits_for_the_40ms_delayed_ack_timer() {
    // After quick-ACK mode, an odd segment is held for ATO = 40 ms (TCP_ATO_MIN,
    // include/net/tcp.h; `tcp_send_delayed_ack`).
    let (mut sched, mut r) = past_quick_acks();
    feed(&mut r, &mut sched, 16, Ecn::NotEct, 0);
    // Segment 16 arrived after the quick ACKs were used up: no ACK yet.
    let t0 = sched.now();
    let mut out = vec![];
    let mut fired_at = None;
    while let Some((t, ev)) = sched.pop_until(t0 + 500 * MS) {
        if let Event::AckTimer(_) = ev {
            r.on_delack_timer(&mut sched, &mut out);
            if !out.is_empty() && fired_at.is_none() {
                fired_at = Some(t);
            }
        }
    }
    assert_eq!(out.iter().map(|a| a.ack).collect::<Vec<_>>(), vec![17]);
    assert_eq!(fired_at, Some(t0 + 40 * MS));
}

#[test]
fn a_lone_segment_with_psh_is_acked_at_once() {
    // tcp_measure_rcv_mss sets ICSK_ACK_PUSHED for a full segment with PSH (commit
    // 4720852ed9af), and the reading application's __tcp_cleanup_rbuf ACKs it at once; the
    // same odd segment without PSH waits for the 40 ms timer (the test above). The flag lasts
    // until an ACK: the next segment, without PSH, waits again.
    let (mut sched, mut r) = past_quick_acks();
    assert!(feed(&mut r, &mut sched, 16, Ecn::NotEct, flags::PSH)
        .iter()
        .map(|a| a.ack)
        .eq([17]));
    assert!(feed(&mut r, &mut sched, 17, Ecn::NotEct, 0).is_empty());
    // A pair whose second segment carries PSH is ACKed on its second segment either way.
    assert!(feed(&mut r, &mut sched, 18, Ecn::NotEct, flags::PSH)
        .iter()
        .map(|a| a.ack)
        .eq([19]));
}

#[test]
fn out_of_order_data_gets_immediate_dupacks_with_sack_then_compression() {
    // The first three dupACKs for a hole go out at once (TCP_FASTRETRANS_THRESH), with the
    // SACK block of the newest data first (RFC 2018 §4); later ones are compressed.
    let mut sched = Scheduler::new();
    let mut r = receiver(EcnFeedback::Off);
    for seq in 0..20 {
        feed(&mut r, &mut sched, seq, Ecn::NotEct, 0);
    }
    let mut acks = vec![];
    for seq in 21..27 {
        acks.extend(feed(&mut r, &mut sched, seq, Ecn::NotEct, 0));
    }
    assert_eq!(acks.len(), 3);
    assert!(acks.iter().all(|a| a.ack == 20));
    assert_eq!(acks[0].sack_blocks(), &[(21, 22)]);
    assert_eq!(acks[2].sack_blocks(), &[(21, 24)]);
    // Filling the hole is acknowledged at once and covers everything.
    let a = feed(&mut r, &mut sched, 20, Ecn::NotEct, 0);
    assert_eq!(a.last().map(|a| (a.ack, a.n_sack)), Some((27, 0)));
}

#[test]
fn with_more_than_three_holes_the_three_latest_changed_ranges_are_reported_newest_first() {
    // RFC 2018 §4: SACK blocks in order of the most recent change; three fit with timestamps.
    // After 0..10 in order: 12, 16, 14, 20 arrive (four ranges), then 13 grows 12's range and
    // joins it with 14's ([12, 15), changed 5th), then 22 opens a fifth ([22, 23), 6th).
    // Ranges by last change: [22,23) 6th, [12,15) 5th, [20,21) 4th, [16,17) 2nd. A copy of
    // old data (seq 5) forces an immediate ACK: its blocks are the three latest, newest first.
    let mut sched = Scheduler::new();
    let mut r = receiver(EcnFeedback::Off);
    for seq in (0..10).chain([12, 16, 14, 20, 13, 22]) {
        feed(&mut r, &mut sched, seq, Ecn::NotEct, 0);
    }
    let a = feed(&mut r, &mut sched, 5, Ecn::NotEct, 0);
    assert_eq!(a.len(), 1);
    assert_eq!(
        (a[0].ack, a[0].sack_blocks()),
        (10, &[(22, 23), (12, 15), (20, 21)][..])
    );
}

// ---------------------------------------------------------------------------------------------
// Receiver: ECN feedback
// ---------------------------------------------------------------------------------------------

#[test]
fn classic_receiver_latches_ece_until_cwr() {
    // RFC 3168 §6.1.3: after a CE segment every ACK carries ECE until a segment with CWR.
    let mut sched = Scheduler::new();
    let mut r = receiver(EcnFeedback::Classic);
    let a = feed(&mut r, &mut sched, 0, Ecn::Ce, 0);
    assert!(a[0].ece);
    let a = feed(&mut r, &mut sched, 1, Ecn::Ect0, 0);
    assert!(a[0].ece, "still echoing");
    let a = feed(&mut r, &mut sched, 2, Ecn::Ect0, flags::CWR);
    assert!(!a[0].ece, "CWR clears the echo");
}

#[test]
fn dctcp_receiver_flushes_a_delayed_ack_at_a_ce_change() {
    // RFC 8257 §3.2 / dctcp_ece_ack_update: segments 16 (not CE) is held by the delayed-ACK
    // timer; when CE segment 17 arrives, the receiver first sends the held ACK for 17
    // (acknowledging through segment 16) with ECE = 0, then an immediate ACK for 18 with
    // ECE = 1.
    let mut sched = Scheduler::new();
    let mut r = receiver(EcnFeedback::Dctcp);
    for seq in 0..16 {
        feed(&mut r, &mut sched, seq, Ecn::Ect0, 0);
    }
    let held = feed(&mut r, &mut sched, 16, Ecn::Ect0, 0);
    assert!(held.is_empty());
    let a = feed(&mut r, &mut sched, 17, Ecn::Ce, 0);
    assert_eq!(
        a.iter().map(|a| (a.ack, a.ece)).collect::<Vec<_>>(),
        vec![(17, false), (18, true)]
    );
    // Two more CE segments: the ordinary every-second-segment rule, with ECE = 1.
    assert!(feed(&mut r, &mut sched, 18, Ecn::Ce, 0).is_empty());
    let a = feed(&mut r, &mut sched, 19, Ecn::Ce, 0);
    assert_eq!(
        a.iter().map(|a| (a.ack, a.ece)).collect::<Vec<_>>(),
        vec![(20, true)]
    );
}

#[test]
fn accurate_receiver_counts_every_ce_segment() {
    let mut sched = Scheduler::new();
    let mut r = receiver(EcnFeedback::Accurate);
    let mut last = 0;
    for seq in 0..10 {
        for a in feed(
            &mut r,
            &mut sched,
            seq,
            if seq % 3 == 0 { Ecn::Ce } else { Ecn::Ect1 },
            0,
        ) {
            last = a.ce_count;
        }
    }
    // Segments 0, 3, 6, 9 were CE.
    assert_eq!(last, 4);
}

// ---------------------------------------------------------------------------------------------
// TSO autosizing (`tcp_tso_autosize`) with a host's offload knobs
// ---------------------------------------------------------------------------------------------

#[test]
fn tso_autosize_matches_the_formula_by_hand() {
    use crate::tcp::TsoConfig;
    // tcp_tso_autosize: bytes = pacing_rate >> shift, plus gso_max >> (min_rtt_us >> 9) while
    // that shift is below 32, capped at gso_max; segments = max(bytes / 1448, min_tso_segs).
    let segs = |rate: u64, min_rtt_us: u32, t: TsoConfig| {
        let mut s = Sender::new(
            &SenderConfig {
                flow: 0,
                size_bytes: None,
                ecn: false,
                fq_pacing: false,
                handshake_rtt_ns: 10 * MS,
                tso: Some(t),
            },
            cc("reno"),
        );
        s.tp.pacing_rate = rate;
        s.tp.min_rtt_us = min_rtt_us;
        s.tso_segs()
    };
    let linux = TsoConfig {
        gso_max_bytes: 65_536,
        pacing_shift: 10,
        min_tso_segs: 2,
    };
    // 1 Gbit/s = 125e6 B/s: 125e6 >> 10 = 122 070 B, 10 ms of min_rtt adds 65 536 >> 19 = 0;
    // capped at 65 536 B ⇒ 65 536 / 1448 = 45 segments.
    assert_eq!(segs(125_000_000, 10_000, linux), 45);
    // 100 Mbit/s: 12 207 B ⇒ 8 segments.
    assert_eq!(segs(12_500_000, 10_000, linux), 8);
    // 100 Mbit/s with a 1 ms min_rtt: 12 207 + (65 536 >> 1) = 44 975 B ⇒ 31 segments.
    assert_eq!(segs(12_500_000, 1_000, linux), 31);
    // 10 Mbit/s: 1 220 B is less than one segment: min_tso_segs = 2.
    assert_eq!(segs(1_250_000, 10_000, linux), 2);
    // The knobs: shift 8 at 100 Mbit/s gives 48 828 B ⇒ 33; a 32 KiB GSO limit at 1 Gbit/s
    // gives 32 768 / 1448 = 22; min_tso_segs 4 at 10 Mbit/s gives 4.
    assert_eq!(
        segs(
            12_500_000,
            10_000,
            TsoConfig {
                pacing_shift: 8,
                ..linux
            }
        ),
        33
    );
    assert_eq!(
        segs(
            125_000_000,
            10_000,
            TsoConfig {
                gso_max_bytes: 32_768,
                ..linux
            }
        ),
        22
    );
    assert_eq!(
        segs(
            1_250_000,
            10_000,
            TsoConfig {
                min_tso_segs: 4,
                ..linux
            }
        ),
        4
    );
}

#[test]
fn gro_packets_are_received_as_one_skb_with_one_ack() {
    // A GRO packet of 4 full segments after quick-ACK mode is over: Linux ACKs it at once
    // (more than one rcv_mss unacknowledged), with one ACK for all four; the same segments
    // one by one are ACKed every second segment (two ACKs).
    let mut sched = Scheduler::new();
    let mut out = Vec::new();
    let mut r = Receiver::new(0, EcnFeedback::Off, None, 10 * MS);
    // 16 quick ACKs at the start (TCP_MAX_QUICKACKS), one per segment.
    for s in 0..16 {
        r.on_data(&data(s, Ecn::NotEct, 0), &mut sched, &mut out);
    }
    assert_eq!(out.len(), 16);
    out.clear();
    let unit: Vec<DataPkt> = (16..20).map(|s| data(s, Ecn::NotEct, 0)).collect();
    r.on_gro(&unit, &mut sched, &mut out);
    assert_eq!(out.iter().map(|a| a.ack).collect::<Vec<_>>(), [20]);
    out.clear();
    for p in (20..24).map(|s| data(s, Ecn::NotEct, 0)) {
        r.on_data(&p, &mut sched, &mut out);
    }
    assert_eq!(out.iter().map(|a| a.ack).collect::<Vec<_>>(), [22, 24]);
    assert_eq!(r.segs_received, 24);
}

#[test]
fn tso_deferral_waits_for_an_imminent_ack_when_little_of_the_window_is_open() {
    use crate::tcp::TsoConfig;
    // tcp_tso_should_defer with srtt 10 ms, the head sent at 0 (its ACK due at 10 ms), the
    // last transmission 0.3 ms ago and skbs of 45 segments (1 Gbit/s of pacing rate).
    let mut sched = Scheduler::new();
    let mut out = Vec::new();
    let tso = TsoConfig {
        gso_max_bytes: 65_536,
        pacing_shift: 10,
        min_tso_segs: 2,
    };
    let mut s = Sender::new(
        &SenderConfig {
            flow: 0,
            size_bytes: None,
            ecn: false,
            fq_pacing: false,
            handshake_rtt_ns: 10 * MS,
            tso: Some(tso),
        },
        cc("reno"),
    );
    s.start(&mut sched, &mut out);
    let k = s.inflight();
    assert!(k >= 2, "{k}");
    s.tp.pacing_rate = 125_000_000;
    let at = |s: &mut Sender, now: Nanos, last: Nanos, open: u32| {
        s.tp.cwnd = k + open;
        s.tp.lsndtime_ns = last;
        s.tso_should_defer(now, 45, 45, false)
    };
    // 2 segments open out of k + 2 (less than a third once k + 2 > 6) at 9.5 ms: the ACK is
    // due within min(srtt/2, 1 ms) = 1 ms, so wait for it.
    let open = 2;
    assert!(k + open > 3 * open);
    assert!(at(&mut s, 9_500_000, 9_200_000, open));
    // At 8.5 ms the ACK is 1.5 ms away: send now.
    assert!(!at(&mut s, 8_500_000, 8_200_000, open));
    // The last transmission 1.5 ms ago: send now (no deferral after a pause).
    assert!(!at(&mut s, 9_500_000, 8_000_000, open));
    // A third of cwnd open (3·open ≥ k + open): send now.
    let third = k.div_ceil(2);
    assert!(3 * third >= k + third);
    assert!(!at(&mut s, 9_500_000, 9_200_000, third));
    // In Recovery: send now.
    s.tp.ca_state = CaState::Recovery;
    assert!(!at(&mut s, 9_500_000, 9_200_000, open));
}

#[test]
fn the_write_queue_head_is_cut_and_grown_as_tcp_write_xmit_does() {
    use crate::tcp::TsoConfig;
    // tcp_sendmsg queues skbs of tcp_xmit_size_goal = 45 segments (64 KiB / 1448 B):
    // [0, 45), [45, 90), [90, 135), … tcp_write_xmit sends at most `quota` segments of the
    // head (tso_fragment leaves the rest as the head), and grows a head smaller than the
    // quota from the next skb (tcp_grow_skb, Linux 6.10+).
    let tso = TsoConfig {
        gso_max_bytes: 65_536,
        pacing_shift: 10,
        min_tso_segs: 2,
    };
    let mut s = Sender::new(
        &SenderConfig {
            flow: 0,
            size_bytes: None,
            ecn: false,
            fq_pacing: false,
            handshake_rtt_ns: 10 * MS,
            tso: Some(tso),
        },
        cc("reno"),
    );
    assert_eq!(s.size_goal(65_536), 45);
    // A fresh head: the whole first skb, more data behind it.
    assert_eq!(s.write_queue_head(45, 20), (45, false));
    // 20 sent (the head split 20 | 25), then 20 more: 5 left of the first skb.
    s.tp.snd_nxt = 20;
    assert_eq!(s.write_queue_head(45, 20), (25, false));
    s.tp.snd_nxt = 40;
    assert_eq!(s.write_queue_head(45, 5), (5, false));
    // A quota of 6 grows the 5 by one segment from the next skb: [40, 46), the next [46, 90).
    assert_eq!(s.write_queue_head(45, 6), (6, false));
    s.tp.snd_nxt = 46;
    assert_eq!(s.write_queue_head(45, 20), (44, false));
    // Growth takes from one skb only: 4 left of [46, 90) with a quota of 60 take the whole
    // next skb [90, 135) (45 segments), not more: 49; [135, 180) becomes the next.
    s.tp.snd_nxt = 86;
    assert_eq!(s.write_queue_head(45, 60), (49, false));
    s.tp.snd_nxt = 135;
    assert_eq!(s.write_queue_head(45, 1), (45, false));

    // A finite flow of 50 segments: [0, 45) and the tail [45, 50).
    let mut f = Sender::new(
        &SenderConfig {
            flow: 0,
            size_bytes: Some(50 * MSS_BYTES as u64),
            ecn: false,
            fq_pacing: false,
            handshake_rtt_ns: 10 * MS,
            tso: Some(tso),
        },
        cc("reno"),
    );
    assert_eq!(f.write_queue_head(45, 2), (45, false));
    f.tp.snd_nxt = 43;
    // A quota of 10 grows the 2 left by the whole tail (5): the head is the tail now.
    assert_eq!(f.write_queue_head(45, 10), (7, true));
}

#[test]
fn psh_marks_the_last_segment_of_every_multi_segment_skb() {
    use crate::tcp::TsoConfig;
    // __tcp_transmit_skb sets PSH on every skb of tcp_skb_pcount > 1 and on no other
    // (commit 051ba67447de). At the initial pacing rate an autosized skb is min_tso_segs = 2
    // segments (see tso_autosize_matches_the_formula_by_hand): PSH on every second segment.
    let tso = TsoConfig {
        gso_max_bytes: 65_536,
        pacing_shift: 10,
        min_tso_segs: 2,
    };
    let mut sched = Scheduler::new();
    let mut out = Vec::new();
    let mut s = Sender::new(
        &SenderConfig {
            flow: 0,
            size_bytes: None,
            ecn: false,
            fq_pacing: false,
            handshake_rtt_ns: 10 * MS,
            tso: Some(tso),
        },
        cc("reno"),
    );
    s.start(&mut sched, &mut out);
    let psh: Vec<usize> = out
        .iter()
        .enumerate()
        .filter(|(_, p)| p.flags & flags::PSH != 0)
        .map(|(i, _)| i)
        .collect();
    assert!(out.len() >= 4 && out.len() % 2 == 0, "{}", out.len());
    assert_eq!(psh, (1..out.len()).step_by(2).collect::<Vec<_>>());
    assert_eq!(psh.len() as u64, s.report.stats.tso_skbs);
    // With cwnd = what is in flight, in congestion avoidance, and the packets gone from the
    // NIC (TCP Small Queues released), an ACK of one segment opens one: a 1-segment skb,
    // without PSH.
    let sent = out.len() as u32;
    (s.tp.cwnd, s.tp.ssthresh) = (sent, sent);
    let wire: Vec<u32> = out.iter().map(|p| p.wire_len).collect();
    out.clear();
    for w in wire {
        s.on_nic_departure(w, &mut sched, &mut out);
    }
    assert!(out.is_empty());
    skip_to(&mut sched, 10 * MS);
    s.on_ack(&ack(1, &[], false), &mut sched, &mut out);
    assert_eq!(seqs(&out), [sent]);
    assert_eq!(out[0].flags & flags::PSH, 0);
    // Without offloads' TSO (ideal hosts) every segment is its own skb: no PSH at all.
    let mut ideal = sender("reno", 10 * MS, false);
    out.clear();
    ideal.start(&mut Scheduler::new(), &mut out);
    assert!(out.len() == 10 && out.iter().all(|p| p.flags & flags::PSH == 0));
}

#[test]
fn tso_deferral_sends_a_head_that_fits_unless_it_is_a_tail_that_exactly_fills_the_window() {
    use crate::tcp::TsoConfig;
    // As the deferral test above: srtt 10 ms, the head sent at 0, the ACK due within 1 ms at
    // 9.5 ms, 2 segments open (less than a third of cwnd), autosized skbs of 45 segments.
    let mut sched = Scheduler::new();
    let mut out = Vec::new();
    let tso = TsoConfig {
        gso_max_bytes: 65_536,
        pacing_shift: 10,
        min_tso_segs: 2,
    };
    let mut s = Sender::new(
        &SenderConfig {
            flow: 0,
            size_bytes: Some(1000 * MSS_BYTES as u64),
            ecn: false,
            fq_pacing: false,
            handshake_rtt_ns: 10 * MS,
            tso: Some(tso),
        },
        cc("reno"),
    );
    s.start(&mut sched, &mut out);
    let k = s.inflight();
    s.tp.cwnd = k + 2;
    s.tp.lsndtime_ns = 9_200_000;
    assert!(k + 2 > 6);
    // A 45-segment head does not fit: defer.
    assert!(s.tso_should_defer(9_500_000, 45, 45, false));
    // A 2-segment head with data behind it fits: "middle in queue won't get any more data".
    assert!(!s.tso_should_defer(9_500_000, 45, 2, false));
    // A 3-segment head does not fit: defer.
    assert!(s.tso_should_defer(9_500_000, 45, 3, false));
    // The tail of the flow: two full segments exactly fill the open window: Linux's
    // `cong_win <= skb->len` makes it a cwnd-limited deferral ...
    assert!(s.tso_should_defer(9_500_000, 45, 2, true));
    // ... while a tail of one full segment (the window is larger) carries the FIN: sent.
    assert!(!s.tso_should_defer(9_500_000, 45, 1, true));
}

#[test]
fn tcp_paces_payload_bytes_and_fq_paces_whole_frames() {
    // tcp_update_skb_after_send times the write-queue skb, whose len is its payload (the
    // headers are pushed on the transmitted clone); the fq qdisc times qdisc_pkt_len, the
    // Ethernet frame: 1448 + 52 + 14 = 1514 B per full segment. At 1 448 000 B/s an skb of
    // 2 segments (tcp_tso_autosize's floor at this rate) then advances the earliest departure
    // time by 2·1448/1 448 000 s = 2 ms when TCP paces, and by 2·1514/1 448 000 s =
    // 2.091 160 ms (rounded down to the ns) when fq paces.
    for (fq_pacing, cc_name, wstamp) in [(false, "bbr", 2_000_000), (true, "reno", 2_091_160)] {
        let mut sched = Scheduler::new();
        let mut out = Vec::new();
        let mut s = Sender::new(
            &SenderConfig {
                flow: 0,
                size_bytes: None,
                ecn: false,
                fq_pacing,
                handshake_rtt_ns: 10 * MS,
                tso: None,
            },
            cc(cc_name),
        );
        s.start(&mut sched, &mut out);
        // The initial window of 10 leaves unpaced.
        assert_eq!((out.len(), s.wstamp_ns), (10, 0));
        s.tp.cwnd = 100;
        s.tp.pacing_rate = 1_448_000;
        out.clear();
        s.transmit(&mut sched, &mut out);
        assert_eq!(
            (out.len(), s.wstamp_ns),
            (2, wstamp),
            "fq_pacing = {fq_pacing}"
        );
    }
}
