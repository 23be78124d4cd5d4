//! HyStart as Linux CUBIC implements it (net/ipv4/tcp_cubic.c `hystart_update`,
//! `bictcp_hystart_reset`, `hystart_ack_delay`; Ha & Rhee, "Taming the elephants: New TCP slow
//! start", Computer Networks 2011) — not RFC 9406 HyStart++,
//! which mainline Linux does not implement. Two detectors end slow start early by setting
//! ssthresh = cwnd: the ACK train (ACKs of a round keep arriving closely spaced for longer than
//! half the minimum delay) and the delay increase (the round's minimum RTT over 8 samples
//! exceeds delay_min by clamp(delay_min/8, 4 ms, 16 ms)).

use super::TcpState;

/// `HYSTART_ACK_TRAIN` bit of `hystart_detect`.
pub const HYSTART_ACK_TRAIN: u32 = 0x1;
/// `HYSTART_DELAY` bit of `hystart_detect`.
pub const HYSTART_DELAY: u32 = 0x2;
/// `HYSTART_MIN_SAMPLES` = 8: RTT samples per round before the delay test.
const HYSTART_MIN_SAMPLES: u32 = 8;
/// `HYSTART_DELAY_MIN` / `HYSTART_DELAY_MAX` = 4 ms / 16 ms, µs.
const HYSTART_DELAY_MIN_US: u32 = 4_000;
const HYSTART_DELAY_MAX_US: u32 = 16_000;
/// `sk_gso_max_size` = 64 KB, for `hystart_ack_delay`.
const GSO_MAX_SIZE: u64 = 65_536;

/// The module parameters HyStart reads (`hystart_detect`, `hystart_low_window`,
/// `hystart_ack_delta_us`).
#[derive(Clone, Copy, Debug)]
pub struct HyStartParams {
    pub detect: u32,
    pub low_window: u32,
    pub ack_delta_us: u32,
}

/// HyStart's per-connection state (the `found`, `round_start`, `end_seq`, `last_ack`,
/// `curr_rtt`, `sample_cnt` fields of `struct bictcp`).
#[derive(Clone, Debug, Default)]
pub struct HyStart {
    pub found: bool,
    round_start_us: u64,
    end_seq: u32,
    last_ack_us: u64,
    curr_rtt_us: u32,
    sample_cnt: u32,
}

impl HyStart {
    /// `bictcp_hystart_reset`: a new round starts now and ends when snd_nxt is acked.
    pub fn reset(&mut self, tp: &TcpState) {
        let now = tp.now_ns / 1000;
        self.round_start_us = now;
        self.last_ack_us = now;
        self.end_seq = tp.snd_nxt;
        self.curr_rtt_us = u32::MAX;
        self.sample_cnt = 0;
    }

    /// Forget a completed detection (after a Loss-state reset, `bictcp_reset` clears found).
    pub fn clear(&mut self) {
        self.found = false;
    }

    /// `hystart_ack_delay`: min(1 ms, 4·gso_max_size / pacing_rate), µs.
    fn ack_delay_us(tp: &TcpState) -> u64 {
        if tp.pacing_rate == 0 {
            return 0;
        }
        (1_000u64).min(GSO_MAX_SIZE * 4 * 1_000_000 / tp.pacing_rate)
    }

    /// `hystart_update` with an RTT sample `delay_us`, given CUBIC's `delay_min_us`; runs on
    /// every ACK in slow start. Rounds are tracked from the first ACK on, and the detectors
    /// run only from `low_window` segments up (the order of Linux ≥ 5.7, so that the rounds
    /// stay aligned with the flights the window sends: a round first started at cwnd 16
    /// would end mid-flight, and the gap between two flights would cut its ACK train).
    pub fn update(
        &mut self,
        tp: &mut TcpState,
        delay_us: u32,
        delay_min_us: u32,
        p: &HyStartParams,
    ) {
        if tp.snd_una > self.end_seq {
            self.reset(tp);
        }
        if tp.cwnd < p.low_window {
            return;
        }
        let (detect, ack_delta_us) = (p.detect, p.ack_delta_us);
        if detect & HYSTART_ACK_TRAIN != 0 {
            let now = tp.now_ns / 1000;
            // First detector: the ACK train.
            if now.saturating_sub(self.last_ack_us) <= ack_delta_us as u64 {
                self.last_ack_us = now;
                let mut threshold = delay_min_us as u64 + Self::ack_delay_us(tp);
                // "Pacing might have delayed packets up to RTT/2 during slow start."
                if !tp.paced {
                    threshold >>= 1;
                }
                if now - self.round_start_us > threshold {
                    self.found = true;
                    tp.ssthresh = tp.cwnd;
                }
            }
        }
        if detect & HYSTART_DELAY != 0 {
            // Second detector: the minimum delay of the round.
            self.curr_rtt_us = self.curr_rtt_us.min(delay_us);
            if self.sample_cnt < HYSTART_MIN_SAMPLES {
                self.sample_cnt += 1;
            } else {
                let thresh = (delay_min_us >> 3).clamp(HYSTART_DELAY_MIN_US, HYSTART_DELAY_MAX_US);
                if self.curr_rtt_us > delay_min_us + thresh {
                    self.found = true;
                    tp.ssthresh = tp.cwnd;
                }
            }
        }
    }
}
