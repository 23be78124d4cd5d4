//! The event loop: the run from its first event to the end of the scenario, and what each
//! event does — a flow's start or stop, a transmission's end, a delay line's head, the hosts'
//! timers, NIC and GRO — moving packets hop by hop along their routes.

use super::{reserve, RunError, World};
use crate::engine::Event;
use crate::measure::Sink;
use crate::net::Hop;
use crate::packet::{AckPkt, DataPkt};
use crate::results::RunResult;

impl World {
    #[inline]
    fn in_window(&self) -> bool {
        self.sched.now() >= self.cfg.warmup_ns
    }

    /// Run to the end of the scenario. `progress` gets the fraction of simulated time done,
    /// now and then; returning false stops the run.
    pub fn run(mut self, progress: &mut dyn FnMut(f64) -> bool) -> Result<RunResult, RunError> {
        self.schedule_first_events()?;
        self.run_events(progress)?;
        progress(1.0);
        Ok(results::collect(self.into_record()?))
    }

    /// Schedule what the run starts from: every stop, the first start and the first sample.
    pub(super) fn schedule_first_events(&mut self) -> Result<(), RunError> {
        // Every stop is scheduled first, so that it runs before anything else due at the same
        // instant (events at one time run in scheduling order): a CBR datagram or an ACK at
        // exactly the stop time finds the application already stopped. Scheduled flows are
        // few (a workload has no stops), so these entries cost the heap little.
        for (f, flow) in self.flows.iter().enumerate() {
            if let Some(t) = flow.stop_ns.filter(|&t| t < self.cfg.duration_ns) {
                self.sched.schedule(t, Event::FlowStop(f as u32));
            }
        }
        // One pending start at a time (a workload has thousands of flows: keep the event heap
        // small); flows starting at the same instant start together, in flow order.
        reserve(&mut self.start_order, self.flows.len(), "the start order")?;
        self.start_order.extend(
            (0..self.flows.len() as u32)
                .filter(|&f| self.flows[f as usize].start_ns < self.cfg.duration_ns),
        );
        self.start_order
            .sort_by_key(|&f| (self.flows[f as usize].start_ns, f));
        if let Some(&f) = self.start_order.first() {
            self.sched
                .schedule(self.flows[f as usize].start_ns, Event::FlowStart(f));
        }
        reserve(&mut self.sample_order, self.flows.len(), "the sample order")?;
        self.sample_order.extend(0..self.flows.len() as u32);
        self.sample_order
            .sort_by_key(|&f| (self.flows[f as usize].start_ns, f));
        if self.cfg.measure.interval_ns > 0 && self.cfg.measure.interval_ns <= self.cfg.duration_ns
        {
            self.sched
                .schedule(self.cfg.measure.interval_ns, Event::Sample);
        }
        Ok(())
    }

    /// Run every event due up to the end of the scenario, then move the clock to the end. The
    /// measurement window starts with the first event at or after the warmup (or at the end).
    pub(super) fn run_events(
        &mut self,
        progress: &mut dyn FnMut(f64) -> bool,
    ) -> Result<(), RunError> {
        let end = self.cfg.duration_ns;
        // Check progress every 2^16 events (a few ms of wall time).
        let mut tick: u32 = 0;
        let mut warmup_done = false;
        while let Some((now, ev)) = self.sched.pop_until(end) {
            if !warmup_done && now >= self.cfg.warmup_ns {
                self.mark_window_start();
                warmup_done = true;
            }
            match ev {
                Event::Sample => self.on_sample()?,
                ev => self.dispatch(ev),
            }
            tick = tick.wrapping_add(1);
            if tick & 0xFFFF == 0 {
                self.check_discipline()?;
                if !progress(now as f64 / end as f64) {
                    return Err(RunError::Interrupted);
                }
            }
        }
        self.check_discipline()?;
        self.sched.advance_to(end);
        if !warmup_done {
            self.mark_window_start();
        }
        Ok(())
    }

    /// A plugin discipline that failed has dropped every arrival since (it cannot return its
    /// error through `Qdisc`), and a plugin CC's failed op left its flow's window as it was:
    /// end the run with the error. Checked every 2^16 events and at
    /// the end, so a failed run stops within a few ms of wall time.
    fn check_discipline(&self) -> Result<(), RunError> {
        if let Some(e) = self.bottleneck.qdisc.error() {
            return Err(RunError::Plugin(e.to_string()));
        }
        // A plugin CC's failed op has left its flow's window as it was since.
        for reg in &self.cc_regs {
            if let Some(e) = reg.borrow().error() {
                return Err(RunError::Plugin(e.to_string()));
            }
        }
        Ok(())
    }

