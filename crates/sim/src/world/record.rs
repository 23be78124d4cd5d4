//! Recording a run's results: the measurement window's start, the time series taken every
//! interval while the run goes, and at its end the run's records ([`results::RunRecord`]),
//! from which `crates/results` computes the summary and the tables.

use aqm::Qdisc;

use super::{filled, reserve, RunError, World};
use crate::results::{QueueRow, SampleRow};
use results::record::{ClassRecord, FlowRecord, RunRecord, SampleRecord};

impl World {
    pub(super) fn mark_window_start(&mut self) {
        for (f, flow) in self.flows.iter().enumerate() {
            self.fm[f].delivered_at_warmup = Some(flow.receiver.delivered_bytes);
        }
    }

    pub(super) fn take_sample(&mut self) -> Result<(), RunError> {
        let now = self.sched.now();
        let iv = self.cfg.measure.interval_ns;
        // Only flows under way: not yet started, or completed before this interval, have
        // nothing to show (and a workload has thousands of them).
        // A stopped flow likewise once its sender is done (its last data acknowledged).
        while let Some(&f) = self.sample_order.get(self.next_sampled) {
            if self.flows[f as usize].start_ns > now {
                break;
            }
            let at = self.sampled.partition_point(|&g| g < f);
            self.sampled.insert(at, f);
            self.next_sampled += 1;
        }
        let flows = &self.flows;
        self.sampled.retain(|&f| {
            let flow = &flows[f as usize];
            !(flow.receiver.completed_at.is_some_and(|t| t + iv <= now)
                || (flow.stop_ns.is_some()
                    && flow.sender.finished_at.is_some_and(|t| t + iv <= now)))
        });
        if self.samples.capacity() - self.samples.len() < self.sampled.len() {
            let grow = self.sampled.len().max(self.samples.len());
            self.samples.try_reserve(grow).map_err(|_| {
                RunError::OutOfMemory(format!(
                    "cannot grow the time series beyond {} rows",
                    self.samples.len()
                ))
            })?;
        }
        if self.queue_samples.len() == self.queue_samples.capacity() {
            self.queue_samples
                .try_reserve(self.queue_samples.len().max(64))
                .map_err(|_| RunError::OutOfMemory("cannot grow the queue table".into()))?;
        }
        for &f in &self.sampled {
            let (f, flow) = (f as usize, &self.flows[f as usize]);
            let d = flow.receiver.delivered_bytes;
            let prev = self.fm[f].delivered_at_last_sample;
            self.fm[f].delivered_at_last_sample = d;
            let s = flow.sender.sample();
            self.samples.push(SampleRow {
                t_ns: now,
                flow: f as u32,
                class: flow.class as u32,
                throughput_bps: (d - prev) as f64 * 8e9 / iv as f64,
                cwnd: s.cwnd,
                ssthresh: s.ssthresh,
                inflight: s.inflight,
                srtt_us: s.srtt_us,
                pacing_rate_bps: s.pacing_rate as f64 * 8.0,
                ca_state: s.ca_state,
                cc: s.cc,
            });
        }
        let in_tx = self.bottleneck.in_tx().map(|p| {
            (
                p.wire_len,
                self.bottleneck.tx_start_ns,
                self.bottleneck.tx_end_ns,
            )
        });
        let (sum, cnt, max, link, drops, marks) = self.qm.take_interval(now, in_tx);
        self.queue_samples.push(QueueRow {
            t_ns: now,
            qlen_pkts: self.bottleneck.qdisc.len() as u64,
            backlog_bytes: self.bottleneck.qdisc.backlog_bytes(),
            sojourn_mean_ns: if cnt > 0 {
                Some(sum as f64 / cnt as f64)
            } else {
                None
            },
            sojourn_max_ns: if cnt > 0 { Some(max) } else { None },
            link_bytes: link,
            drops,
            marks,
        });
        Ok(())
    }

