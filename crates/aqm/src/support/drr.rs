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

/// No queue (end of a list; or, as a queue's `next`, not on any list).
const NONE: u32 = u32::MAX;

/// The scheduler's state of one queue. It lives in the discipline's own per-queue record
/// ([`Scheduled`]), as `deficit` and `flowchain` live in Linux's `struct fq_codel_flow` beside
/// the flow's packets and CoDel state: a queue's turn then reads one record, not one here and
/// one there.
#[derive(Clone, Copy, Debug)]
pub struct QueueState {
    /// Bytes the queue may still send in this round (Linux `flow->deficit`).
    deficit: i64,
    /// The next queue on the same list, or `NONE` while the queue is on no list (idle): a
    /// listed queue always has a successor, itself if it is alone (the lists are circular).
    next: u32,
}

impl Default for QueueState {
    fn default() -> Self {
        QueueState {
            deficit: 0,
            next: NONE,
        }
    }
}

impl QueueState {
    /// On the new or the old list (Linux: `!list_empty(&flow->flowchain)`).
    #[inline]
    fn is_listed(&self) -> bool {
        self.next != NONE
    }

    /// The queue sent `bytes`.
    #[inline]
    pub fn charge(&mut self, bytes: u32) {
        self.deficit -= bytes as i64;
    }
}

/// A per-queue record that holds its queue's [`QueueState`].
pub trait Scheduled {
    fn drr(&mut self) -> &mut QueueState;
}

/// A list of queues threaded through `QueueState::next`, as the kernel threads
/// `fq_codel_flow.flowchain` (a queue is on at most one list at a time). The thread is
/// circular — the tail's `next` is the head — so moving the head to the tail, the scheduler's
/// commonest step (a queue that used its quantum goes to the back of old_flows), is a move of
/// `tail` and `head` that writes no queue's record.
#[derive(Clone, Copy, Debug)]
struct Chain {
    head: u32,
    tail: u32,
}

impl Chain {
    const EMPTY: Chain = Chain {
        head: NONE,
        tail: NONE,
    };

    #[inline]
    fn push_back<Q: Scheduled>(&mut self, queues: &mut [Q], q: usize) {
        if self.head == NONE {
            queues[q].drr().next = q as u32;
            self.head = q as u32;
        } else {
            queues[q].drr().next = self.head;
            queues[self.tail as usize].drr().next = q as u32;
        }
        self.tail = q as u32;
    }

    /// Unlink the head, which the caller marks idle or links elsewhere.
    #[inline]
    fn pop_front<Q: Scheduled>(&mut self, queues: &mut [Q]) {
        if self.head == self.tail {
            *self = Chain::EMPTY;
        } else {
            self.head = queues[self.head as usize].drr().next;
            queues[self.tail as usize].drr().next = self.head;
        }
    }

    /// The head goes to the tail: pop_front then push_back of the same queue, which on a
    /// circular thread only moves the two ends.
    #[inline]
    fn rotate(&mut self, head_next: u32) {
        self.tail = self.head;
        self.head = head_next;
    }
}

/// The two lists and the quantum; the per-queue state is in the caller's records.
#[derive(Clone, Debug)]
pub struct Drr {
    quantum: i64,
    new_flows: Chain,
    old_flows: Chain,
}

impl Drr {
    /// The scheduler of `queues` queues (their indices must fit the u32 links).
    pub fn new(queues: usize, quantum: u32) -> Self {
        assert!(queues < NONE as usize, "at most 2³² − 1 queues");
        Drr {
            quantum: quantum as i64,
            new_flows: Chain::EMPTY,
            old_flows: Chain::EMPTY,
        }
    }

    /// A packet was added to `queues[q]`: an idle queue joins the new list with a full
    /// quantum. Returns whether it became active.
    #[inline]
    pub fn activate<Q: Scheduled>(&mut self, queues: &mut [Q], q: usize) -> bool {
        let s = queues[q].drr();
        if s.is_listed() {
            return false;
        }
        s.deficit = self.quantum;
        self.new_flows.push_back(queues, q);
        true
    }

    /// The queue whose turn it is, after topping up and rotating queues that used their
    /// quantum. None if no queue is active.
    #[inline]
    pub fn next<Q: Scheduled>(&mut self, queues: &mut [Q]) -> Option<usize> {
        // New queues first; an exhausted one is topped up and moves to the tail of old.
        while self.new_flows.head != NONE {
            let q = self.new_flows.head as usize;
            let s = queues[q].drr();
            if s.deficit > 0 {
                return Some(q);
            }
            s.deficit += self.quantum;
            self.new_flows.pop_front(queues);
            self.old_flows.push_back(queues, q);
        }
        // Then old queues; an exhausted one is topped up and goes to the tail.
        loop {
            let q = self.old_flows.head;
            if q == NONE {
                return None;
            }
            let s = queues[q as usize].drr();
            if s.deficit > 0 {
                return Some(q as usize);
            }
            s.deficit += self.quantum;
            self.old_flows.rotate(s.next);
        }
    }

