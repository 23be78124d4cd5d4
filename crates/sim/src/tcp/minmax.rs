//! Kathleen Nichols' windowed min/max filter, as Linux's `lib/win_minmax.c`
//! (`minmax_running_min`, `minmax_running_max`, `minmax_subwin_update`): the best value over a
//! sliding window, kept with three samples (best, 2nd best from a later quarter, 3rd best from
//! a later half), O(1) per update. Used for `min_rtt` (window `tcp_min_rtt_wlen` = 300 s) and by
//! BBR for its bandwidth and min-RTT filters.

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Sample {
    t: u64,
    v: u64,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct MinMax {
    s: [Sample; 3],
}

impl MinMax {
    pub fn get(&self) -> u64 {
        self.s[0].v
    }

    pub fn reset(&mut self, t: u64, v: u64) -> u64 {
        let s = Sample { t, v };
        self.s = [s, s, s];
        v
    }

    /// `minmax_subwin_update`: age out samples older than the window, and take fresher
    /// 2nd/3rd choices once a quarter/half of the window has passed without a new best.
    fn subwin_update(&mut self, win: u64, val: Sample) -> u64 {
        let dt = val.t - self.s[0].t;
        if dt > win {
            // The whole window passed without a new best: promote the 2nd and 3rd choices;
            // the 2nd may itself be stale, so possibly twice.
            self.s[0] = self.s[1];
            self.s[1] = self.s[2];
            self.s[2] = val;
            if val.t - self.s[0].t > win {
                self.s[0] = self.s[1];
                self.s[1] = self.s[2];
                self.s[2] = val;
            }
        } else if self.s[1].t == self.s[0].t && dt > win / 4 {
            // A quarter of the window passed: take a 2nd choice from the 2nd quarter.
            self.s[2] = val;
            self.s[1] = val;
        } else if self.s[2].t == self.s[1].t && dt > win / 2 {
            // Half the window passed: take a 3rd choice from the last half.
            self.s[2] = val;
        }
        self.s[0].v
    }

    /// `minmax_running_min`.
    pub fn running_min(&mut self, win: u64, t: u64, v: u64) -> u64 {
        let val = Sample { t, v };
        if val.v <= self.s[0].v || val.t - self.s[2].t > win {
            return self.reset(t, v);
        }
        if val.v <= self.s[1].v {
            self.s[2] = val;
            self.s[1] = val;
        } else if val.v <= self.s[2].v {
            self.s[2] = val;
        }
        self.subwin_update(win, val)
    }

    /// `minmax_running_max`.
    pub fn running_max(&mut self, win: u64, t: u64, v: u64) -> u64 {
        let val = Sample { t, v };
        if val.v >= self.s[0].v || val.t - self.s[2].t > win {
            return self.reset(t, v);
        }
        if val.v >= self.s[1].v {
            self.s[2] = val;
            self.s[1] = val;
        } else if val.v >= self.s[2].v {
            self.s[2] = val;
        }
        self.subwin_update(win, val)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_forgets_a_low_sample_after_the_window() {
        let mut m = MinMax::default();
        m.reset(0, 10);
        assert_eq!(m.running_min(100, 10, 20), 10);
        assert_eq!(m.running_min(100, 60, 15), 10);
        // At t = 150 the sample from t = 0 is out of the window: the best in (50, 150] is 15.
        assert_eq!(m.running_min(100, 150, 30), 15);
    }

    #[test]
    fn max_tracks_a_new_maximum_immediately() {
        let mut m = MinMax::default();
        m.reset(0, 5);
        assert_eq!(m.running_max(10, 1, 3), 5);
        assert_eq!(m.running_max(10, 2, 8), 8);
    }
}
