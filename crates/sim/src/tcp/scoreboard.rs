//! The retransmission queue and its scoreboard: one [`Seg`] per sent, not yet cumulatively
//! acknowledged segment with Linux's `TCP_SKB_CB(skb)->sacked` bits (include/net/tcp.h
//! `TCPCB_*`), the time-sorted list of transmissions RACK walks (`tsorted_sent_queue`), the
//! lost segments awaiting retransmission, and the SACK processing that marks segments
//! delivered (RFC 2018; net/ipv4/tcp_input.c `tcp_sacktag_write_queue`, `tcp_sacktag_one`,
//! `tcp_mark_skb_lost`).

use std::cmp::Reverse;

use crate::cc::{CongestionControl, TxSnapshot};
use crate::engine::Nanos;
use crate::packet::AckPkt;
use crate::tcp::{rate, Sender};

/// Scoreboard flag bits (Linux `TCPCB_*` in `tcp_skb_cb.sacked`).
pub(super) mod sb {
    /// `TCPCB_SACKED_ACKED`.
    pub const SACKED: u8 = 1 << 0;
    /// `TCPCB_LOST`.
    pub const LOST: u8 = 1 << 1;
    /// `TCPCB_SACKED_RETRANS`: a retransmission is in flight.
    pub const RETRANS_OUT: u8 = 1 << 2;
    /// `TCPCB_EVER_RETRANS`.
    pub const EVER_RETRANS: u8 = 1 << 3;
    /// On the time-sorted list (`tcp_tsorted_anchor` linked).
    pub const IN_TSORTED: u8 = 1 << 4;
}

/// The end of the time-sorted list.
pub(super) const NONE: u32 = u32::MAX;

/// One sent segment on the retransmission queue.
#[derive(Clone, Copy, Debug)]
pub(super) struct Seg {
    /// Time of its last transmission (`tcp_skb_timestamp_us`).
    pub sent_ns: Nanos,
    pub flags: u8,
    /// Links of the time-sorted list of unacknowledged, not-lost transmissions
    /// (`tsorted_sent_queue`), as absolute segment numbers.
    pub prev: u32,
    pub next: u32,
    /// Delivery state when it was last sent (`TCP_SKB_CB(skb)->tx`).
    pub tx: TxSnapshot,
}

/// What one ACK's SACK blocks changed.
#[derive(Default)]
pub(super) struct SackState {
    pub newly_sacked: u32,
    /// Send times of the first and last never-retransmitted segments newly SACKed (RTT
    /// samples, `tcp_sacktag_one`'s `first_sackt`, `last_sackt`).
    pub first_sackt: Option<Nanos>,
    pub last_sackt: Option<Nanos>,
}

impl Sender {
    /// Segment `seq`'s entry (the queue starts at `snd_una`).
    #[inline]
    pub(super) fn seg(&self, seq: u32) -> &Seg {
        &self.segs[(seq - self.tp.snd_una) as usize]
    }

    #[inline]
    pub(super) fn seg_mut(&mut self, seq: u32) -> &mut Seg {
        let i = (seq - self.tp.snd_una) as usize;
        &mut self.segs[i]
    }

    /// Append `seq`, just (re)transmitted, to the time-sorted list.
    pub(super) fn ts_push_tail(&mut self, seq: u32) {
        let tail = self.ts_tail;
        {
            let s = self.seg_mut(seq);
            s.prev = tail;
            s.next = NONE;
            s.flags |= sb::IN_TSORTED;
        }
        if tail == NONE {
            self.ts_head = seq;
        } else {
            self.seg_mut(tail).next = seq;
        }
        self.ts_tail = seq;
    }

    /// Take `seq` off the time-sorted list (delivered, or marked lost), if it is on it.
    pub(super) fn ts_remove(&mut self, seq: u32) {
        let (prev, next) = {
            let s = self.seg_mut(seq);
            if s.flags & sb::IN_TSORTED == 0 {
                return;
            }
            s.flags &= !sb::IN_TSORTED;
            (s.prev, s.next)
        };
        if prev == NONE {
            self.ts_head = next;
        } else {
            self.seg_mut(prev).next = next;
        }
        if next == NONE {
            self.ts_tail = prev;
        } else {
            self.seg_mut(next).prev = prev;
        }
    }

