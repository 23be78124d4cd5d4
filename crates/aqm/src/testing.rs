//! Test harness for disciplines: a minimal packet and a recorder of verdicts.

use crate::{DropReason, Ecn, MarkReason, Nanos, Packet, Verdicts};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestPkt {
    pub flow: u64,
    pub len: u32,
    pub ecn: Ecn,
    pub enqueued: Nanos,
    pub value: u32,
}

pub fn pkt(flow: u64, len: u32, ecn: Ecn) -> TestPkt {
    TestPkt {
        flow,
        len,
        ecn,
        enqueued: 0,
        value: 0,
    }
}

impl Packet for TestPkt {
    fn wire_len(&self) -> u32 {
        self.len
    }
    fn ecn(&self) -> Ecn {
        self.ecn
    }
    fn set_ce(&mut self) {
        assert!(
            self.ecn.is_ect_or_ce(),
            "a discipline marked a Not-ECT packet"
        );
        self.ecn = Ecn::Ce;
    }
    fn flow_key(&self) -> u64 {
        self.flow
    }
    fn value(&self) -> u32 {
        self.value
    }
    fn enqueue_ns(&self) -> Nanos {
        self.enqueued
    }
    fn set_enqueue_ns(&mut self, now: Nanos) {
        self.enqueued = now;
    }
}

#[derive(Default, Debug)]
pub struct Recorder {
    pub drops: Vec<(TestPkt, DropReason)>,
    pub marks: Vec<(TestPkt, MarkReason)>,
}

impl Verdicts<TestPkt> for Recorder {
    fn dropped(&mut self, pkt: TestPkt, reason: DropReason, _now: Nanos) {
        self.drops.push((pkt, reason));
    }
    fn marked(&mut self, pkt: &TestPkt, reason: MarkReason, _now: Nanos) {
        self.marks.push((*pkt, reason));
    }
}
