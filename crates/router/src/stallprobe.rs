//! `aqmlab-stallprobe --cpu N --start-ns T0 --end-ns T1 --output stalls.json`: how long CPU N
//! runs nothing of ours between CLOCK_MONOTONIC times T0 and T1 (`router::stall`).
//!
//! Pins itself to the CPU, takes SCHED_FIFO at priority 99 (above the router's `chrt -f 20`, so
//! only interrupts and a hypervisor that does not run the virtual CPU can delay it), locks its
//! memory, and sleeps to each deadline of a 500 µs grid with `clock_nanosleep(TIMER_ABSTIME)`,
//! recording every wake-up more than 300 µs late. Its cost: a wake-up every 500 µs on each
//! CPU (bench/README.md §Emulator gives the router's lateness with and without).
//!
//! Writes, atomically, at T1 or on SIGTERM/SIGINT or its parent's death (then `"complete": false`):
//! `{"cpu", "period_ns", "threshold_ns", "start_ns", "end_ns", "wakeups", "complete",
//! "stalls": [[deadline_ns, late_ns], ...]}`. Without the real-time policy (not root) it
//! refuses to run — its figures would be the testbed's own load — exit status 2, nothing
//! written.

use router::measure::write_json_atomically;
use router::stall::{Probe, PERIOD_NS, THRESHOLD_NS};
use router::tun::monotonic_ns;
use serde_json::json;

/// SCHED_FIFO priority: the highest, so that nothing the testbed runs delays the probe.
const PRIORITY: libc::c_int = 99;

fn fail(msg: &str) -> ! {
    eprintln!("aqmlab-stallprobe: {msg}");
    std::process::exit(2);
}

struct Args {
    cpu: usize,
    start_ns: u64,
    end_ns: u64,
    output: std::path::PathBuf,
}

fn args() -> Args {
    const USAGE: &str = "usage: aqmlab-stallprobe --cpu N --start-ns NS --end-ns NS --output FILE (CLOCK_MONOTONIC ns)";
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.iter().any(|x| x == "-h" || x == "--help") {
        println!("{USAGE}");
        std::process::exit(0);
    }
    let get = |flag: &str| -> String {
        match a.iter().position(|x| x == flag) {
            Some(i) if i + 1 < a.len() => a[i + 1].clone(),
            _ => fail(&format!("{flag} is missing; {USAGE}")),
        }
    };
    let num = |flag: &str| -> u64 {
        get(flag)
            .parse()
            .unwrap_or_else(|_| fail(&format!("{flag}: not a non-negative integer")))
    };
    if a.len() != 8 {
        fail(USAGE);
    }
    let r = Args {
        cpu: num("--cpu") as usize,
        start_ns: num("--start-ns"),
        end_ns: num("--end-ns"),
        output: get("--output").into(),
    };
    if r.end_ns <= r.start_ns {
        fail("--end-ns must be after --start-ns");
    }
    r
}

fn main() {
    let a = args();
    router::stop::install();
    // SAFETY: a zeroed cpu_set_t with one bit set, passed with its size; our own thread (pid 0).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(a.cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            fail(&format!(
                "--cpu {}: cannot pin to it ({})",
                a.cpu,
                std::io::Error::last_os_error()
            ));
        }
        let param = libc::sched_param {
            sched_priority: PRIORITY,
        };
        if libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) != 0 {
            fail(&format!(
                "cannot use SCHED_FIFO ({}); without it the probe measures the testbed's own load",
                std::io::Error::last_os_error()
            ));
        }
        libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE);
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
        // A run killed with SIGKILL cannot stop its probes: they stop with it.
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGTERM as libc::c_ulong,
            0,
            0,
            0,
        );
        if libc::getppid() == 1 {
            router::stop::request();
        }
    }
    // A start already past would read as one long stall: the grid starts at the next deadline.
    let now = monotonic_ns();
    let start_ns = if a.start_ns > now {
        a.start_ns
    } else {
        a.start_ns + PERIOD_NS * ((now - a.start_ns) / PERIOD_NS + 1)
    };
    let mut probe = Probe::new(start_ns, a.end_ns);
    // Room for a stall every 500 µs would be 8 kB a second; a few hundred are typical.
    probe.stalls.reserve(4096);
    while let Some(deadline) = probe.deadline() {
        if router::stop::requested() {
            break;
        }
        let ts = libc::timespec {
            tv_sec: (deadline / 1_000_000_000) as libc::time_t,
            tv_nsec: (deadline % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: a valid timespec; no remaining-time output with TIMER_ABSTIME.
        if unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        } != 0
        {
            continue; // EINTR: the loop checks for a stop
        }
        probe.woke(monotonic_ns());
    }
    let report = json!({
        "cpu": a.cpu, "period_ns": PERIOD_NS, "threshold_ns": THRESHOLD_NS, "start_ns": start_ns, "end_ns": a.end_ns,
        "wakeups": probe.wakeups, "complete": probe.deadline().is_none(), "stalls": probe.stalls,
    });
    if let Err(e) = write_json_atomically(&a.output, &report) {
        eprintln!(
            "aqmlab-stallprobe: --output: cannot write {}: {e}",
            a.output.display()
        );
        std::process::exit(1);
    }
}
