//! Root-only: the `aqmlab-router` binary in a real namespace testbed (the contract's topology:
//! sender ns → router ns with TUN + policy rule → receiver ns). Skipped, with the reason
//! printed, when not root or when namespaces cannot be made.
//!
//! Twenty 1028-byte ECT(0) UDP packets are sent back to back through STEP (K = 0 packets) at
//! 10 Mbit/s with a 20 ms RTT. Expected, by hand: every packet arrives (the kernel verifies
//! the IP header checksum on receipt, so this checks the CE rewrite too); packet k (from 0) no
//! sooner than 20 ms + (k + 1) serializations (1028·8/10e6 = 822.4 µs each) after the burst
//! was sent; the router's results show 20 arrived, 20 on the link (20 560 bytes), no drop, at
//! least one STEP mark, no reordering.

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Testbed {
    names: Vec<String>,
}

impl Drop for Testbed {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

fn sh(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// Run `f` on a thread that has entered network namespace `ns`.
fn in_ns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("namespace file");
        // SAFETY: setns on this thread only, with a namespace fd we hold open.
        assert_eq!(
            unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) },
            0,
            "setns {path}"
        );
        f()
    })
}

#[test]
fn udp_through_the_router_binary_in_namespaces() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED udp_through_the_router_binary_in_namespaces: needs root (network namespaces and TUN)");
        return;
    }
    let tag = format!("rt{}", std::process::id());
    let (s, r, d) = (
        format!("aqS0-{tag}"),
        format!("aqR-{tag}"),
        format!("aqD-{tag}"),
    );
    if let Err(e) = sh(&["ip", "netns", "add", &s]) {
        eprintln!(
            "SKIPPED udp_through_the_router_binary_in_namespaces: cannot create a namespace ({e})"
        );
        return;
    }
    let _bed = Testbed {
        names: vec![s.clone(), r.clone(), d.clone()],
    };
    let (vs, vr, vd, vq) = (
        format!("s{tag}"),
        format!("r{tag}"),
        format!("d{tag}"),
        format!("q{tag}"),
    );
    let setup: Vec<Vec<String>> = [
        format!("ip netns add {r}"),
        format!("ip netns add {d}"),
        format!("ip link add {vs} netns {s} type veth peer name {vr} netns {r}"),
        format!("ip link add {vd} netns {d} type veth peer name {vq} netns {r}"),
        format!("ip -n {s} addr add 10.77.1.2/24 dev {vs}"),
        format!("ip -n {s} link set {vs} up"),
        format!("ip -n {r} addr add 10.77.1.1/24 dev {vr}"),
        format!("ip -n {r} link set {vr} up"),
        format!("ip -n {r} addr add 10.77.200.1/24 dev {vq}"),
        format!("ip -n {r} link set {vq} up"),
        format!("ip -n {d} addr add 10.77.200.2/24 dev {vd}"),
        format!("ip -n {d} link set {vd} up"),
        format!("ip -n {s} route add default via 10.77.1.1"),
        format!("ip -n {d} route add default via 10.77.200.1"),
        format!("ip netns exec {r} sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0"),
        format!("ip -n {r} tuntap add dev aqtun mode tun"),
        format!("ip -n {r} link set aqtun up mtu 1500"),
        format!("ip netns exec {r} sysctl -qw net.ipv4.conf.aqtun.rp_filter=0 net.ipv4.conf.{vr}.rp_filter=0"),
        format!("ip -n {r} rule add iif {vr} lookup 100"),
        format!("ip -n {r} route add default dev aqtun table 100"),
    ]
    .iter()
    .map(|c| c.split(' ').map(String::from).collect())
    .collect();
    for c in &setup {
        let args: Vec<&str> = c.iter().map(String::as_str).collect();
        sh(&args).unwrap();
    }
    let dir = std::env::temp_dir().join(format!("aqmlab-router-test-{tag}"));
    std::fs::create_dir_all(&dir).unwrap();
    let output = dir.join("out.json");
    let config = dir.join("router.json");
    std::fs::write(
        &config,
        format!(
            r#"{{"tun": "aqtun", "class_sources": ["10.77.1.0/24"], "output": "{}",
                "engine": {{"name": "t", "seed": 1, "duration_ns": 60000000000, "warmup_ns": 0,
                  "bottleneck": {{"rate_bps": 10000000, "buffer_packets": 100, "buffer_bytes": null,
                                  "aqm": {{"kind": "step", "threshold": {{"bytes": 1}}}}, "rtt_ref_ns": 10000000}},
                  "classes": [{{"name": "c0", "cc": {{"name": "cubic"}}, "count": 1, "rtt_ns": 20000000, "ecn": true,
                               "start": {{"kind": "fixed", "at_ns": 0}}, "size_bytes": null, "fq_pacing": false}}],
                  "measure": {{"interval_ns": 100000000, "hist_bin_ns": 1000000}}}}}}"#,
            output.display()
        ),
    )
    .unwrap();
    let mut router = Command::new("ip")
        .args([
            "netns",
            "exec",
            &r,
            env!("CARGO_BIN_EXE_aqmlab-router"),
            "--config",
            config.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(router.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ready");

    let receiver = in_ns(&d, || {
        let sock = UdpSocket::bind("10.77.200.2:5201").unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut times = vec![];
        let mut buf = [0u8; 2048];
        while times.len() < 20 {
            match sock.recv(&mut buf) {
                Ok(1000) => times.push(Instant::now()),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        times
    });
    std::thread::sleep(Duration::from_millis(100));
    let sent_at = in_ns(&s, || {
        let sock = UdpSocket::bind("10.77.1.2:40001").unwrap();
        // TOS = ECT(0) (RFC 3168 §5: 0b10 in the low bits).
        let tos: libc::c_int = 0x02;
        // SAFETY: IP_TOS takes an int.
        unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_TOS,
                (&tos as *const libc::c_int).cast(),
                4,
            )
        };
        let t = Instant::now();
        for _ in 0..20 {
            sock.send_to(&[7u8; 1000], "10.77.200.2:5201").unwrap();
        }
        t
    })
    .join()
    .unwrap();
    let times = receiver.join().unwrap();
    // SAFETY: a plain kill(2) of the child we started (`ip netns exec` execs the router).
    unsafe { libc::kill(router.id() as libc::pid_t, libc::SIGTERM) };
    assert!(router.wait().unwrap().success());

    assert_eq!(
        times.len(),
        20,
        "every packet arrives (with a valid checksum, or the kernel would drop it)"
    );
    // Never early: packet k (from 0) cannot leave the link before k + 1 serializations after
    // the burst began (which is after `sent_at`), nor reach the receiver before 20 ms later.
    for (k, t) in times.iter().enumerate() {
        let at = *t - sent_at;
        let earliest = Duration::from_nanos(20_000_000 + (k as u64 + 1) * 822_400);
        assert!(
            at >= earliest,
            "packet {k} after {at:?}, before {earliest:?}"
        );
    }
    let out: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&output).unwrap()).unwrap();
    assert_eq!(out["complete"], false, "stopped by SIGTERM");
    let flows = out["flows"].as_array().unwrap();
    let f = flows
        .iter()
        .find(|f| f["sport"] == 40001)
        .expect("the UDP flow");
    assert_eq!(
        (f["proto"].as_u64(), f["src"].as_str(), f["dport"].as_u64()),
        (Some(17), Some("10.77.1.2"), Some(5201))
    );
    assert_eq!(f["arrived_pkts"], 20);
    assert_eq!(f["link_pkts"], 20);
    assert_eq!(f["link_bytes"], 20 * 1028);
    assert_eq!(f["dropped_pkts"], 0);
    let marks = f["marks"]["step"].as_u64().unwrap();
    assert!(
        (1..=18).contains(&marks),
        "{marks} STEP marks (18 if the burst arrives within one serialization)"
    );
    assert_eq!(out["counters"]["reordered"], 0);
    // Each UDP packet was stamped from the router's ring on the TUN (src/tap.rs); only IPv6
    // packets the kernel sent as the TUN came up may predate the ring.
    let c = &out["counters"];
    assert!(
        c["unstamped"].as_u64().unwrap() <= c["non_ipv4"].as_u64().unwrap(),
        "{c}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
