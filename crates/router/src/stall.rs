//! The stall probe's logic: how late a thread that asks to wake on a fixed grid of deadlines
//! actually wakes, and which of those wake-ups count as stalls of its CPU.
//!
//! The `aqmlab-stallprobe` binary runs this on each CPU of the testbed, pinned and under
//! SCHED_FIFO at the highest priority, so that nothing of the testbed's own (the router, the
//! senders, the receiver) can delay it: a wake-up that comes late is time its CPU ran nothing
//! schedulable — a virtual CPU the hypervisor did not run, or interrupt and softirq work. On
//! the emulator's VM the first kind dominates (stalls of 1.4–1.6 ms, bench/README.md
//! §Emulator), and BBR's bandwidth estimate reacts to them (docs/fidelity.md).
//!
//! Sans-IO, as [`crate::pipeline`]: the binary passes the clock in.

/// Deadlines are this far apart, ns. Well below the stalls that matter (≥ 1 ms) and well above
/// a timer wake-up's own latency on the VM (tens of µs, `late_p50_ns` of the router). 500 µs;
/// the value is ours. A stall is read from the first deadline inside it, so its length is the
/// lateness plus up to one period (the mean: half a period, with the stall starting at a
/// uniform phase of the grid).
pub const PERIOD_NS: u64 = 500_000;
/// A wake-up later than this is recorded as a stall, ns: above the timer's own latency, below
/// the stalls that matter. 300 µs; the value is ours.
pub const THRESHOLD_NS: u64 = 300_000;

/// The deadlines and the stalls seen so far on one CPU.
#[derive(Debug, Clone)]
pub struct Probe {
    next_ns: u64,
    end_ns: u64,
    /// Wake-ups so far (each deadline met, late or not).
    pub wakeups: u64,
    /// (deadline, lateness) of every wake-up later than [`THRESHOLD_NS`], ns, in time order.
    pub stalls: Vec<(u64, u64)>,
}

impl Probe {
    /// A probe whose first deadline is `start_ns` and which stops at `end_ns` (CLOCK_MONOTONIC).
    pub fn new(start_ns: u64, end_ns: u64) -> Self {
        Self {
            next_ns: start_ns,
            end_ns,
            wakeups: 0,
            stalls: Vec::new(),
        }
    }

    /// The deadline to sleep to, or None once the window is over.
    pub fn deadline(&self) -> Option<u64> {
        (self.next_ns < self.end_ns).then_some(self.next_ns)
    }

    /// The thread woke at `now_ns` for the current deadline. A stall longer than a period has
    /// passed later deadlines too: they are one stall, not several, so the next deadline is
    /// the first on the grid after `now_ns`.
    pub fn woke(&mut self, now_ns: u64) {
        let deadline = self.next_ns;
        self.wakeups += 1;
        let late = now_ns.saturating_sub(deadline);
        if late > THRESHOLD_NS {
            self.stalls.push((deadline, late));
        }
        self.next_ns = deadline + PERIOD_NS * (late / PERIOD_NS + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_on_time_grid_records_nothing_and_counts_every_deadline() {
        let mut p = Probe::new(1_000, 1_000 + 10 * PERIOD_NS);
        while let Some(d) = p.deadline() {
            p.woke(d + 20_000);
        }
        assert_eq!(p.wakeups, 10);
        assert!(p.stalls.is_empty());
    }

    #[test]
    fn a_late_wakeup_is_one_stall_and_the_grid_resumes_after_it() {
        let mut p = Probe::new(0, 100 * PERIOD_NS);
        p.woke(0);
        // Deadline 0 on time; deadline 500 µs woken 1.6 ms late: the deadlines at 1.0, 1.5 and
        // 2.0 ms were inside the stall; the next is 2.5 ms, the first on the grid after 2.1 ms.
        p.woke(PERIOD_NS + 1_600_000);
        assert_eq!(p.stalls, vec![(PERIOD_NS, 1_600_000)]);
        assert_eq!(p.deadline(), Some(5 * PERIOD_NS));
        // Exactly the threshold is not a stall; one ns more is.
        p.woke(5 * PERIOD_NS + THRESHOLD_NS);
        assert_eq!(p.stalls.len(), 1);
        p.woke(6 * PERIOD_NS + THRESHOLD_NS + 1);
        assert_eq!(p.stalls.last(), Some(&(6 * PERIOD_NS, THRESHOLD_NS + 1)));
        assert_eq!(p.wakeups, 4);
    }

    #[test]
    fn the_window_ends_at_its_end() {
        let mut p = Probe::new(0, 2 * PERIOD_NS);
        p.woke(0);
        p.woke(PERIOD_NS + 3 * PERIOD_NS); // a stall past the end
        assert_eq!(p.deadline(), None);
    }
}