    fn dispatch(&mut self, ev: Event) {
        // A host's timers and its NAPI poll wait out a stall of its CPU (`[host] stall`); what
        // reaches a host in one is held by the delay line that brings it (`DelayLine::push`).
        // Not held (a simplification, docs/model.md "Host stalls"): the NIC's transmit
        // completions, which resume a flow held by TSQ, and the applications' starts and stops.
        if let Event::PacingTimer(_)
        | Event::SenderTimer(_)
        | Event::AckTimer(_)
        | Event::CompSackTimer(_)
        | Event::GroPoll(_) = ev
        {
            let now = self.sched.now();
            let at = self.stalls.release(now);
            if at != now {
                self.sched.schedule(at, ev);
                return;
            }
        }
        match ev {
            Event::FlowStart(_) => {
                let now = self.sched.now();
                while let Some(&f) = self.start_order.get(self.next_start) {
                    if self.flows[f as usize].start_ns != now {
                        self.sched
                            .schedule(self.flows[f as usize].start_ns, Event::FlowStart(f));
                        break;
                    }
                    self.next_start += 1;
                    let mut out = std::mem::take(&mut self.data_buf);
                    self.flows[f as usize]
                        .sender
                        .start(&mut self.sched, &mut out);
                    self.route_data_batch(&mut out);
                    self.data_buf = out;
                }
            }
            Event::FlowStop(f) => {
                let now = self.sched.now();
                self.flows[f as usize].sender.stop_writing(now);
            }
            Event::LinkTxDone(_) => {
                let (start, end) = (self.bottleneck.tx_start_ns, self.bottleneck.tx_end_ns);
                let mut pkt = self.bottleneck.finish_tx();
                self.qm.record_tx(
                    pkt.wire_len,
                    start,
                    end,
                    self.cfg.warmup_ns,
                    self.cfg.duration_ns,
                );
                self.qm.record_tx_interval(pkt.wire_len, start, end);
                pkt.hop += 1;
                self.route_data(pkt);
                self.start_tx();
            }
            Event::DelayLineHead(id) => {
                let n = self.fwd_lines.len();
                let id = id as usize;
                let now = self.sched.now();
                if id < n {
                    self.fwd_lines[id].on_head_event();
                    while let Some(mut p) = self.fwd_lines[id].pop_due(now) {
                        p.hop += 1;
                        self.route_data(p);
                    }
                    self.fwd_lines[id].reschedule(&mut self.sched);
                } else {
                    let k = id - n;
                    self.rev_lines[k].on_head_event();
                    while let Some(mut a) = self.rev_lines[k].pop_due(now) {
                        a.hop += 1;
                        self.route_ack(a);
                    }
                    self.rev_lines[k].reschedule(&mut self.sched);
                }
            }
            Event::SenderTimer(f) => {
                let mut out = std::mem::take(&mut self.data_buf);
                self.flows[f as usize]
                    .sender
                    .on_xmit_timer(&mut self.sched, &mut out);
                self.route_data_batch(&mut out);
                self.data_buf = out;
            }
            Event::PacingTimer(f) => {
                let mut out = std::mem::take(&mut self.data_buf);
                self.flows[f as usize]
                    .sender
                    .on_pacing_timer(&mut self.sched, &mut out);
                self.route_data_batch(&mut out);
                self.data_buf = out;
            }
            Event::AckTimer(f) => {
                let mut out = std::mem::take(&mut self.ack_buf);
                self.flows[f as usize]
                    .receiver
                    .on_delack_timer(&mut self.sched, &mut out);
                self.route_ack_batch(&mut out);
                self.ack_buf = out;
            }
            Event::CompSackTimer(f) => {
                let mut out = std::mem::take(&mut self.ack_buf);
                self.flows[f as usize]
                    .receiver
                    .on_comp_sack_timer(&mut self.sched, &mut out);
                self.route_ack_batch(&mut out);
                self.ack_buf = out;
            }
            Event::Sample => unreachable!("run by World::on_sample"),
            Event::NicTxDone(f) => {
                let now = self.sched.now();
                let off = self.offloads.as_mut().expect("NIC event with ideal hosts");
                let (mut pkt, next) = off.nics[f as usize].finish(now);
                if let Some(at) = next {
                    self.sched.schedule(at, Event::NicTxDone(f));
                }
                let wire_len = pkt.wire_len;
                pkt.hop += 1;
                self.route_data(pkt);
                let mut out = std::mem::take(&mut self.data_buf);
                self.flows[f as usize]
                    .sender
                    .on_nic_departure(wire_len, &mut self.sched, &mut out);
                self.route_data_batch(&mut out);
                self.data_buf = out;
            }
            Event::GroPoll(f) => {
                let now = self.sched.now();
                let off = self.offloads.as_mut().expect("GRO event with ideal hosts");
                let mut acks = std::mem::take(&mut self.ack_buf);
                let gro = &mut off.gros[f as usize];
                let pkts = gro.poll(now, &mut off.units);
                let receiver = &mut self.flows[f as usize].receiver;
                for r in off.units.iter() {
                    receiver.on_gro(&pkts[r.clone()], &mut self.sched, &mut acks);
                }
                off.gro_packets += off.units.len() as u64;
                gro.done();
                self.route_ack_batch(&mut acks);
                self.ack_buf = acks;
            }
        }
    }

