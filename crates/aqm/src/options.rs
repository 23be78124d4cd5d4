//! What a scenario may set on a discipline, described once, next to the discipline.
//!
//! Each discipline's file holds its scenario-level `Options` (the keys of a scenario's
//! `aqm = { kind = ..., ... }` table, named as tc names them), an [`About`] describing every
//! option (unit, range, doc, source; the default is `Options::default()`), and a `lower`
//! function that turns the options into the engine's parameters given the [`Link`] beneath —
//! what tc's and the kernel's `change()` do with netlink options, plus the derivations that
//! need the link (a delay target converted to bytes at line rate, limits defaulting to the
//! physical buffer). The Python front builds its validation from [`About`] (through
//! `describe`), converts each value by its declared [`Unit`], and asks `lower` for the rest,
//! so that defaults, ranges and derivations exist in one place.
//!
//! Values arrive with their units resolved: times and delay targets in ns (a `K rtt` target
//! already multiplied by `rtt_ref`), rates in bit/s, sizes as [`Size`] (packets, or bytes —
//! a `bdp` or a time at line rate already converted), packet counts as integers.

use crate::Nanos;

/// Bytes of one packet where a size given in packets is needed in bytes (a 1500-byte MTU).
pub const PACKET_BYTES: u64 = 1500;

/// How a scenario writes an option's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// A time (`15ms`).
    Time,
    /// A queueing-delay target: a time, or `K rtt` (a multiple of the bottleneck's `rtt_ref`).
    DelayTarget,
    /// A size: bytes, `pkt`, `bdp`, or a time at line rate.
    Size,
    /// A number of packets (`1000pkt`).
    Packets,
    /// A rate (`40Mbit`).
    Rate,
    Int,
    Float,
    Bool,
    /// One of these strings.
    Choice(&'static [&'static str]),
}

impl Unit {
    pub fn name(self) -> &'static str {
        match self {
            Unit::Time => "time",
            Unit::DelayTarget => "delay-target",
            Unit::Size => "size",
            Unit::Packets => "packets",
            Unit::Rate => "rate",
            Unit::Int => "int",
            Unit::Float => "float",
            Unit::Bool => "bool",
            Unit::Choice(_) => "choice",
        }
    }
}

/// The values an option accepts: lower and upper bounds, each open or closed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    pub min: Option<f64>,
    pub min_open: bool,
    pub max: Option<f64>,
    pub max_open: bool,
}

impl Range {
    pub const ANY: Range = Range {
        min: None,
        min_open: false,
        max: None,
        max_open: false,
    };
    /// > 0.
    pub const POSITIVE: Range = Range {
        min: Some(0.0),
        min_open: true,
        max: None,
        max_open: false,
    };
    /// ≥ 0.
    pub const NON_NEGATIVE: Range = Range {
        min: Some(0.0),
        min_open: false,
        max: None,
        max_open: false,
    };
    /// [0, 1].
    pub const PROBABILITY: Range = Range::closed(0.0, 1.0);
    /// (0, 1].
    pub const POSITIVE_PROBABILITY: Range = Range {
        min: Some(0.0),
        min_open: true,
        max: Some(1.0),
        max_open: false,
    };

    pub const fn closed(min: f64, max: f64) -> Range {
        Range {
            min: Some(min),
            min_open: false,
            max: Some(max),
            max_open: false,
        }
    }

    pub const fn at_least(min: f64) -> Range {
        Range {
            min: Some(min),
            min_open: false,
            max: None,
            max_open: false,
        }
    }

    /// The range as a reader writes it: `> 0`, `≥ 1`, `0 … 32`, `(0, 1]`, or `–`.
    pub fn text(&self) -> String {
        let n = |x: f64| format!("{x}");
        match (self.min, self.max) {
            (None, None) => "–".into(),
            (Some(a), None) => format!("{} {}", if self.min_open { ">" } else { "≥" }, n(a)),
            (None, Some(b)) => format!("{} {}", if self.max_open { "<" } else { "≤" }, n(b)),
            (Some(a), Some(b)) => format!(
                "{}{}, {}{}",
                if self.min_open { "(" } else { "[" },
                n(a),
                n(b),
                if self.max_open { ")" } else { "]" }
            ),
        }
    }
}

/// One option of a discipline.
#[derive(Clone, Copy, Debug)]
pub struct Opt {
    /// The scenario key (tc's option name where tc has one).
    pub name: &'static str,
    pub unit: Unit,
    pub range: Range,
    /// No default: the scenario must give it.
    pub required: bool,
    /// One line: what it does, and what its absence means where it has no default.
    pub doc: &'static str,
    /// Where the option and its default come from.
    pub source: &'static str,
}

impl Opt {
    pub const fn new(
        name: &'static str,
        unit: Unit,
        range: Range,
        doc: &'static str,
        source: &'static str,
    ) -> Opt {
        Opt {
            name,
            unit,
            range,
            required: false,
            doc,
            source,
        }
    }

