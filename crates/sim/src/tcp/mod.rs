//! The Linux-faithful TCP model: a sender ([`sender::Sender`]) and a receiver
//! ([`receiver::Receiver`]) per flow, exchanging [`crate::packet::DataPkt`] and
//! [`crate::packet::AckPkt`] through the topology. What is modelled and what is simplified is
//! listed in docs/model.md; the sources are digested in ../shared/reference/cc.md §1.

pub mod minmax;
pub mod receiver;
pub mod rtt;
pub mod sender;

pub use receiver::{EcnFeedback, Receiver};
pub use sender::{Sender, SenderConfig};

#[cfg(test)]
mod tests;