    /// Take a time-series sample and schedule the next; the time series is the run's largest
    /// table, so its growth fails as an error, not an abort.
    fn on_sample(&mut self) -> Result<(), RunError> {
        self.take_sample()?;
        let next = self.sched.now() + self.cfg.measure.interval_ns;
        if next <= self.cfg.duration_ns {
            self.sched.schedule(next, Event::Sample);
        }
        Ok(())
    }

    fn route_data_batch(&mut self, out: &mut Vec<DataPkt>) {
        for p in out.drain(..) {
            self.route_data(p);
        }
    }

    fn route_ack_batch(&mut self, out: &mut Vec<AckPkt>) {
        for a in out.drain(..) {
            self.route_ack(a);
        }
    }

    /// Hand a data packet to the hop its route names next.
    fn route_data(&mut self, mut pkt: DataPkt) {
        let class = self.flows[pkt.flow as usize].class;
        // The marker is the first hop after the sender host (see `World::new`): mark and go on
        // in place.
        if let Hop::Marker = self.fwd_routes[class][pkt.hop as usize] {
            pkt.value = self.markers[pkt.flow as usize].value_for(pkt.wire_len, self.sched.now());
            pkt.hop += 1;
        }
        match self.fwd_routes[class][pkt.hop as usize] {
            Hop::Marker => unreachable!("one marker per route, its first hop"),
            Hop::Bottleneck(_) => {
                let in_window = self.in_window();
                if in_window {
                    let f = &mut self.fm[pkt.flow as usize];
                    f.arrived_bytes += pkt.wire_len as u64;
                    f.arrived_pkts += 1;
                }
                let now = self.sched.now();
                let mut sink = Sink {
                    flows: &mut self.fm,
                    queue: &mut self.qm,
                    in_window,
                    dropped_total: &mut self.dropped_total,
                };
                self.bottleneck.arrive(pkt, now, &mut sink);
                self.start_tx();
            }
            Hop::Line(l) => self.fwd_lines[l as usize].push(&mut self.sched, pkt, &self.stalls),
            Hop::Nic => {
                let now = self.sched.now();
                let nic = &mut self
                    .offloads
                    .as_mut()
                    .expect("a NIC hop with ideal hosts")
                    .nics[pkt.flow as usize];
                if let Some(at) = nic.push(pkt, now) {
                    self.sched.schedule(at, Event::NicTxDone(pkt.flow));
                }
            }
            Hop::Gro => {
                let now = self.sched.now();
                let gro = &mut self
                    .offloads
                    .as_mut()
                    .expect("a GRO hop with ideal hosts")
                    .gros[pkt.flow as usize];
                if let Some(at) = gro.arrive(pkt, now) {
                    self.sched.schedule(at, Event::GroPoll(pkt.flow));
                }
            }
            Hop::Host => {
                let mut acks = std::mem::take(&mut self.ack_buf);
                self.flows[pkt.flow as usize]
                    .receiver
                    .on_data(&pkt, &mut self.sched, &mut acks);
                self.route_ack_batch(&mut acks);
                self.ack_buf = acks;
            }
        }
    }

    fn route_ack(&mut self, ack: AckPkt) {
        let class = self.flows[ack.flow as usize].class;
        match self.rev_routes[class][ack.hop as usize] {
            Hop::Line(l) => {
                let n = self.fwd_lines.len();
                self.rev_lines[l as usize - n].push(&mut self.sched, ack, &self.stalls);
            }
            Hop::Host => {
                let mut out = std::mem::take(&mut self.data_buf);
                self.flows[ack.flow as usize]
                    .sender
                    .on_ack(&ack, &mut self.sched, &mut out);
                self.route_data_batch(&mut out);
                self.data_buf = out;
            }
            Hop::Bottleneck(_) | Hop::Marker | Hop::Nic | Hop::Gro => {
                unreachable!("no reverse-path bottleneck, marker or offload in this topology")
            }
        }
    }

