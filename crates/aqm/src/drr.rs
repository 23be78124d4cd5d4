//! The deficit round robin of FQ-CoDel and FQ-PIE (RFC 8290 §4; Linux `fq_codel_dequeue`,
//! `fq_pie_qdisc_dequeue`): two lists of active queues, *new* (served first, so sparse flows
//! get priority) and *old*; a queue that used its quantum is topped up and moved to the tail
//! of old; a new queue found empty passes once through old before leaving (anti-starvation).

/// The flow queue of a packet among `buckets`: a seeded SplitMix64 mix of its flow key (our
/// stand-in for the kernel's skb hash, which hashes headers the simulator does not have), mapped
/// to a bucket as `fq_codel_hash` and `fq_pie_classify` do, `reciprocal_scale(hash, flows)`
/// (include/linux/kernel.h: `((u64)val * ep_ro) >> 32` on a 32-bit hash) — a multiply, not a
/// division.
pub fn flow_bucket(flow_key: u64, hash_seed: u64, buckets: u32) -> usize {
    let mut z = flow_key ^ hash_seed;
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (((z >> 32) * buckets as u64) >> 32) as usize
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum List {
    None,
    New,
    Old,
}

/// No queue (end of a list).
const NONE: u32 = u32::MAX;

/// A list of queues threaded through `QueueState::next`, as the kernel threads
/// `fq_codel_flow.flowchain` (a queue is on at most one list at a time).
#[derive(Clone, Copy, Debug)]
struct Chain {
    head: u32,
    tail: u32,
}

impl Chain {
    const EMPTY: Chain = Chain { head: NONE, tail: NONE };
}

#[derive(Clone, Copy, Debug)]
struct QueueState {
    deficit: i64,
    /// The next queue on the same list.
    next: u32,
    list: List,
}

#[derive(Clone, Debug)]
pub struct Drr {
    quantum: i64,
    /// Per queue, in one 16-byte record: the scheduler reads all three fields of a queue at
    /// its turn, and the queues in use are scattered over `flows` slots, so one cache line
    /// per queue instead of three.
    queues: Vec<QueueState>,
    new_flows: Chain,
    old_flows: Chain,
}

/// What the scheduler offers next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Turn {
    pub queue: usize,
    from_new: bool,
}

impl Drr {
    pub fn new(queues: usize, quantum: u32) -> Self {
        assert!(queues < NONE as usize, "at most 2³² − 1 queues");
        Drr {
            quantum: quantum as i64,
            queues: vec![QueueState { deficit: 0, next: NONE, list: List::None }; queues],
            new_flows: Chain::EMPTY,
            old_flows: Chain::EMPTY,
        }
    }

    fn push_back(queues: &mut [QueueState], chain: &mut Chain, q: usize) {
        queues[q].next = NONE;
        match chain.tail {
            NONE => chain.head = q as u32,
            t => queues[t as usize].next = q as u32,
        }
        chain.tail = q as u32;
    }

    fn pop_front(&mut self, t: Turn) {
        let chain = if t.from_new { &mut self.new_flows } else { &mut self.old_flows };
        debug_assert_eq!(chain.head as usize, t.queue);
        chain.head = self.queues[t.queue].next;
        if chain.head == NONE {
            chain.tail = NONE;
        }
    }

    /// A packet was added to `q`: an idle queue joins the new list with a full quantum.
    /// Returns whether it became active.
    pub fn activate(&mut self, q: usize) -> bool {
        if self.queues[q].list != List::None {
            return false;
        }
        self.queues[q].list = List::New;
        self.queues[q].deficit = self.quantum;
        Self::push_back(&mut self.queues, &mut self.new_flows, q);
        true
    }

    /// The queue whose turn it is, after topping up and rotating queues that used their
    /// quantum. None if no queue is active.
    pub fn next(&mut self) -> Option<Turn> {
        loop {
            let t = match (self.new_flows.head, self.old_flows.head) {
                (NONE, NONE) => return None,
                (NONE, q) => Turn { queue: q as usize, from_new: false },
                (q, _) => Turn { queue: q as usize, from_new: true },
            };
            if self.queues[t.queue].deficit > 0 {
                return Some(t);
            }
            self.queues[t.queue].deficit += self.quantum;
            self.pop_front(t);
            self.queues[t.queue].list = List::Old;
            Self::push_back(&mut self.queues, &mut self.old_flows, t.queue);
        }
    }