    /// The run's records, for the summary and tables ([`results::collect`]). The packets still
    /// in the network are counted per flow (for the conservation identity sent = received +
    /// dropped + in network), and the part of a transmission in progress that falls inside
    /// the window is credited to the link. Fails when the records cannot be allocated.
    pub fn into_record(mut self) -> Result<RunRecord, RunError> {
        let cfg = &self.cfg;
        let mut in_network = filled(self.flows.len(), 0u64, "the flows' records")?;
        for p in self.bottleneck.qdisc.reset() {
            in_network[p.flow as usize] += 1;
        }
        if let Some(p) = self.bottleneck.in_tx() {
            in_network[p.flow as usize] += 1;
            let (s, e, len) = (
                self.bottleneck.tx_start_ns,
                self.bottleneck.tx_end_ns,
                p.wire_len,
            );
            self.qm.record_tx(len, s, e, cfg.warmup_ns, cfg.duration_ns);
        }
        for line in &self.fwd_lines {
            for p in line.iter() {
                in_network[p.flow as usize] += 1;
            }
        }
        if let Some(off) = &self.offloads {
            for p in off
                .nics
                .iter()
                .flat_map(|n| n.iter())
                .chain(off.gros.iter().flat_map(|g| g.iter()))
            {
                in_network[p.flow as usize] += 1;
            }
        }
        let mut flows: Vec<FlowRecord> = Vec::new();
        reserve(&mut flows, self.flows.len(), "the flows table")?;
        flows.extend(self.flows.iter().enumerate().map(|(f, flow)| {
            let m = &self.fm[f];
            let st = &flow.sender.stats;
            FlowRecord {
                class: flow.class,
                cc: flow.sender.kind_name().to_string(),
                start_ns: flow.start_ns,
                stop_ns: flow.stop_ns,
                size_bytes: flow.size_bytes,
                delivered_bytes: flow.receiver.delivered_bytes - m.delivered_at_warmup.unwrap_or(0),
                arrived_bytes: m.arrived_bytes,
                dropped_bytes: m.dropped_bytes,
                marked_bytes: m.marked_bytes,
                drops: m.drops,
                marks: m.marks,
                segs_sent: Some(st.segs_sent),
                wire_bytes_sent: Some(st.wire_bytes_sent),
                retrans_segs: Some(st.retrans_segs),
                rto_count: Some(st.rto_count),
                tlp_count: Some(st.tlp_count),
                recoveries: Some(st.recoveries),
                cwr_count: Some(st.cwr_count),
                segs_received: Some(flow.receiver.segs_received),
                total_dropped_pkts: Some(m.total_dropped_pkts),
                total_marked_pkts: Some(m.total_marked_pkts),
                end_in_network_pkts: Some(in_network[f]),
                fct_s: flow
                    .sender
                    .finished_at
                    .map(|t| (t - flow.start_ns) as f64 / 1e9),
            }
        }));
        let classes = cfg
            .classes
            .iter()
            .enumerate()
            .map(|(c, class)| {
                let idx: Vec<usize> = (0..flows.len()).filter(|&f| flows[f].class == c).collect();
                // A class without flows (a workload with no arrival) shows the first flow's CC.
                let cc = flows
                    .get(*idx.first().unwrap_or(&0))
                    .map(|f| f.cc.clone())
                    .unwrap_or_default();
                ClassRecord {
                    name: class.name.clone(),
                    cc,
                    rtt_ns: class.rtt_ns,
                    workload: class.workload.is_some(),
                    sojourn_sum_ns: idx.iter().map(|&f| self.fm[f].sojourn_sum_ns).sum(),
                    sojourn_count: idx.iter().map(|&f| self.fm[f].sojourn_count).sum(),
                }
            })
            .collect();
        let rows = std::mem::take(&mut self.samples);
        let mut samples: Vec<SampleRecord> = Vec::new();
        reserve(&mut samples, rows.len(), "the time series")?;
        samples.extend(rows.into_iter().map(|r| SampleRecord {
            t_ns: r.t_ns,
            flow: r.flow as u64,
            class: r.class as usize,
            throughput_bps: Some(r.throughput_bps),
            cwnd: Some(r.cwnd as u64),
            ssthresh: Some(r.ssthresh as u64),
            inflight: Some(r.inflight as u64),
            srtt_ms: Some(r.srtt_us as f64 / 1e3),
            pacing_rate_bps: Some(r.pacing_rate_bps),
            ca_state: Some(r.ca_state.to_string()),
            cc_phase: r.cc.phase.map(str::to_string),
            cc_bw_bps: r.cc.bw_bps,
            inflight_hi: r.cc.inflight_hi.map(f64::from),
            cc_alpha: r.cc.alpha,
        }));
        let mut counters = serde_json::Map::new();
        counters.insert("events".into(), self.sched.events_run.into());
        counters.insert("bottleneck_pkts".into(), self.bottleneck_pkts.into());
        counters.insert("dropped_pkts".into(), self.dropped_total.into());
        // Linux hosts: how many GRO packets the receivers got (every packet without offloads)
        // and how many ACKs they sent (data segments per ACK is the stretch-ACK ratio).
        if let Some(off) = &self.offloads {
            counters.insert("gro_packets".into(), off.gro_packets.into());
            counters.insert(
                "acks_sent".into(),
                self.flows
                    .iter()
                    .map(|f| f.receiver.acks_sent)
                    .sum::<u64>()
                    .into(),
            );
            // The senders' TSO/GSO packets (segments sent per skb is the burst size).
            counters.insert(
                "tso_skbs".into(),
                self.flows
                    .iter()
                    .map(|f| f.sender.stats.tso_skbs)
                    .sum::<u64>()
                    .into(),
            );
        }
        Ok(RunRecord {
            warmup_ns: cfg.warmup_ns,
            duration_ns: cfg.duration_ns,
            rate_bps: cfg.bottleneck.rate_bps,
            delay_target_ns: cfg.bottleneck.delay_target_ns,
            interval_ns: cfg.measure.interval_ns,
            hist_bin_ns: cfg.measure.hist_bin_ns,
            fct_bins_bytes: cfg.measure.fct_bins_bytes.clone(),
            classes,
            flows,
            samples,
            queue_samples: std::mem::take(&mut self.queue_samples),
            sojourn: self.qm.hist(),
            sojourn_sum_ns: self.qm.sojourn_sum_ns,
            sojourn_count: self.qm.sojourn_count,
            link_bytes: self.qm.link_bytes,
            counters,
        })
    }
}

