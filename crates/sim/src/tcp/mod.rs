//! The Linux-faithful TCP model: a sender ([`sender::Sender`]) and a receiver
//! ([`receiver::Receiver`]) per flow, exchanging [`crate::packet::DataPkt`] and
//! [`crate::packet::AckPkt`] through the topology, and an unresponsive CBR source
//! ([`cbr::CbrSender`]). What is modelled and what is simplified is listed in docs/model.md.
//!
//! The sender is split as Linux splits the code over `tcp_sock`: `sender` (state, ACK
//! processing, congestion state machine: tcp_input.c), `scoreboard` (retransmission queue and
//! SACK), `rack` (tcp_recovery.c), `timers` (tcp_timer.c: RTO, tail-loss probe), `output`
//! (tcp_output.c: transmission, pacing) and `rate` (tcp_rate.c).

pub mod any_sender;
pub mod cbr;
pub mod minmax;
mod output;
mod rack;
mod rate;
pub mod receiver;
pub mod rtt;
mod scoreboard;
pub mod sender;
mod timers;

pub use any_sender::{AnySender, SenderReport, SenderSample, SenderStats};
pub use cbr::CbrSender;
pub use receiver::{EcnFeedback, Receiver};
pub use sender::{Sender, SenderConfig, TsoConfig};

/// Bytes of one segment's entry in a sender's retransmission queue and scoreboard (for the
/// run's memory estimate, [`crate::estimate`]).
pub const SEG_BYTES: usize = std::mem::size_of::<scoreboard::Seg>();

#[cfg(test)]
mod tests;
