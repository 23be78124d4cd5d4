//! Many FIFO queues in one slab of packet slots, for the flow-queueing disciplines (FQ-CoDel,
//! FQ-PIE). Linux keeps each flow's packets as a singly linked list of skbs
//! (`fq_codel_flow.head`/`tail`, `flow_queue_add`, `dequeue_head` in sch_fq_codel.c); here the
//! links are slot indices into one slab, and freed slots are reused last-in first-out, so the
//! slots in use are as few as the packets queued and the next arrival's slot is the one a
//! departure just left, still in cache. (A ring buffer per flow queue grows to that queue's
//! own peak, and the sum of those rings over the active queues is a cold working set: the
//! stores of arrivals into them were the largest single cost of FQ-CoDel in scenario (a).)

/// End of a list.
const NONE: u32 = u32::MAX;

/// One flow queue: its ends in the pool and its byte backlog.
#[derive(Clone, Copy, Debug)]
pub struct List {
    head: u32,
    tail: u32,
    bytes: u64,
}

impl Default for List {
    fn default() -> Self {
        List {
            head: NONE,
            tail: NONE,
            bytes: 0,
        }
    }
}

impl List {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.head == NONE
    }
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// A slot of the slab: a packet (None while free) and the link to the next slot of its list
/// (or of the free list), side by side, so that a pop reads one record and the prefetch of a
/// list's next head fetches its link too.
#[derive(Clone, Debug)]
struct Slot<P> {
    pkt: Option<P>,
    next: u32,
}

/// The slab of slots and the head of its free list.
#[derive(Clone, Debug)]
pub struct Pool<P> {
    slots: Vec<Slot<P>>,
    free: u32,
}

impl<P> Default for Pool<P> {
    fn default() -> Self {
        Pool {
            slots: Vec::new(),
            free: NONE,
        }
    }
}

impl<P: crate::Packet> Pool<P> {
    /// Append `pkt` to the tail of `list`.
    ///
    /// Always inlined, as `pop`: both run once per packet inside the discipline's enqueue or
    /// dequeue, and out of line the packet is copied through the stack on the way in or out.
    #[inline(always)]
    pub fn push(&mut self, list: &mut List, pkt: P) {
        list.bytes += pkt.wire_len() as u64;
        let i = match self.free {
            NONE => {
                assert!(
                    self.slots.len() < NONE as usize,
                    "at most 2³² − 1 queued packets"
                );
                self.slots.push(Slot {
                    pkt: Some(pkt),
                    next: NONE,
                });
                self.slots.len() as u32 - 1
            }
            i => {
                let slot = &mut self.slots[i as usize];
                self.free = slot.next;
                *slot = Slot {
                    pkt: Some(pkt),
                    next: NONE,
                };
                i
            }
        };
        match list.tail {
            NONE => list.head = i,
            t => self.slots[t as usize].next = i,
        }
        list.tail = i;
    }

    /// Remove the packet at the head of `list`.
    #[inline(always)]
    pub fn pop(&mut self, list: &mut List) -> Option<P> {
        let i = list.head;
        if i == NONE {
            return None;
        }
        let slot = &mut self.slots[i as usize];
        list.bytes -= slot
            .pkt
            .as_ref()
            .expect("a listed slot holds a packet")
            .wire_len() as u64;
        list.head = slot.next;
        slot.next = self.free;
        self.free = i;
        // Taken whole, as the `Option` it is stored in, and handed on as such: no unwrapping
        // and rewrapping of the packet on its way out.
        let pkt = slot.pkt.take();
        if list.head == NONE {
            list.tail = NONE;
        } else {
            prefetch(&self.slots[list.head as usize]);
        }
        pkt
    }

    /// The packet at the head of `list`.
    #[inline]
    pub fn head(&self, list: &List) -> Option<&P> {
        (list.head != NONE).then(|| {
            self.slots[list.head as usize]
                .pkt
                .as_ref()
                .expect("a listed slot holds a packet")
        })
    }

    /// The packet at the head of `list`, to change in place.
    #[inline(always)]
    pub fn head_mut(&mut self, list: &List) -> Option<&mut P> {
        (list.head != NONE).then(|| {
            self.slots[list.head as usize]
                .pkt
                .as_mut()
                .expect("a listed slot holds a packet")
        })
    }

    /// Remove every packet of `list`, in order.
    pub fn drain(&mut self, list: &mut List) -> Vec<P> {
        std::iter::from_fn(|| self.pop(list)).collect()
    }
}

/// Ask the CPU to bring `slot` into cache: the list's new head is read at the queue's next
/// turn, a round of the scheduler later, and slots reused out of order are not prefetched by the
/// hardware as a ring's sequential reads are (its miss was half of FQ-CoDel's dequeue cost).
#[inline]
fn prefetch<T>(slot: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it reads nothing architecturally and cannot fault.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (slot as *const T).cast(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = slot;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{pkt, TestPkt};
    use crate::Ecn;
    use std::collections::VecDeque;

    proptest::proptest! {
        /// Interleaved pushes and pops on several lists behave as one `VecDeque` per list
        /// (order, lengths, bytes), and the slab never holds more slots than the most packets
        /// ever queued at once.
        #[test]
        fn lists_behave_as_separate_fifos(ops in proptest::collection::vec((0usize..5, proptest::bool::ANY, 40u32..1600), 1..600)) {
            let mut pool: Pool<TestPkt> = Pool::default();
            let mut lists = [List::default(); 5];
            let mut reference: Vec<VecDeque<TestPkt>> = vec![VecDeque::new(); 5];
            let (mut queued, mut peak) = (0usize, 0usize);
            for (k, (q, push, len)) in ops.into_iter().enumerate() {
                if push {
                    let p = pkt(k as u64, len, Ecn::NotEct);
                    pool.push(&mut lists[q], p);
                    reference[q].push_back(p);
                    queued += 1;
                    peak = peak.max(queued);
                } else {
                    let got = pool.pop(&mut lists[q]).map(|p| p.flow);
                    let want = reference[q].pop_front().map(|p| p.flow);
                    if want.is_some() {
                        queued -= 1;
                    }
                    proptest::prop_assert_eq!(got, want);
                }
                proptest::prop_assert_eq!(pool.head(&lists[q]).map(|p| p.flow), reference[q].front().map(|p| p.flow));
                proptest::prop_assert_eq!(pool.head_mut(&lists[q]).map(|p| p.flow), reference[q].front().map(|p| p.flow));
                proptest::prop_assert_eq!(lists[q].is_empty(), reference[q].is_empty());
                proptest::prop_assert_eq!(lists[q].bytes(), reference[q].iter().map(|p| p.len as u64).sum::<u64>());
                proptest::prop_assert!(pool.slots.len() <= peak);
            }
            for q in 0..5 {
                let rest: Vec<u64> = pool.drain(&mut lists[q]).iter().map(|p| p.flow).collect();
                proptest::prop_assert_eq!(rest, reference[q].iter().map(|p| p.flow).collect::<Vec<_>>());
                proptest::prop_assert!(lists[q].is_empty());
            }
        }
    }
}