#[cfg(test)]
mod tests {
    use aqm::Qdisc;
    use serde_json::json;

    use super::*;
    use crate::world::tests::{config, ran, tcp};

    /// Two Reno flows at 10 ms and one CUBIC at 40 ms into a 20-packet buffer at 10 Mbit/s,
    /// for 1 s (a whole number of 10 ms intervals) after `warmup_ns`.
    fn shared(warmup_ns: u64) -> World {
        ran(&config(
            10_000_000,
            20,
            json!({"kind": "taildrop"}),
            vec![
                tcp("reno", 2, 10_000_000, None),
                tcp("cubic", 1, 40_000_000, None),
            ],
            1_000_000_000,
            warmup_ns,
        ))
    }

    #[test]
    fn the_links_bytes_are_the_arrivals_less_drops_and_what_is_still_queued() {
        // Warmup 0: every wire byte that reached the bottleneck was dropped, is queued, is on
        // the wire, or was transmitted. The one on the wire at the end counts for the part of
        // its serialization before the end.
        let w = shared(0);
        let arrived: u64 = w.fm.iter().map(|m| m.arrived_bytes).sum();
        let dropped: u64 = w.fm.iter().map(|m| m.dropped_bytes).sum();
        let queued = w.bottleneck.qdisc.backlog_bytes();
        let (len, s, e) = w
            .bottleneck
            .in_tx()
            .map(|p| {
                (
                    p.wire_len as u64,
                    w.bottleneck.tx_start_ns,
                    w.bottleneck.tx_end_ns,
                )
            })
            .expect("the link is busy at the end");
        let transmitted = w.qm.link_bytes;
        assert!(dropped > 0);
        assert_eq!(transmitted, (arrived - dropped - queued - len) as f64);
        let end = w.cfg.duration_ns;
        let rec = w.into_record().unwrap();
        let on_the_wire = len as f64 * (end - s) as f64 / (e - s) as f64;
        assert!(
            (rec.link_bytes - (transmitted + on_the_wire)).abs() < 1e-6,
            "{} vs {transmitted} + {on_the_wire}",
            rec.link_bytes
        );
        assert_eq!(
            rec.flows.iter().map(|f| f.arrived_bytes).sum::<u64>(),
            arrived
        );
        assert_eq!(
            rec.flows.iter().map(|f| f.dropped_bytes).sum::<u64>(),
            dropped
        );
        // The queue table's intervals tile the run: their link bytes add up to the window's.
        let by_interval: f64 = rec.queue_samples.iter().map(|q| q.link_bytes).sum();
        assert_eq!(rec.queue_samples.len(), 100);
        assert!(
            (by_interval - rec.link_bytes).abs() < 1e-6,
            "{by_interval} vs {}",
            rec.link_bytes
        );
    }