    pub const fn required(mut self) -> Opt {
        self.required = true;
        self
    }
}

/// A discipline as a scenario sees it.
#[derive(Clone, Copy, Debug)]
pub struct About {
    /// The `kind` a scenario names it by.
    pub kind: &'static str,
    /// One line.
    pub summary: &'static str,
    /// What the model follows: papers, RFCs, Linux files.
    pub source: &'static str,
    /// Groups of options of which exactly one must be given.
    pub one_of: &'static [&'static [&'static str]],
    /// The discipline reads packet values, so the flows need a packet-value marker.
    pub reads_packet_values: bool,
    pub options: &'static [Opt],
}

/// The bottleneck beneath the discipline, for the derivations that depend on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize),
    serde(deny_unknown_fields)
)]
pub struct Link {
    /// Link rate C, bit/s.
    pub rate_bps: u64,
    /// The physical buffer: at most this many packets...
    pub buffer_packets: Option<u64>,
    /// ...and at most this many bytes.
    pub buffer_bytes: Option<u64>,
    /// The reference RTT of `bdp` sizes and `K rtt` targets, ns.
    pub rtt_ref_ns: Nanos,
}

impl Link {
    /// ⌊t·C/8⌋ bytes: what the link sends in `ns` (exact, in u128).
    pub fn bytes_in(&self, ns: Nanos) -> u64 {
        (ns as u128 * self.rate_bps as u128 / 8_000_000_000) as u64
    }

    /// The physical buffer in bytes, packets counted as [`PACKET_BYTES`] (0 if unlimited).
    pub fn buffer_in_bytes(&self) -> u64 {
        match (self.buffer_bytes, self.buffer_packets) {
            (Some(b), _) => b,
            (None, p) => p.unwrap_or(0) * PACKET_BYTES,
        }
    }
}

/// A size with its unit resolved: packets where the scenario gave `pkt`, bytes otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(rename_all = "snake_case")
)]
pub enum Size {
    Packets(u64),
    Bytes(u64),
}

impl Size {
    /// Bytes, a packet counted as [`PACKET_BYTES`].
    pub fn bytes(self) -> u64 {
        match self {
            Size::Packets(n) => n * PACKET_BYTES,
            Size::Bytes(b) => b,
        }
    }

    /// As a (packets, bytes) limit pair.
    pub fn limit(size: Option<Size>) -> (Option<u64>, Option<u64>) {
        match size {
            None => (None, None),
            Some(Size::Packets(n)) => (Some(n), None),
            Some(Size::Bytes(b)) => (None, Some(b)),
        }
    }
}

/// A refused option: the scenario key it is about ("" = the discipline as a whole) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionError {
    pub key: String,
    pub message: String,
}

