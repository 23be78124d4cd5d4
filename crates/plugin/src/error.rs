//! One error type, whose message names what is wrong and where.

use std::fmt;

use aqm::Nanos;

/// What went wrong with a plugin. Every variant names the module (the name it was loaded
/// under, usually its file name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PluginError {
    /// The module was refused at load: not WebAssembly, an import outside the ABI, a missing
    /// or mistyped export, another ABI version, a description the host cannot read.
    Refused { module: String, reason: String },
    /// An option value was refused, by the host (unknown name, out of range) or by the
    /// plugin's `aqmlab_init`. `message` starts with the option's name, as
    /// `aqm::OptionError` does.
    Options { module: String, message: String },
    /// A call into the module failed: it trapped, ran out of its instruction budget, grew
    /// its memory past the cap, or broke a rule of the ABI.
    Call {
        module: String,
        function: &'static str,
        /// The simulated time of the call, ns.
        now: Nanos,
        reason: String,
    },
}

impl PluginError {
    pub fn module(&self) -> &str {
        match self {
            PluginError::Refused { module, .. }
            | PluginError::Options { module, .. }
            | PluginError::Call { module, .. } => module,
        }
    }
}

impl fmt::Display for PluginError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PluginError::Refused { module, reason } => {
                write!(f, "plugin {module} refused: {reason}")
            }
            PluginError::Options { module, message } => write!(f, "plugin {module}: {message}"),
            PluginError::Call {
                module,
                function,
                now,
                reason,
            } => write!(
                f,
                "plugin {module}: {function} at t = {}.{:09} s ({now} ns): {reason}",
                now / 1_000_000_000,
                now % 1_000_000_000
            ),
        }
    }
}

impl std::error::Error for PluginError {}
