//! The Linux-faithful TCP model: a sender ([`sender::Sender`]) and a receiver
//! ([`receiver::Receiver`]) per flow, exchanging [`crate::packet::DataPkt`] and
//! [`crate::packet::AckPkt`] through the topology, and an unresponsive CBR source
//! ([`cbr::CbrSender`]). What is modelled and what is simplified is listed in docs/model.md.

pub mod any_sender;
pub mod cbr;
pub mod minmax;
pub mod receiver;
pub mod rtt;
pub mod sender;

pub use any_sender::{AnySender, SenderReport, SenderSample, SenderStats};
pub use cbr::CbrSender;
pub use receiver::{EcnFeedback, Receiver};
pub use sender::{Sender, SenderConfig};

#[cfg(test)]
mod tests;