impl OptionError {
    pub fn new(key: &str, message: impl Into<String>) -> OptionError {
        OptionError {
            key: key.to_string(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for OptionError {
    /// `key: message`, the form every engine error takes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.key.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.key, self.message)
        }
    }
}

impl From<OptionError> for String {
    fn from(e: OptionError) -> String {
        e.to_string()
    }
}

/// A discipline's options lowered: the engine's parameters, and the delay target the summary
/// compares the mean sojourn with, where the discipline has one.
/// `C` is the discipline's engine config; the registry (`crate::any`) wraps it in its
/// `QdiscConfig` variant.
#[derive(Clone, Debug, PartialEq)]
pub struct Lowered<C> {
    pub config: C,
    pub delay_target_ns: Option<Nanos>,
}

/// What every discipline's file provides for scenarios (its `Options`).
pub trait ScenarioOptions {
    /// The discipline's engine config (its `Params`, or tc's options where it derives them).
    type Config;
    const ABOUT: About;
    /// The engine's parameters for these options on `link`; errors name the scenario key.
    fn lower(&self, link: &Link) -> Result<Lowered<Self::Config>, OptionError>;
}

/// n/d correctly rounded to the nearest f64 (ties to even), as Python's `float(Fraction(n, d))`.
pub fn ratio_to_f64(n: u128, d: u128) -> f64 {
    assert!(d > 0);
    if n == 0 {
        return 0.0;
    }
    let bits = |x: u128| 128 - x.leading_zeros() as i32;
    // m·2^exp + rest: m the integer quotient, extended by long division to ≥ 55 bits.
    let (mut m, mut r, mut exp) = (n / d, n % d, 0i32);
    while bits(m) < 55 {
        // r < d, so 2r fits unless d is above 2^127 (not for the sizes here).
        r <<= 1;
        m <<= 1;
        if r >= d {
            r -= d;
            m |= 1;
        }
        exp -= 1;
    }
    let extra = bits(m) - 53;
    let dropped = m & ((1u128 << extra) - 1);
    let half = 1u128 << (extra - 1);
    let mut mant = m >> extra;
    exp += extra;
    if dropped > half || (dropped == half && (r != 0 || mant & 1 == 1)) {
        mant += 1;
        if mant == 1u128 << 53 {
            mant >>= 1;
            exp += 1;
        }
    }
    mant as f64 * 2f64.powi(exp)
}

/// One discipline's description as JSON, with `defaults` (its `Options::default()`
/// serialized) written in scenario terms ("15ms", "1000pkt", 2, true, null).
#[cfg(feature = "serde")]
pub fn describe(about: &About, defaults: serde_json::Value) -> serde_json::Value {
    use serde_json::{json, Value};
    let obj = defaults.as_object().expect("Options serialize as a table");
    assert_eq!(
        obj.len(),
        about.options.len(),
        "{}: the description and Options have different fields",
        about.kind
    );
    let options: Vec<Value> = about
        .options
        .iter()
        .map(|o| {
            let v = obj.get(o.name).unwrap_or_else(|| panic!("{}: option {} is not a field of Options", about.kind, o.name));
            let default = match (o.unit, v) {
                (_, Value::Null) => Value::Null,
                (Unit::Time | Unit::DelayTarget, v) => Value::String(format_ns(v.as_u64().expect("ns"))),
                (Unit::Packets, v) => Value::String(format!("{}pkt", v.as_u64().expect("packets"))),
                (Unit::Rate, v) => Value::String(format!("{}bps", v.as_u64().expect("bit/s"))),
                (Unit::Size, Value::Object(m)) => match m.iter().next() {
                    Some((k, n)) if k == "packets" => Value::String(format!("{n}pkt")),
                    Some((_, n)) => Value::String(format!("{n}B")),
                    None => Value::Null,
                },
                (_, v) => v.clone(),
            };
            let choices = match o.unit {
                Unit::Choice(c) => json!(c),
                _ => Value::Null,
            };
            json!({
                "name": o.name, "unit": o.unit.name(), "choices": choices, "required": o.required,
                "default": if o.required { Value::Null } else { default },
                "range": {"min": o.range.min, "min_open": o.range.min_open, "max": o.range.max, "max_open": o.range.max_open},
                "range_text": o.range.text(), "doc": o.doc, "source": o.source,
            })
        })
        .collect();
    json!({
        "kind": about.kind, "summary": about.summary, "source": about.source, "one_of": about.one_of,
        "reads_packet_values": about.reads_packet_values, "options": options,
    })
}

/// A time in the largest unit that keeps it a whole number (`15ms`, `1s`, `250us`).
pub fn format_ns(ns: u64) -> String {
    for (unit, scale) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] {
        if ns != 0 && ns % scale == 0 {
            return format!("{}{unit}", ns / scale);
        }
    }
    format!("{ns}ns")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_round_to_nearest_even() {
        assert_eq!(ratio_to_f64(80, 3), 80.0 / 3.0);
        assert_eq!(ratio_to_f64(1, 3), 1.0 / 3.0);
        assert_eq!(ratio_to_f64(10, 4), 2.5);
        assert_eq!(ratio_to_f64(41, 256), 0.16015625);
        // 2^53 + 1 is a tie between 2^53 and 2^53 + 2: even wins; a sticky remainder breaks it.
        let big = (1u128 << 53) + 1;
        assert_eq!(ratio_to_f64(big, 1), 9007199254740992.0);
        assert_eq!(ratio_to_f64(big * 1000 + 1, 1000), 9007199254740994.0);
        assert_eq!(ratio_to_f64((1u128 << 53) + 3, 1), 9007199254740996.0);
        // Division by the correctly rounded quotient agrees with f64 division where both
        // operands are exact: n/d for n, d < 2^53.
        for (n, d) in [
            (100_000_000u128 * 20_000_000, 12_000_000_000_000u128),
            (62_500, 1500),
            (1, 7),
            (123_456_789, 1000),
        ] {
            assert_eq!(ratio_to_f64(n, d), n as f64 / d as f64, "{n}/{d}");
        }
    }

    #[test]
    fn bytes_at_line_rate_are_floored_exactly() {
        let link = Link {
            rate_bps: 1_000_000_000,
            buffer_packets: None,
            buffer_bytes: None,
            rtt_ref_ns: 5_000_000,
        };
        assert_eq!(link.bytes_in(850_000), 106_250);
        let link = Link {
            rate_bps: 3,
            ..link
        };
        assert_eq!(link.bytes_in(1_000_000_000), 0); // 3/8 of a byte
        assert_eq!(
            link.bytes_in(u64::MAX),
            (u64::MAX as u128 * 3 / 8_000_000_000) as u64
        );
    }

    #[test]
    fn times_format_in_their_largest_whole_unit() {
        assert_eq!(format_ns(15_000_000), "15ms");
        assert_eq!(format_ns(1_000_000_000), "1s");
        assert_eq!(format_ns(1_500_000), "1500us");
        assert_eq!(format_ns(7), "7ns");
        assert_eq!(format_ns(0), "0ns");
    }
}
