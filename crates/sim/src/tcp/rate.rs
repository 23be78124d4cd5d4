//! Delivery-rate sampling: Linux net/ipv4/tcp_rate.c (`tcp_rate_skb_sent`,
//! `tcp_rate_skb_delivered`, `tcp_rate_gen`) with the BBRv2/v3 additions of google/bbr's tree
//! (`tcp_set_tx_in_flight`, `tx.lost`, `delivered_ce`); the method is
//! draft-cheng-iccrg-delivery-rate-estimation. Each transmission snapshots the connection's
//! delivery state ([`TxSnapshot`]); each ACK builds one [`RateSample`] from the snapshot of the
//! most recently sent segment it delivered.
//!
//! The state lives in [`TcpState`] as in Linux's `tcp_sock` (`delivered`,
//! `delivered_mstamp`, `first_tx_mstamp`, `app_limited`). The sender runs this only for CCs
//! that read rate samples (`cong_control`): Linux always runs it, but for the others it is
//! unobservable, and it is a large share of the per-ACK work.

use crate::cc::{RateSample, TcpState, TxSnapshot};
use crate::engine::Nanos;

/// `tcp_rate_skb_sent` + `tcp_set_tx_in_flight`: the snapshot for a segment about to be
/// (re)transmitted at `now`, with `inflight` segments in flight before it.
#[inline]
pub(super) fn skb_sent(tp: &mut TcpState, inflight: u32, now: Nanos) -> TxSnapshot {
    let now_us = now / 1000;
    if tp.packets_out == 0 {
        // Nothing in flight: the sample starts now (packets_out, not the inflight guess).
        tp.first_tx_mstamp_us = now_us;
        tp.delivered_mstamp_us = now_us;
    }
    TxSnapshot {
        first_tx_mstamp_us: tp.first_tx_mstamp_us,
        delivered_mstamp_us: tp.delivered_mstamp_us,
        delivered: tp.delivered as u32,
        delivered_ce: tp.delivered_ce as u32,
        lost: tp.lost as u32,
        in_flight: inflight + 1,
        is_app_limited: tp.app_limited != 0,
    }
}

/// `tcp_rate_skb_delivered`: segment `end_seq − 1`, last sent at `sent_ns` with snapshot `tx`,
/// was newly cum-acked or SACKed; keep the snapshot of the most recently sent one delivered by
/// this ACK (`tcp_skb_sent_after`: later send time, then higher sequence).
#[inline]
pub(super) fn skb_delivered(
    tp: &mut TcpState,
    rs: &mut RateSample,
    end_seq: u32,
    ever_retrans: bool,
    sent_ns: Nanos,
    tx: TxSnapshot,
) {
    let tx_us = sent_ns / 1000;
    let sent_after = tx_us > tp.first_tx_mstamp_us
        || (tx_us == tp.first_tx_mstamp_us && end_seq > rs.last_end_seq);
    if rs.prior_mstamp_us.is_none() || sent_after {
        rs.prior_delivered_ce = tx.delivered_ce;
        rs.prior_delivered = tx.delivered;
        rs.prior_mstamp_us = Some(tx.delivered_mstamp_us);
        rs.is_app_limited = tx.is_app_limited;
        rs.is_retrans = ever_retrans;
        rs.tx_in_flight = tx.in_flight;
        rs.lost = (tp.lost as u32).wrapping_sub(tx.lost);
        rs.last_end_seq = end_seq;
        tp.first_tx_mstamp_us = tx_us;
        rs.interval_us = tx_us as i64 - tx.first_tx_mstamp_us as i64;
    }
}

/// `tcp_rate_gen`: finish the ACK's rate sample; it newly delivered `delivered` segments and
/// marked `lost` lost.
pub(super) fn gen(tp: &mut TcpState, rs: &mut RateSample, delivered: u32, lost: u32) {
    if tp.app_limited != 0 && tp.delivered > tp.app_limited {
        tp.app_limited = 0;
    }
    let now_us = tp.now_us();
    if delivered > 0 {
        tp.delivered_mstamp_us = now_us;
    }
    rs.acked_sacked = delivered;
    rs.losses = lost;
    let Some(prior_mstamp) = rs.prior_mstamp_us else {
        rs.delivered = -1;
        rs.interval_us = -1;
        return;
    };
    rs.delivered = (tp.delivered as u32).wrapping_sub(rs.prior_delivered) as i64;
    rs.delivered_ce = (tp.delivered_ce as u32).wrapping_sub(rs.prior_delivered_ce) as i64;
    let snd_us = rs.interval_us;
    let ack_us = now_us as i64 - prior_mstamp as i64;
    rs.interval_us = snd_us.max(ack_us);
    rs.snd_interval_us = snd_us;
    rs.rcv_interval_us = ack_us;
    // Normally interval ≥ min_rtt; a shorter one would overestimate bw.
    if rs.interval_us < tp.min_rtt_us as i64 {
        rs.interval_us = -1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    fn tp_at(now: Nanos) -> TcpState {
        let mut tp = TcpState::new(1448, now);
        tp.min_rtt_us = 10_000;
        tp
    }

    #[test]
    fn a_flight_sent_over_2ms_and_acked_at_12ms_gives_a_12ms_interval() {
        // Segments 0..4 leave at 0, 0.5, 1, 1.5, 2 ms from an idle connection; one ACK at 12 ms
        // delivers them all. The sample is taken from segment 4 (sent last): its snapshot says
        // 0 delivered at 0 ms, first sent at 0 ms. Send phase 2 ms, ACK phase 12 − 0 = 12 ms:
        // interval 12 ms, 5 delivered.
        let mut tp = tp_at(0);
        let mut snaps = vec![];
        for k in 0..5u64 {
            let t = k * MS / 2;
            snaps.push((t, skb_sent(&mut tp, k as u32, t)));
            tp.packets_out += 1;
        }
        assert_eq!(snaps[4].1.in_flight, 5);
        tp.now_ns = 12 * MS;
        let mut rs = RateSample::default();
        for (k, &(t, tx)) in snaps.iter().enumerate() {
            tp.delivered += 1;
            skb_delivered(&mut tp, &mut rs, k as u32 + 1, false, t, tx);
        }
        assert_eq!(rs.last_end_seq, 5);
        gen(&mut tp, &mut rs, 5, 0);
        assert_eq!(
            (
                rs.delivered,
                rs.snd_interval_us,
                rs.rcv_interval_us,
                rs.interval_us
            ),
            (5, 2_000, 12_000, 12_000)
        );
        assert_eq!(tp.delivered_mstamp_us, 12_000);
    }

    #[test]
    fn an_interval_shorter_than_min_rtt_is_invalid_and_no_delivery_gives_no_sample() {
        // Sent at 0, acked at 5 ms with min_rtt 10 ms: interval 5 ms < min_rtt → −1.
        let mut tp = tp_at(0);
        let tx = skb_sent(&mut tp, 0, 0);
        tp.packets_out = 1;
        tp.now_ns = 5 * MS;
        tp.delivered = 1;
        let mut rs = RateSample::default();
        skb_delivered(&mut tp, &mut rs, 1, false, 0, tx);
        gen(&mut tp, &mut rs, 1, 0);
        assert_eq!((rs.delivered, rs.interval_us), (1, -1));
        // An ACK that delivered nothing timed: delivered and interval are both −1.
        let mut rs = RateSample::default();
        gen(&mut tp, &mut rs, 0, 0);
        assert_eq!((rs.delivered, rs.interval_us), (-1, -1));
    }
}