    /// `tcp_mark_skb_lost`.
    pub(super) fn mark_lost(&mut self, seq: u32) {
        let f = self.seg(seq).flags;
        if f & sb::SACKED != 0 {
            return;
        }
        let mut nf = f;
        if f & sb::RETRANS_OUT != 0 {
            // The retransmission itself is lost.
            nf &= !sb::RETRANS_OUT;
            self.retrans_out -= 1;
            self.tp.lost += 1;
        }
        if f & sb::LOST == 0 {
            nf |= sb::LOST;
            self.lost_out += 1;
            self.tp.lost += 1;
        }
        self.seg_mut(seq).flags = nf;
        self.lost_queue.push(Reverse(seq));
        if self.cc.has_cong_control() {
            let tx = self.seg(seq).tx;
            self.sync_tp(self.tp.now_ns);
            self.cc.skb_marked_lost(&mut self.tp, &tx);
        }
    }

    /// The next lost segment to retransmit, lowest sequence first (`tcp_xmit_retransmit_queue`).
    pub(super) fn next_lost(&mut self) -> Option<u32> {
        while let Some(&Reverse(seq)) = self.lost_queue.peek() {
            if seq >= self.tp.snd_una {
                let f = self.seg(seq).flags;
                if f & sb::LOST != 0 && f & (sb::RETRANS_OUT | sb::SACKED) == 0 {
                    return Some(seq);
                }
            }
            self.lost_queue.pop();
        }
        None
    }

    /// `tcp_sacktag_write_queue` + `tcp_sacktag_one`: mark newly SACKed segments, skipping the
    /// parts of each block already covered by the previous ACK's blocks (`recv_sack_cache`),
    /// so a growing block costs O(new segments), not O(block).
    pub(super) fn sacktag(&mut self, ack: &AckPkt, now: Nanos, count_ce: bool, st: &mut SackState) {
        let blocks = ack.sack_blocks();
        if blocks.is_empty() {
            self.n_sack_cache = 0;
            return;
        }
        let una = ack.ack.max(self.tp.snd_una);
        let cache: [(u32, u32); 3] = self.sack_cache;
        let n_cache = self.n_sack_cache;
        for &(s, e) in blocks {
            let s = s.max(una);
            let e = e.min(self.tp.snd_nxt);
            if s >= e {
                continue;
            }
            // Subtract the cached blocks from [s, e).
            let mut pieces: [(u32, u32); 4] = [(s, e), (0, 0), (0, 0), (0, 0)];
            let mut np = 1;
            for &(cs, ce) in &cache[..n_cache] {
                let mut next: [(u32, u32); 4] = [(0, 0); 4];
                let mut nn = 0;
                for &(ps, pe) in &pieces[..np] {
                    if ce <= ps || cs >= pe {
                        next[nn] = (ps, pe);
                        nn += 1;
                    } else {
                        if ps < cs && nn < 4 {
                            next[nn] = (ps, cs);
                            nn += 1;
                        }
                        if ce < pe && nn < 4 {
                            next[nn] = (ce, pe);
                            nn += 1;
                        }
                    }
                }
                pieces = next;
                np = nn;
            }
            for &(ps, pe) in &pieces[..np] {
                for seq in ps..pe {
                    self.sacktag_one(seq, now, count_ce, st);
                }
            }
        }
        self.n_sack_cache = blocks.len().min(3);
        self.sack_cache[..self.n_sack_cache].copy_from_slice(&blocks[..self.n_sack_cache]);
    }

    /// `tcp_sacktag_one`: segment `seq` is newly SACKed.
    fn sacktag_one(&mut self, seq: u32, now: Nanos, count_ce: bool, st: &mut SackState) {
        let Seg {
            flags: mut f,
            sent_ns: sent,
            tx,
            ..
        } = *self.seg(seq);
        if f & sb::SACKED != 0 {
            return;
        }
        self.rack.advance(
            f & sb::EVER_RETRANS != 0,
            seq + 1,
            sent,
            now,
            self.tp.min_rtt_us,
        );
        if self.rate_sampling {
            rate::skb_delivered(
                &mut self.tp,
                &mut self.rs,
                seq + 1,
                f & sb::EVER_RETRANS != 0,
                sent,
                tx,
            );
        }
        if f & sb::RETRANS_OUT != 0 {
            // A retransmission not tagged lost (a TLP) is believed still in flight.
            if f & sb::LOST != 0 {
                f &= !(sb::LOST | sb::RETRANS_OUT);
                self.lost_out -= 1;
                self.retrans_out -= 1;
            }
        } else {
            if f & sb::EVER_RETRANS == 0 {
                st.first_sackt.get_or_insert(sent);
                st.last_sackt = Some(sent);
            }
            if f & sb::LOST != 0 {
                f &= !sb::LOST;
                self.lost_out -= 1;
            }
        }
        f |= sb::SACKED;
        self.seg_mut(seq).flags = f;
        self.ts_remove(seq);
        self.sacked_out += 1;
        self.tp.delivered += 1;
        if count_ce {
            self.tp.delivered_ce += 1;
        }
        st.newly_sacked += 1;
    }
}
