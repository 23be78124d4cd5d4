//! The emulator's records: the router's report (crates/router, `Pipeline::report`) joined with
//! what the senders and the receiver measured (python/aqmlab/_traffic.py), as a [`RunRecord`]
//! from which [`crate::collect`] computes the same summary and tables as the simulator's.
//!
//! The input is one JSON object: `config` (the engine config), `router`, `receiver`,
//! `senders` (one per class), and the testbed's addresses: `sources` (each class's sender
//! address), `receiver_addr` and `port` (the receiver's). Flows are joined by protocol (TCP 6,
//! a CBR flow's UDP 17), source address and port: the kernel's TCP and UDP port spaces are
//! separate, so one port may name a flow of each. The emulator's own counters (unmatched
//! flows, port reuse, the senders' start lateness, ...) join the router's in `counters`.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use crate::metrics::nearest_rank;
use crate::record::{ClassRecord, FlowRecord, RunRecord, SampleRecord};
use link::measure::SojournHist;
use link::measure::{QueueRow, DROP_REASONS, MARK_REASONS};

/// Payload bytes to wire bytes of a CBR datagram: 20 B of IPv4 and 8 B of UDP header.
const UDP_IP_HEADER_BYTES: u64 = 28;
/// Names of Linux's congestion-avoidance states, by `tcpi_ca_state` (include/net/tcp.h
/// `enum tcp_ca_state`).
const CA_STATES: [&str; 5] = ["open", "disorder", "cwr", "recovery", "loss"];

fn u(v: &Value, k: &str) -> Option<u64> {
    v.get(k).and_then(Value::as_u64)
}

fn i(v: &Value, k: &str) -> Option<i64> {
    v.get(k).and_then(Value::as_i64)
}

fn s<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

/// `v[k]`, or an empty object when absent or null.
fn obj<'a>(v: &'a Value, k: &str) -> &'a Value {
    static EMPTY: Value = Value::Null;
    match v.get(k) {
        Some(x) if !x.is_null() => x,
        _ => &EMPTY,
    }
}

fn arr<'a>(v: &'a Value, k: &str) -> &'a [Value] {
    v.get(k)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn need<T>(x: Option<T>, what: &str) -> Result<T, String> {
    x.ok_or_else(|| format!("emulator records: {what} missing"))
}

/// One sender flow joined with its receiver connection and router flow.
struct Joined<'a> {
    class: usize,
    proto: u64,
    snd: &'a Value,
    conn: Option<&'a Value>,
    router: &'a Value,
}

