//! SIGTERM and SIGINT as a flag: the router's and the stall probe's loops check it and end
//! cleanly (their results are written either way).

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Install the handlers. Without SA_RESTART, so a sleep in `ppoll` or `clock_nanosleep`
/// returns EINTR at once.
pub fn install() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Whether a stop was asked for (or `request`ed).
pub fn requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// Ask for a stop from the program itself.
pub fn request() {
    STOP.store(true, Ordering::Relaxed);
}