    /// If the link is idle, start the next transmission.
    fn start_tx(&mut self) {
        if self.bottleneck.is_busy() {
            return;
        }
        let in_window = self.in_window();
        let mut sink = Sink {
            flows: &mut self.fm,
            queue: &mut self.qm,
            in_window,
            dropped_total: &mut self.dropped_total,
        };
        if let Some(p) = self.bottleneck.try_start(&mut self.sched, &mut sink) {
            let sojourn = self.sched.now() - p.enqueue_ns;
            self.qm.record_sojourn(sojourn, in_window);
            if in_window {
                let m = &mut self.fm[p.flow as usize];
                m.sojourn_sum_ns += sojourn as u128;
                m.sojourn_count += 1;
            }
            self.bottleneck_pkts += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use aqm::Qdisc;
    use serde_json::json;

    use super::*;
    use crate::world::tests::{cbr, config, linux_hosts, ran, tcp};

    /// Data packets anywhere between the senders and the receivers at the end of a run.
    fn in_network(w: &World) -> u64 {
        let mut n = w.bottleneck.qdisc.len() as u64 + w.bottleneck.in_tx().is_some() as u64;
        n += w.fwd_lines.iter().map(|l| l.len() as u64).sum::<u64>();
        if let Some(off) = &w.offloads {
            n += off
                .nics
                .iter()
                .map(|nic| nic.iter().count() as u64)
                .sum::<u64>();
            n += off
                .gros
                .iter()
                .map(|g| g.iter().count() as u64)
                .sum::<u64>();
        }
        n
    }

    #[test]
    fn a_cbr_flow_below_the_link_rate_is_serialized_then_delayed_half_its_rtt() {
        // 12 Mbit/s of 1500-byte datagrams, one every 1 ms from 0, through a 24 Mbit/s link
        // (0.5 ms each, never a queue) and a 10 ms forward line (R = 20 ms): datagram k leaves
        // at k ms, is on the wire until k + 0.5 ms and arrives at k + 10.5 ms. Over 50 ms
        // (events at 50 ms included) datagrams 0..=50 are sent, 0..=39 arrive, 40..=49 are on
        // the line, 50 is on the wire; the link has carried 0..=49 whole.
        let cfg = config(
            24_000_000,
            100,
            json!({"kind": "taildrop"}),
            vec![cbr(1, 20_000_000, 12_000_000)],
            50_000_000,
            0,
        );
        let w = ran(&cfg);
        let (sent, rx) = (w.flows[0].sender.stats.segs_sent, &w.flows[0].receiver);
        assert_eq!(sent, 51);
        assert_eq!((rx.segs_received, rx.delivered_bytes), (40, 40 * 1472));
        assert_eq!(
            (w.fwd_lines[0].len(), w.bottleneck.in_tx().map(|p| p.seq)),
            (10, Some(50))
        );
        assert_eq!((w.bottleneck.qdisc.len(), w.dropped_total), (0, 0));
        assert_eq!(w.qm.link_bytes, 50.0 * 1500.0);
        assert_eq!(w.bottleneck_pkts, 51);
        assert_eq!(w.sched.now(), 50_000_000);
    }

    #[test]
    fn every_packet_sent_is_received_dropped_or_still_in_the_network() {
        // Reno from slow start into a 10-packet buffer drops; the run ends with packets queued
        // and on the lines. Ideal hosts hand every packet to the bottleneck at once; Linux's
        // hold some in the NIC and GRO too.
        let ideal = config(
            10_000_000,
            10,
            json!({"kind": "taildrop"}),
            vec![tcp("reno", 1, 20_000_000, None)],
            2_000_000_000,
            0,
        );
        for cfg in [ideal.clone(), linux_hosts(ideal)] {
            let w = ran(&cfg);
            let f = &w.flows[0];
            let (sent, received, dropped) = (
                f.sender.stats.segs_sent,
                f.receiver.segs_received,
                w.fm[0].total_dropped_pkts,
            );
            assert!(
                dropped > 0 && in_network(&w) > 0,
                "dropped {dropped}, in network {}",
                in_network(&w)
            );
            assert_eq!(sent, received + dropped + in_network(&w));
            assert_eq!(w.dropped_total, dropped);
            // What reached the bottleneck was dropped there (taildrop drops on arrival), is still
            // queued, or was started on the link.
            let nic_held = w
                .offloads
                .as_ref()
                .map_or(0, |o| o.nics.iter().map(|n| n.iter().count() as u64).sum());
            assert_eq!(
                sent - nic_held,
                w.bottleneck_pkts + dropped + w.bottleneck.qdisc.len() as u64
            );
        }
    }
}