    /// The queue `q` just offered by [`Drr::next`] had nothing to send: a new queue passes
    /// once through old_flows (if any) before leaving, an old one leaves.
    #[inline]
    pub fn empty<Q: Scheduled>(&mut self, queues: &mut [Q], q: usize) {
        // `next` offers the head of new_flows whenever new_flows is not empty.
        if self.new_flows.head == q as u32 {
            self.new_flows.pop_front(queues);
            if self.old_flows.head != NONE {
                self.old_flows.push_back(queues, q);
                return;
            }
        } else {
            debug_assert_eq!(self.old_flows.head, q as u32);
            self.old_flows.pop_front(queues);
        }
        queues[q].drr().next = NONE;
    }

    /// Empty both lists; the caller resets its records' [`QueueState`]s.
    pub fn clear(&mut self) {
        self.new_flows = Chain::EMPTY;
        self.old_flows = Chain::EMPTY;
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
                    if from_new {
                        self.new_flows.pop_front()
                    } else {
                        self.old_flows.pop_front()
                    };
                    self.list[q] = List::Old;
                    self.old_flows.push_back(q);
                    continue;
                }
                if backlog[q] == 0 {
                    if from_new {
                        self.new_flows.pop_front()
                    } else {
                        self.old_flows.pop_front()
                    };
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

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum List {
        None,
        New,
        Old,
    }

    impl Scheduled for QueueState {
        fn drr(&mut self) -> &mut QueueState {
            self
        }
    }

    fn serve(
        d: &mut Drr,
        queues: &mut [QueueState],
        backlog: &mut [u32],
        len: u32,
    ) -> Option<usize> {
        loop {
            let q = d.next(queues)?;
            if backlog[q] == 0 {
                d.empty(queues, q);
                continue;
            }
            backlog[q] -= 1;
            queues[q].charge(len);
            return Some(q);
        }
    }

    /// The queues of a circular chain, head first, following `next` from the head to the tail.
    fn members(chain: Chain, queues: &[QueueState]) -> Vec<usize> {
        let mut v = vec![];
        if chain.head == NONE {
            assert_eq!(chain.tail, NONE);
            return v;
        }
        let mut q = chain.head;
        loop {
            v.push(q as usize);
            if q == chain.tail {
                break;
            }
            q = queues[q as usize].next;
            assert!(v.len() <= queues.len(), "a cycle that misses the tail");
        }
        assert_eq!(
            queues[chain.tail as usize].next, chain.head,
            "the tail links back to the head"
        );
        v
    }

    proptest::proptest! {
        /// The circular threaded lists serve queues in exactly the order of the two-deque
        /// reference, through arrivals, empties, rotations and the new→old pass of an emptied
        /// new queue; after every step both lists hold the reference's queues in its order,
        /// with its deficits, and exactly the unlisted queues are marked idle.
        #[test]
        fn the_threaded_lists_serve_in_the_reference_order(
            ops in proptest::collection::vec((0usize..6, 0u8..3, 60u32..1600), 1..400),
        ) {
            let quantum = 1514;
            let mut d = Drr::new(6, quantum);
            let mut queues = vec![QueueState::default(); 6];
            let mut r = Reference { quantum: quantum as i64, deficit: vec![0; 6], list: vec![List::None; 6], new_flows: VecDeque::new(), old_flows: VecDeque::new() };
            let (mut b1, mut b2) = (vec![0u32; 6], vec![0u32; 6]);
            for (q, op, len) in ops {
                if op < 2 {
                    b1[q] += 1;
                    b2[q] += 1;
                    let was_idle = r.list[q] == List::None;
                    proptest::prop_assert_eq!(d.activate(&mut queues, q), was_idle);
                    r.activate(q);
                } else {
                    proptest::prop_assert_eq!(serve(&mut d, &mut queues, &mut b1, len), r.serve(&mut b2, len));
                }
                proptest::prop_assert_eq!(members(d.new_flows, &queues), r.new_flows.iter().copied().collect::<Vec<_>>());
                proptest::prop_assert_eq!(members(d.old_flows, &queues), r.old_flows.iter().copied().collect::<Vec<_>>());
                for (i, queue) in queues.iter().enumerate() {
                    proptest::prop_assert_eq!(queue.is_listed(), r.list[i] != List::None);
                    if r.list[i] != List::None {
                        proptest::prop_assert_eq!(queue.deficit, r.deficit[i]);
                    }
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