    #[test]
    fn the_classes_sojourns_add_up_to_the_queues() {
        // Every departure in the window is one sojourn of its flow (so of its class) and one
        // of the queue; the histogram holds each of them once.
        let rec = shared(300_000_000).into_record().unwrap();
        assert!(rec.sojourn_count > 0);
        assert_eq!(
            rec.classes.iter().map(|c| c.sojourn_count).sum::<u64>(),
            rec.sojourn_count
        );
        assert_eq!(
            rec.classes.iter().map(|c| c.sojourn_sum_ns).sum::<u128>(),
            rec.sojourn_sum_ns
        );
        assert_eq!(rec.sojourn.count, rec.sojourn_count);
        assert_eq!(
            rec.sojourn.bins.iter().map(|b| b.2).sum::<u64>(),
            rec.sojourn_count
        );
        let names: Vec<(&str, &str, u64)> = rec
            .classes
            .iter()
            .map(|c| (c.name.as_str(), c.cc.as_str(), c.rtt_ns))
            .collect();
        assert_eq!(
            names,
            [("reno", "reno", 10_000_000), ("cubic", "cubic", 40_000_000)]
        );
    }

    #[test]
    fn a_finite_flows_time_series_adds_up_to_its_size() {
        // 200 kB at 10 Mbit/s is done within 1 s; the flow is sampled every 10 ms from its
        // start through the interval it completes in, so its samples' bytes add up to its size.
        let size = 200_000;
        let rec = ran(&config(
            10_000_000,
            100,
            json!({"kind": "taildrop"}),
            vec![tcp("cubic", 1, 20_000_000, Some(size))],
            1_000_000_000,
            0,
        ))
        .into_record()
        .unwrap();
        let f = &rec.flows[0];
        assert_eq!(
            (f.delivered_bytes, f.size_bytes, f.end_in_network_pkts),
            (size, Some(size), Some(0))
        );
        assert!(f.fct_s.is_some_and(|t| t < 1.0), "{:?}", f.fct_s);
        let iv_s = rec.interval_ns as f64 / 1e9;
        let bytes: f64 = rec
            .samples
            .iter()
            .map(|s| s.throughput_bps.unwrap() * iv_s / 8.0)
            .sum();
        assert!((bytes - size as f64).abs() < 1e-6, "{bytes}");
        assert!(
            rec.samples.len() < 100,
            "a completed flow leaves the time series"
        );
    }
}