/// The emulator's run records from its measurements (see the module comment).
pub fn record(input: &Value) -> Result<RunRecord, String> {
    let config = obj(input, "config");
    let rt = obj(input, "router");
    let receiver = obj(input, "receiver");
    let senders = arr(input, "senders");
    let sources: Vec<&str> = arr(input, "sources")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let dst = need(s(input, "receiver_addr"), "receiver_addr")?;
    let port = need(u(input, "port"), "port")?;
    // Each class's TCP connections go to the port of its receiver-side CC's listener
    // (python/aqmlab/emu/traffic.py); without "class_ports", every class uses `port`.
    let class_ports: Vec<u64> = arr(input, "class_ports")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    let warmup_ns = need(u(config, "warmup_ns"), "config.warmup_ns")?;
    let duration_ns = need(u(config, "duration_ns"), "config.duration_ns")?;
    let bottleneck = obj(config, "bottleneck");
    let measure = obj(config, "measure");
    let iv_ns = need(u(measure, "interval_ns"), "config.measure.interval_ns")?;
    let cfg_classes = arr(config, "classes");

    let mut by_port: HashMap<(u64, &str, u64), &Value> = HashMap::new();
    let mut port_reuse = 0u64;
    for c in arr(receiver, "conns") {
        let key = (
            u(c, "proto").unwrap_or(6),
            s(c, "src").unwrap_or(""),
            u(c, "sport").unwrap_or(0),
        );
        port_reuse += by_port.insert(key, c).is_some() as u64;
    }
    let mut router_flows: HashMap<(u64, &str, u64, &str, u64), &Value> = HashMap::new();
    for f in arr(rt, "flows") {
        let proto = u(f, "proto").unwrap_or(0);
        if proto == 6 || proto == 17 {
            let key = (
                proto,
                s(f, "src").unwrap_or(""),
                u(f, "sport").unwrap_or(0),
                s(f, "dst").unwrap_or(""),
                u(f, "dport").unwrap_or(0),
            );
            router_flows.insert(key, f);
        }
    }
    let mut joined: Vec<Joined> = Vec::new();
    for (c, snd) in senders.iter().enumerate() {
        let src = *need(sources.get(c), "sources")?;
        for f in arr(snd, "flows") {
            let proto = if s(f, "cc") == Some("cbr") { 17 } else { 6 };
            let sport = u(f, "sport");
            let conn = sport.and_then(|p| by_port.get(&(proto, src, p)).copied());
            let dport = if proto == 6 {
                class_ports.get(c).copied().unwrap_or(port)
            } else {
                port
            };
            let router = sport
                .and_then(|p| router_flows.remove(&(proto, src, p, dst, dport)))
                .unwrap_or(&Value::Null);
            joined.push(Joined {
                class: c,
                proto,
                snd: f,
                conn,
                router,
            });
        }
    }
    joined.sort_by_key(|j| u(j.snd, "flow"));
    let unmatched_router_flows = router_flows.len();

    let cc_name = |c: usize| {
        cfg_classes
            .get(c)
            .and_then(|k| s(obj(k, "cc"), "name"))
            .unwrap_or("cbr")
            .to_string()
    };
    let mut flows = Vec::with_capacity(joined.len());
    for j in &joined {
        let (snd, rf) = (j.snd, j.router);
        let conn = j.conn.unwrap_or(&Value::Null);
        let info = obj(snd, "final_info");
        let rinfo = obj(conn, "final_info");
        let cbr = j.proto == 17;
        let start_ns = need(u(snd, "start_ns"), "senders[].flows[].start_ns")?;
        let size_bytes = u(snd, "size_bytes");
        // FCT: the last payload byte's arrival at the receiver, from the connection's
        // establishment (the sender's connect completing, `connected_ns`): the simulator's
        // connection starts established at the flow's start (docs/model.md), so neither
        // backend counts the handshake. With the whole base RTT on the forward path the ACK
        // of the last byte reaches the sender at once, which is when the simulator's finite
        // flow finishes (its last ACK).
        let est = i(snd, "connected_ns");
        let last = i(conn, "last_byte_ns");
        let received = u(conn, "bytes").unwrap_or(0);
        let fct_s = if cbr {
            // The simulator's CBR flow finishes when its sender does: at its last datagram's
            // send, or at its stop; delivery is not waited for. UDP has no handshake: from the
            // planned start.
            i(snd, "finished_ns").map(|t| (t - start_ns as i64) as f64 / 1e9)
        } else {
            match (est, last) {
                // A finite flow is done when its size is delivered; a stopped flow when all it
                // wrote is (the simulator: its last data acknowledged after the stop).
                (Some(e), Some(l))
                    if size_bytes.is_some_and(|n| received >= n)
                        || (i(snd, "finished_writing_ns").is_some()
                            && received >= u(snd, "written_bytes").unwrap_or(0)) =>
                {
                    Some((l - e) as f64 / 1e9)
                }
                _ => None,
            }
        };
        let count = |k: &str, names: &[&str], out: &mut [u64]| {
            for (x, name) in out.iter_mut().zip(names) {
                *x = u(obj(rf, k), name).unwrap_or(0);
            }
        };
        let mut rec = FlowRecord {
            class: j.class,
            cc: if cbr { "cbr".into() } else { cc_name(j.class) },
            start_ns,
            stop_ns: u(snd, "stop_ns"),
            size_bytes,
            delivered_bytes: u(conn, "window_bytes").unwrap_or(0),
            arrived_bytes: u(rf, "arrived_bytes").unwrap_or(0),
            dropped_bytes: u(rf, "dropped_bytes").unwrap_or(0),
            marked_bytes: u(rf, "marked_bytes").unwrap_or(0),
            segs_sent: u(info, "data_segs_out"),
            retrans_segs: u(info, "total_retrans"),
            rto_count: u(info, "total_rto"),
            segs_received: u(rinfo, "data_segs_in"),
            fct_s,
            ..FlowRecord::default()
        };
        count("drops", &DROP_REASONS.map(|(_, n)| n), &mut rec.drops);
        count("marks", &MARK_REASONS.map(|(_, n)| n), &mut rec.marks);
        if cbr {
            // Datagrams are counted exactly at both ends: sent, and their wire size (payload +
            // UDP/IP headers, as the simulator's); UDP retransmits nothing.
            let dg = u(snd, "datagrams_sent").unwrap_or(0);
            rec.segs_sent = Some(dg);
            rec.wire_bytes_sent =
                Some(u(snd, "payload_sent").unwrap_or(0) + UDP_IP_HEADER_BYTES * dg);
            (
                rec.retrans_segs,
                rec.rto_count,
                rec.tlp_count,
                rec.recoveries,
                rec.cwr_count,
            ) = (Some(0), Some(0), Some(0), Some(0), Some(0));
            rec.segs_received = Some(u(conn, "datagrams").unwrap_or(0));
        }
        flows.push(rec);
    }

    let class_soj = arr(rt, "class_sojourn");
    let classes: Vec<ClassRecord> = cfg_classes
        .iter()
        .enumerate()
        .map(|(c, k)| {
            let cs = class_soj.get(c).unwrap_or(&Value::Null);
            ClassRecord {
                name: s(k, "name").unwrap_or("").to_string(),
                cc: cc_name(c),
                rtt_ns: u(k, "rtt_ns").unwrap_or(0),
                workload: !obj(k, "workload").is_null(),
                sojourn_sum_ns: u(cs, "sum_ns").unwrap_or(0) as u128,
                sojourn_count: u(cs, "count").unwrap_or(0),
            }
        })
        .collect();

    let sh = obj(rt, "sojourn_hist");
    let bins: Vec<(u64, u64)> = arr(sh, "bins")
        .iter()
        .filter_map(|b| Some((b.get(0)?.as_u64()?, b.get(1)?.as_u64()?)))
        .collect();
    let sojourn =
        SojournHist::from_indexed(u(sh, "bin_ns").unwrap_or(1000), &bins, u(sh, "max_ns"));

    // Time series: receiver byte counts per tick (throughput), sender TCP_INFO (the rest).
    let mut tick_bytes: HashMap<(u64, u64, &str, u64), i64> = HashMap::new();
    for t in arr(receiver, "ticks") {
        let k = u(t, "k").unwrap_or(0);
        for b in arr(t, "bytes") {
            let f = |n: usize| b.get(n);
            if let (Some(proto), Some(src), Some(sport), Some(n)) = (
                f(0).and_then(Value::as_u64),
                f(1).and_then(Value::as_str),
                f(2).and_then(Value::as_u64),
                f(3).and_then(Value::as_i64),
            ) {
                tick_bytes.insert((k, proto, src, sport), n);
            }
        }
    }
    let by_flow: HashMap<u64, &Joined> = joined
        .iter()
        .filter_map(|j| Some((u(j.snd, "flow")?, j)))
        .collect();
    let mut raw: Vec<&Value> = senders.iter().flat_map(|snd| arr(snd, "samples")).collect();
    raw.sort_by_key(|x| (u(x, "k"), u(x, "flow")));
    let mut samples = Vec::with_capacity(raw.len());
    for x in raw {
        let k = u(x, "k").unwrap_or(0);
        let flow = need(u(x, "flow"), "senders[].samples[].flow")?;
        let j = need(by_flow.get(&flow), "the flow of a sample")?;
        let src = sources[j.class];
        let sport = u(j.snd, "sport").unwrap_or(0);
        let now_b = tick_bytes.get(&(k, j.proto, src, sport));
        let prev_b = k
            .checked_sub(1)
            .and_then(|p| tick_bytes.get(&(p, j.proto, src, sport)))
            .copied()
            .unwrap_or(0);
        // tcp_packets_in_flight() (include/net/tcp.h): unacked − (sacked + lost) + retrans.
        let inflight = u(x, "unacked").map(|un| {
            let v = un as i64 - (i(x, "sacked").unwrap_or(0) + i(x, "lost").unwrap_or(0))
                + i(x, "retrans").unwrap_or(0);
            v.max(0) as u64
        });
        samples.push(SampleRecord {
            t_ns: k * iv_ns,
            flow,
            class: j.class,
            throughput_bps: now_b.map(|&b| (b - prev_b) as f64 * 8.0 / (iv_ns as f64 / 1e9)),
            cwnd: u(x, "snd_cwnd"),
            ssthresh: u(x, "snd_ssthresh"),
            inflight,
            srtt_ms: u(x, "rtt").map(|r| r as f64 / 1e3),
            pacing_rate_bps: u(x, "pacing_rate").map(|r| r as f64 * 8.0),
            ca_state: u(x, "ca_state")
                .and_then(|c| CA_STATES.get(c as usize))
                .map(|c| c.to_string()),
            // The kernel BBR's bandwidth estimate (bytes/s) and mode, from TCP_CC_INFO.
            cc_bw_bps: u(x, "bbr_bw").map(|b| b as f64 * 8.0),
            cc_phase: bbr_phase(u(x, "bbr_pacing_gain"), u(x, "bbr_cwnd_gain")),
            ..SampleRecord::default()
        });
    }

    let queue_samples = arr(rt, "queue")
        .iter()
        .map(|r| QueueRow {
            t_ns: u(r, "t_ns").unwrap_or(0),
            qlen_pkts: u(r, "qlen_pkts").unwrap_or(0),
            backlog_bytes: u(r, "backlog_bytes").unwrap_or(0),
            sojourn_mean_ns: r.get("sojourn_mean_ns").and_then(Value::as_f64),
            sojourn_max_ns: u(r, "sojourn_max_ns"),
            link_bytes: r.get("link_bytes").and_then(Value::as_f64).unwrap_or(0.0),
            drops: u(r, "drops").unwrap_or(0),
            marks: u(r, "marks").unwrap_or(0),
        })
        .collect();

    let mut counters: Map<String, Value> =
        obj(rt, "counters").as_object().cloned().unwrap_or_default();
    let sum_snd = |k: &str, cbr_only: bool| -> u64 {
        joined
            .iter()
            .filter(|j| !cbr_only || j.proto == 17)
            .map(|j| u(j.snd, k).unwrap_or(0))
            .sum()
    };
    let extra = json!({
        "router_complete": rt.get("complete"),
        "router_unmatched_flows": unmatched_router_flows,
        "flows_without_connection": joined.iter().filter(|j| u(j.snd, "sport").is_none()).count(),
        "flow_errors": joined.iter().filter_map(|j| match j.snd.get("error") {
            Some(Value::String(e)) if !e.is_empty() => Some(format!("flow {}: {e}", u(j.snd, "flow").unwrap_or(0))),
            _ => None,
        }).collect::<Vec<_>>(),
        "tcp_reord_seen": joined.iter().map(|j| u(obj(j.snd, "final_info"), "reord_seen").unwrap_or(0)).sum::<u64>(),
        "rcv_ooopack": joined.iter().map(|j| u(obj(j.conn.unwrap_or(&Value::Null), "final_info"), "rcv_ooopack").unwrap_or(0)).sum::<u64>(),
        // Datagrams of CBR flows received after one with a higher sequence number (must be
        // 0: the router never reorders a flow), refused by the sender's kernel, or that found
        // a full socket buffer (sent 100 µs later).
        "cbr_out_of_order": joined.iter().filter(|j| j.proto == 17).map(|j| u(j.conn.unwrap_or(&Value::Null), "out_of_order").unwrap_or(0)).sum::<u64>(),
        "cbr_send_errors": sum_snd("send_errors", true),
        "cbr_blocked": sum_snd("blocked", true),
        "port_reuse": port_reuse,
    });
    counters.extend(extra.as_object().expect("an object").clone());
    counters.extend(start_lateness(joined.iter().map(|j| j.snd)));

    let soj_sum: u128 = classes.iter().map(|c| c.sojourn_sum_ns).sum();
    let soj_n: u64 = classes.iter().map(|c| c.sojourn_count).sum();
    Ok(RunRecord {
        warmup_ns,
        duration_ns,
        rate_bps: need(u(bottleneck, "rate_bps"), "config.bottleneck.rate_bps")?,
        // The discipline's delay target, as the engine lowers the scenario's options.
        delay_target_ns: serde_json::from_value::<link::config::BottleneckConfig>(
            bottleneck.clone(),
        )
        .map_err(|e| format!("config.bottleneck: {}", link::config::json_error(e)))?
        .delay_target_ns,
        interval_ns: iv_ns,
        hist_bin_ns: need(u(measure, "hist_bin_ns"), "config.measure.hist_bin_ns")?,
        fct_bins_bytes: arr(measure, "fct_bins_bytes")
            .iter()
            .filter_map(Value::as_u64)
            .collect(),
        classes,
        flows,
        samples,
        queue_samples,
        sojourn,
        sojourn_sum_ns: soj_sum,
        sojourn_count: soj_n,
        link_bytes: rt.get("link_bytes").and_then(Value::as_f64).unwrap_or(0.0),
        counters,
    })
}

