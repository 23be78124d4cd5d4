//! The deficit round robin of FQ-CoDel and FQ-PIE (RFC 8290 §4; Linux `fq_codel_dequeue`,
//! `fq_pie_qdisc_dequeue`): two lists of active queues, *new* (served first, so sparse flows
//! get priority) and *old*; a queue that used its quantum is topped up and moved to the tail
//! of old; a new queue found empty passes once through old before leaving (anti-starvation).

use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum List {
    None,
    New,
    Old,
}

#[derive(Clone, Debug)]
pub struct Drr {
    quantum: i64,
    deficit: Vec<i64>,
    list: Vec<List>,
    new_flows: VecDeque<usize>,
    old_flows: VecDeque<usize>,
}

/// What the scheduler offers next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Turn {
    pub queue: usize,
    from_new: bool,
}

impl Drr {
    pub fn new(queues: usize, quantum: u32) -> Self {
        Drr { quantum: quantum as i64, deficit: vec![0; queues], list: vec![List::None; queues], new_flows: VecDeque::new(), old_flows: VecDeque::new() }
    }

    /// A packet was added to `q`: an idle queue joins the new list with a full quantum.
    /// Returns whether it became active.
    pub fn activate(&mut self, q: usize) -> bool {
        if self.list[q] != List::None {
            return false;
        }
        self.list[q] = List::New;
        self.deficit[q] = self.quantum;
        self.new_flows.push_back(q);
        true
    }

    fn pop_front(&mut self, t: Turn) {
        if t.from_new {
            self.new_flows.pop_front();
        } else {
            self.old_flows.pop_front();
        }
    }

    /// The queue whose turn it is, after topping up and rotating queues that used their
    /// quantum. None if no queue is active.
    pub fn next(&mut self) -> Option<Turn> {
        loop {
            let t = match self.new_flows.front() {
                Some(&q) => Turn { queue: q, from_new: true },
                None => Turn { queue: *self.old_flows.front()?, from_new: false },
            };
            if self.deficit[t.queue] > 0 {
                return Some(t);
            }
            self.deficit[t.queue] += self.quantum;
            self.pop_front(t);
            self.list[t.queue] = List::Old;
            self.old_flows.push_back(t.queue);
        }
    }

    /// The queue of `t` had nothing to send.
    pub fn empty(&mut self, t: Turn) {
        self.pop_front(t);
        if t.from_new && !self.old_flows.is_empty() {
            self.list[t.queue] = List::Old;
            self.old_flows.push_back(t.queue);
        } else {
            self.list[t.queue] = List::None;
        }
    }

    /// The queue of `t` sent `bytes`.
    pub fn charge(&mut self, t: Turn, bytes: u32) {
        self.deficit[t.queue] -= bytes as i64;
    }

    pub fn clear(&mut self) {
        self.new_flows.clear();
        self.old_flows.clear();
        self.list.iter_mut().for_each(|l| *l = List::None);
        self.deficit.iter_mut().for_each(|d| *d = 0);
    }
}