    /// The queue of `t` had nothing to send.
    pub fn empty(&mut self, t: Turn) {
        self.pop_front(t);
        if t.from_new && self.old_flows.head != NONE {
            self.queues[t.queue].list = List::Old;
            Self::push_back(&mut self.queues, &mut self.old_flows, t.queue);
        } else {
            self.queues[t.queue].list = List::None;
        }
    }

    /// The queue of `t` sent `bytes`.
    pub fn charge(&mut self, t: Turn, bytes: u32) {
        self.queues[t.queue].deficit -= bytes as i64;
    }

    pub fn clear(&mut self) {
        self.new_flows = Chain::EMPTY;
        self.old_flows = Chain::EMPTY;
        self.queues.iter_mut().for_each(|q| *q = QueueState { deficit: 0, next: NONE, list: List::None });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// RFC 8290 §4.2's scheduler written the obvious way, with two double-ended queues.
    struct Reference {
        quantum: i64,
        deficit: Vec<i64>,
        list: Vec<List>,
        new_flows: VecDeque<usize>,
        old_flows: VecDeque<usize>,
    }

    impl Reference {
        fn activate(&mut self, q: usize) {
            if self.list[q] == List::None {
                self.list[q] = List::New;
                self.deficit[q] = self.quantum;
                self.new_flows.push_back(q);
            }
        }

        /// Serve one packet of `len` bytes from the first queue with credit whose backlog
        /// (`backlog[q]` packets) is not empty; the queue served, if any.
        fn serve(&mut self, backlog: &mut [u32], len: u32) -> Option<usize> {
            loop {
                let (q, from_new) = match self.new_flows.front() {
                    Some(&q) => (q, true),
                    None => (*self.old_flows.front()?, false),
                };
                if self.deficit[q] <= 0 {
                    self.deficit[q] += self.quantum;
                    if from_new { self.new_flows.pop_front() } else { self.old_flows.pop_front() };
                    self.list[q] = List::Old;
                    self.old_flows.push_back(q);
                    continue;
                }
                if backlog[q] == 0 {
                    if from_new { self.new_flows.pop_front() } else { self.old_flows.pop_front() };
                    if from_new && !self.old_flows.is_empty() {
                        self.list[q] = List::Old;
                        self.old_flows.push_back(q);
                    } else {
                        self.list[q] = List::None;
                    }
                    continue;
                }
                backlog[q] -= 1;
                self.deficit[q] -= len as i64;
                return Some(q);
            }
        }
    }

    fn serve(d: &mut Drr, backlog: &mut [u32], len: u32) -> Option<usize> {
        loop {
            let t = d.next()?;
            if backlog[t.queue] == 0 {
                d.empty(t);
                continue;
            }
            backlog[t.queue] -= 1;
            d.charge(t, len);
            return Some(t.queue);
        }
    }

    proptest::proptest! {
        /// The threaded lists serve queues in exactly the order of the two-deque reference,
        /// through arrivals, empties, rotations and the new→old pass of an emptied new queue.
        #[test]
        fn the_threaded_lists_serve_in_the_reference_order(
            ops in proptest::collection::vec((0usize..6, 0u8..3, 60u32..1600), 1..400),
        ) {
            let quantum = 1514;
            let mut d = Drr::new(6, quantum);
            let mut r = Reference { quantum: quantum as i64, deficit: vec![0; 6], list: vec![List::None; 6], new_flows: VecDeque::new(), old_flows: VecDeque::new() };
            let (mut b1, mut b2) = (vec![0u32; 6], vec![0u32; 6]);
            for (q, op, len) in ops {
                if op < 2 {
                    b1[q] += 1;
                    b2[q] += 1;
                    d.activate(q);
                    r.activate(q);
                } else {
                    proptest::prop_assert_eq!(serve(&mut d, &mut b1, len), r.serve(&mut b2, len));
                }
            }
        }
    }

    #[test]
    fn flow_bucket_is_reciprocal_scale_of_the_hash_top_half() {
        // reciprocal_scale(val, n) = (val · n) >> 32 maps the 32-bit hash range onto n buckets
        // in order: val = 0 → 0, val = 2³² − 1 → n − 1, each bucket ≈ 2³²/n values wide; and a
        // thousand keys over 1024 buckets fill the range roughly uniformly.
        let mut hits = [0u32; 4];
        for k in 0..4000u64 {
            let b = flow_bucket(k, 7, 1024);
            assert!(b < 1024);
            hits[b / 256] += 1;
        }
        assert!(hits.iter().all(|&h| (850..1150).contains(&h)), "{hits:?}");
        assert_eq!(flow_bucket(3, 7, 1), 0);
    }
}