/// How late the senders opened the flows: each flow's connect call (TCP; a CBR flow's first
/// datagram goes at the same instant) behind its planned start, ns — median, p99 (nearest
/// rank) and maximum over the flows that started.
fn start_lateness<'a>(snd_flows: impl Iterator<Item = &'a Value>) -> Map<String, Value> {
    let mut late: Vec<i64> = snd_flows
        .filter_map(|f| Some(i(f, "connect_ns")? - i(f, "start_ns")?))
        .collect();
    late.sort_unstable();
    let (p50, p99, max) = if late.is_empty() {
        (Value::Null, Value::Null, Value::Null)
    } else {
        (
            json!(nearest_rank(&late, 0.5)),
            json!(nearest_rank(&late, 0.99)),
            json!(late[late.len() - 1]),
        )
    };
    let mut m = Map::new();
    m.insert("start_late_p50_ns".into(), p50);
    m.insert("start_late_p99_ns".into(), p99);
    m.insert("start_late_max_ns".into(), max);
    m
}

/// BBR's mode from the gains tcp_bbr.c `bbr_update_gains` gives each (×256, BBR_UNIT): STARTUP
/// pacing and cwnd `bbr_high_gain` (739), DRAIN pacing `bbr_drain_gain` (88) with cwnd 739,
/// PROBE_BW cwnd `bbr_cwnd_gain` (512) with the cycle's pacing gain (or 256 when it uses its
/// long-term bw), PROBE_RTT both 256; named as the simulator's BBRv1 names them
/// (crates/sim/src/cc/bbr/v1.rs `phase_name`).
fn bbr_phase(pacing_gain: Option<u64>, cwnd_gain: Option<u64>) -> Option<String> {
    const UNIT: u64 = 256;
    const CWND_GAIN: u64 = 2 * UNIT;
    let (pacing, cwnd) = (pacing_gain?, cwnd_gain?);
    let phase = if cwnd == CWND_GAIN {
        match pacing.cmp(&UNIT) {
            std::cmp::Ordering::Greater => "probe_bw:up",
            std::cmp::Ordering::Less => "probe_bw:down",
            std::cmp::Ordering::Equal => "probe_bw:cruise",
        }
    } else if cwnd == UNIT && pacing == UNIT {
        "probe_rtt"
    } else if pacing > UNIT {
        "startup"
    } else {
        "drain"
    };
    Some(phase.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two classes at 10 Mbit/s, window [1 s, 3 s): class 0 a bulk TCP flow (stopped at 2 s)
    /// and a finite TCP flow, class 1 a finite CBR flow; the router also saw a flow no sender
    /// owns.
    fn input() -> Value {
        json!({
            "config": {
                "warmup_ns": 1_000_000_000u64, "duration_ns": 3_000_000_000u64,
                "bottleneck": {"rate_bps": 10_000_000, "buffer_packets": 100, "buffer_bytes": null, "rtt_ref_ns": 10_000_000, "aqm": {"kind": "taildrop"}},
                "measure": {"interval_ns": 100_000_000, "hist_bin_ns": 1_000_000, "fct_bins_bytes": [100_000]},
                "classes": [
                    {"name": "reno-20ms", "cc": {"name": "reno"}, "rtt_ns": 20_000_000},
                    {"name": "cbr-10ms", "rtt_ns": 10_000_000, "cbr_rate_bps": 1_000_000},
                ],
            },
            "router": {
                "complete": true, "link_bytes": 2_000_000,
                "flows": [
                    {"proto": 6, "src": "10.0.1.2", "sport": 40000, "dst": "10.0.0.2", "dport": 5201, "arrived_bytes": 900, "dropped_bytes": 300, "marked_bytes": 0,
                     "drops": {"overflow": 1, "early": 2}, "marks": {}},
                    {"proto": 17, "src": "10.0.2.2", "sport": 40000, "dst": "10.0.0.2", "dport": 5201, "arrived_bytes": 3000},
                    {"proto": 6, "src": "10.0.9.9", "sport": 1, "dst": "10.0.0.2", "dport": 5201},
                ],
                "sojourn_hist": {"bin_ns": 1000, "bins": [[2000, 1], [1000, 3]]},
                "class_sojourn": [{"sum_ns": 4_000_000, "count": 3}, {"sum_ns": 2_000_000, "count": 1}],
                "queue": [], "counters": {"reordered": 0},
            },
            "receiver": {
                "conns": [
                    {"src": "10.0.1.2", "sport": 40000, "bytes": 500_000, "window_bytes": 400_000, "last_byte_ns": 2_100_000_000u64, "final_info": {"data_segs_in": 7}},
                    {"src": "10.0.1.2", "sport": 40001, "bytes": 50_000, "window_bytes": 50_000, "last_byte_ns": 1_500_000_000u64},
                    {"proto": 17, "src": "10.0.2.2", "sport": 40000, "bytes": 2944, "window_bytes": 2944, "datagrams": 2, "out_of_order": 0},
                    {"proto": 17, "src": "10.0.2.2", "sport": 40000, "bytes": 2944, "window_bytes": 2944, "datagrams": 2, "out_of_order": 0},
                ],
                "ticks": [{"k": 11, "bytes": [[6, "10.0.1.2", 40000, 10_000]]}, {"k": 12, "bytes": [[6, "10.0.1.2", 40000, 22_500]]}],
            },
            "senders": [
                {"flows": [
                    {"flow": 0, "sport": 40000, "start_ns": 0, "connect_ns": 300_000, "connected_ns": 20_000_000, "stop_ns": 2_000_000_000u64, "size_bytes": null,
                     "written_bytes": 500_000, "finished_writing_ns": 2_000_000_000u64, "final_info": {"data_segs_out": 350, "total_retrans": 2, "total_rto": 0}},
                    {"flow": 1, "sport": 40001, "start_ns": 1_200_000_000u64, "connect_ns": 1_200_100_000u64, "connected_ns": 1_220_000_000u64, "size_bytes": 50_000},
                ], "samples": [
                    {"k": 12, "t_ns": 1_200_000_000u64, "flow": 0, "ca_state": 4, "snd_cwnd": 10, "snd_ssthresh": 7, "unacked": 10, "sacked": 3, "lost": 2, "retrans": 1, "rtt": 30_500, "pacing_rate": 125_000},
                ]},
                {"flows": [
                    {"flow": 2, "cc": "cbr", "sport": 40000, "start_ns": 1_000_000_000u64, "connect_ns": 1_000_000_000u64, "size_bytes": 2944, "datagrams_sent": 2, "payload_sent": 2944,
                     "finished_ns": 1_012_000_000u64, "send_errors": 1, "blocked": 3},
                ], "samples": []},
            ],
            "sources": ["10.0.1.2", "10.0.2.2"], "receiver_addr": "10.0.0.2", "port": 5201,
        })
    }

    #[test]
    fn bbr_modes_are_read_from_the_gains_bbr_update_gains_sets() {
        // tcp_bbr.c: bbr_high_gain = 256·2885/1000 + 1 = 739, bbr_drain_gain = 256·1000/2885
        // = 88, bbr_cwnd_gain = 2·256, bbr_pacing_gain[] = {320, 192, 256, …}.
        let p = |pacing, cwnd| bbr_phase(Some(pacing), Some(cwnd));
        assert_eq!(p(739, 739).as_deref(), Some("startup"));
        assert_eq!(p(88, 739).as_deref(), Some("drain"));
        assert_eq!(p(320, 512).as_deref(), Some("probe_bw:up"));
        assert_eq!(p(192, 512).as_deref(), Some("probe_bw:down"));
        assert_eq!(p(256, 512).as_deref(), Some("probe_bw:cruise"));
        assert_eq!(p(256, 256).as_deref(), Some("probe_rtt"));
        // A CC that reports no gains (every CC but the kernel's BBR) has no phase.
        assert_eq!(bbr_phase(None, None), None);
    }

    #[test]
    fn a_class_with_its_own_listener_joins_by_its_port() {
        // The TCP class's connections went to its CC's listener on 5202: the router's record of
        // the flow to 5201 is another flow's, and the one to 5202 is this one's. UDP stays on
        // `port` whatever the class ports say.
        let mut v = input();
        v["class_ports"] = json!([5202, 5202]);
        let flows = v["router"]["flows"].as_array_mut().unwrap();
        flows.push(
            json!({"proto": 6, "src": "10.0.1.2", "sport": 40000, "dst": "10.0.0.2",
            "dport": 5202, "arrived_bytes": 7000, "dropped_bytes": 0, "marked_bytes": 0}),
        );
        let r = record(&v).unwrap();
        assert_eq!(
            (r.flows[0].arrived_bytes, r.flows[2].arrived_bytes),
            (7000, 3000)
        );
    }

    #[test]
    fn the_measurements_join_into_the_simulators_records() {
        let r = record(&input()).unwrap();
        let f = &r.flows;
        assert_eq!(
            f.iter().map(|x| x.cc.as_str()).collect::<Vec<_>>(),
            ["reno", "reno", "cbr"]
        );
        assert_eq!(
            f.iter().map(|x| x.delivered_bytes).collect::<Vec<_>>(),
            [400_000, 50_000, 2944]
        );
        // The router's counts by reason, in the simulator's order; absent ones are 0.
        assert_eq!(
            (
                f[0].arrived_bytes,
                f[0].dropped_bytes,
                f[0].drops[0],
                f[0].drops[1],
                f[0].drops[2]
            ),
            (900, 300, 1, 2, 0)
        );
        assert_eq!((f[1].arrived_bytes, f[2].arrived_bytes), (0, 3000));
        // TCP: sender and receiver TCP_INFO; the kernel does not report TLPs.
        assert_eq!(
            (
                f[0].segs_sent,
                f[0].retrans_segs,
                f[0].segs_received,
                f[0].tlp_count
            ),
            (Some(350), Some(2), Some(7), None)
        );
        // CBR: exact datagram counts, wire = payload + 28 B each.
        assert_eq!(
            (
                f[2].segs_sent,
                f[2].wire_bytes_sent,
                f[2].segs_received,
                f[2].retrans_segs
            ),
            (Some(2), Some(2944 + 56), Some(2), Some(0))
        );
        // FCTs: the stopped flow from its establishment (20 ms) to its last byte (2.1 s); the
        // finite one 1.22 s → 1.5 s; the CBR flow from its planned start to its last send.
        assert_eq!(f[0].fct_s, Some(2.08));
        assert!((f[1].fct_s.unwrap() - 0.28).abs() < 1e-12);
        assert!((f[2].fct_s.unwrap() - 0.012).abs() < 1e-12);
        // Classes: the CBR class's CC is "cbr"; sojourns from the router's per-class sums.
        assert_eq!(
            (
                r.classes[1].cc.as_str(),
                r.classes[0].sojourn_sum_ns,
                r.sojourn_count
            ),
            ("cbr", 4_000_000, 4)
        );
        assert_eq!(
            (r.sojourn.count, r.sojourn.max_ns, r.sojourn.bins[0]),
            (4, 2_000_999, (1_000_000, 1000, 3))
        );
        // The sample: tick 12's bytes less tick 11's over 100 ms; inflight = 10 − (3 + 2) + 1.
        let s = &r.samples[0];
        assert_eq!(
            (s.t_ns, s.throughput_bps, s.inflight, s.srtt_ms),
            (
                1_200_000_000,
                Some(12_500.0 * 8.0 / 0.1),
                Some(6),
                Some(30.5)
            )
        );
        assert_eq!(
            (
                s.ca_state.as_deref(),
                s.pacing_rate_bps,
                s.cc_phase.as_deref()
            ),
            (Some("loss"), Some(1e6), None)
        );
        // The emulator's own counters.
        let c = &r.counters;
        assert_eq!(
            (
                c["router_unmatched_flows"].as_u64(),
                c["port_reuse"].as_u64(),
                c["reordered"].as_u64()
            ),
            (Some(1), Some(1), Some(0))
        );
        assert_eq!(
            (
                c["cbr_send_errors"].as_u64(),
                c["cbr_blocked"].as_u64(),
                c["flows_without_connection"].as_u64()
            ),
            (Some(1), Some(3), Some(0))
        );
        // Start lateness 300 µs, 100 µs, 0: median (2nd of 3) 100 µs, p99 and max 300 µs.
        assert_eq!(
            (
                c["start_late_p50_ns"].as_i64(),
                c["start_late_p99_ns"].as_i64(),
                c["start_late_max_ns"].as_i64()
            ),
            (Some(100_000), Some(300_000), Some(300_000))
        );
        // And the tables come out with the simulator's definitions. The stopped flow's fair
        // share over the 2 s window: beside the CBR flow in [1, 1.2) s (C/2 for a tenth of the
        // window), beside it and the finite flow in [1.2, 2) s (C/3 for 0.4), then stopped.
        let res = crate::collect(r);
        assert_eq!(res.counters["finite_flows"].as_u64(), Some(2));
        let fair = res.table("flows").f64("fair_share_bps");
        assert!(
            (fair[0] - (5e6 * 0.1 + 10e6 / 3.0 * 0.4)).abs() < 1e-6,
            "{fair:?}"
        );
        assert!(matches!(
            res.table("flows").get("tlp_count"),
            Some(Column::OptU64(_))
        ));
        // A column the simulator always fills is optional only where a value is missing.
        assert_eq!(
            res.table("flows").get("segs_sent"),
            Some(&Column::OptU64(vec![Some(350), None, Some(2)]))
        );
        assert_eq!(
            res.table("flows").get("delivered_bytes"),
            Some(&Column::U64(vec![400_000, 50_000, 2944]))
        );
    }

    use crate::tables::Column;
}
