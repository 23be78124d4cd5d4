//! A CC's tunables: its global `const volatile` scalars, which libbpf places in `.rodata` and
//! lets a loader set before the object is loaded (the skeleton's `rodata` fields;
//! tools/lib/bpf/libbpf.c `bpf_map__initial_value`). In the WebAssembly module they are data
//! in its memory; the module's DWARF (clang `-g`) names them, with their address, size and
//! signedness, and the host writes a class's values there before any op runs.
//!
//! Only what C's type says can be set: integers, enums with an integer underlying type and
//! `bool`. A `const volatile` array or struct is not a tunable. A tunable the CC never reads
//! is dropped by the linker (`--gc-sections`) and is not listed.

use gimli::{AttributeValue, EndianSlice, LittleEndian, Operation};

/// How a tunable's bytes are read (DWARF `DW_AT_encoding` of its base type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Unsigned,
    Signed,
    Bool,
}

/// One tunable: where it lies in the module's memory and what it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tunable {
    pub name: String,
    /// Its C type as declared, qualifiers dropped (`__u32`, `bool`).
    pub type_name: String,
    pub addr: u32,
    /// Bytes: 1, 2, 4 or 8.
    pub size: u32,
    pub kind: Kind,
    /// The initializer's value, read from the module's data.
    pub default: i128,
}

impl Tunable {
    /// The values its type holds.
    pub fn range(&self) -> (i128, i128) {
        let bits = 8 * self.size;
        match self.kind {
            Kind::Bool => (0, 1),
            Kind::Unsigned => (0, (1i128 << bits) - 1),
            Kind::Signed => (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1),
        }
    }

    /// `value` if its type holds it, else why not.
    pub fn check(&self, value: i128) -> Result<(), String> {
        let (lo, hi) = self.range();
        if (lo..=hi).contains(&value) {
            Ok(())
        } else {
            Err(format!(
                "{value} does not fit its type {} ({lo}..={hi})",
                self.type_name
            ))
        }
    }

    /// `value` as its bytes in the module's memory (wasm32 is little-endian).
    pub fn bytes(&self, value: i128) -> Vec<u8> {
        value.to_le_bytes()[..self.size as usize].to_vec()
    }

    /// The value `bytes` (its bytes in memory) hold.
    pub fn value_of(&self, bytes: &[u8]) -> i128 {
        let mut b = [0u8; 16];
        b[..bytes.len()].copy_from_slice(bytes);
        let v = i128::from_le_bytes(b);
        match self.kind {
            Kind::Signed => {
                let shift = 128 - 8 * self.size;
                (v << shift) >> shift
            }
            Kind::Unsigned | Kind::Bool => v,
        }
    }
}

type R<'a> = EndianSlice<'a, LittleEndian>;

/// The tunables declared in `wasm`'s DWARF, by address (defaults left 0: the caller reads them
/// from the instantiated memory). A module without debug information declares none.
pub fn find(wasm: &[u8]) -> Result<Vec<Tunable>, String> {
    let mut sections: Vec<(&str, &[u8])> = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        if let wasmparser::Payload::CustomSection(c) = payload.map_err(|e| e.to_string())? {
            if c.name().starts_with(".debug_") {
                sections.push((c.name(), c.data()));
            }
        }
    }
    if sections.is_empty() {
        return Ok(Vec::new());
    }
    let dwarf = gimli::Dwarf::load(|id| -> Result<R<'_>, gimli::Error> {
        let data = sections
            .iter()
            .find(|(n, _)| *n == id.name())
            .map_or(&[][..], |(_, d)| d);
        Ok(EndianSlice::new(data, LittleEndian))
    })
    .map_err(|e| format!("its debug information cannot be read: {e}"))?;
    let bad = |e: gimli::Error| format!("its debug information cannot be read: {e}");

    let mut found = Vec::new();
    let mut units = dwarf.units();
    while let Some(header) = units.next().map_err(bad)? {
        let unit = dwarf.unit(header).map_err(bad)?;
        let mut entries = unit.entries();
        while let Some(e) = entries.next_dfs().map_err(bad)? {
            // Globals are the compile unit's children.
            if e.depth() != 1 || e.tag() != gimli::DW_TAG_variable {
                continue;
            }
            if !matches!(
                e.attr_value(gimli::DW_AT_external),
                Some(AttributeValue::Flag(true))
            ) {
                continue;
            }
            let Some(addr) = address(e, unit.encoding()).map_err(bad)? else {
                continue;
            };
            let Some(AttributeValue::UnitRef(ty)) = e.attr_value(gimli::DW_AT_type) else {
                continue;
            };
            let Some(scalar) = const_volatile_scalar(&dwarf, &unit, ty).map_err(bad)? else {
                continue;
            };
            let name = attr_string(&dwarf, &unit, e.attr_value(gimli::DW_AT_name)).map_err(bad)?;
            let Some(name) = name else { continue };
            found.push(Tunable {
                name,
                type_name: scalar.type_name,
                addr,
                size: scalar.size,
                kind: scalar.kind,
                default: 0,
            });
        }
    }
    found.sort_by_key(|t| t.addr);
    Ok(found)
}

/// A variable's address in memory: its location is one `DW_OP_addr`. None for any other
/// location, and for the address wasm-ld gives a variable it removed (0 or all ones).
fn address(
    e: &gimli::DebuggingInformationEntry<R<'_>>,
    encoding: gimli::Encoding,
) -> Result<Option<u32>, gimli::Error> {
    let Some(AttributeValue::Exprloc(expr)) = e.attr_value(gimli::DW_AT_location) else {
        return Ok(None);
    };
    let mut ops = expr.operations(encoding);
    let (Some(Operation::Address { address }), None) = (ops.next()?, ops.next()?) else {
        return Ok(None);
    };
    Ok(u32::try_from(address)
        .ok()
        .filter(|a| *a != 0 && *a != u32::MAX))
}

struct Scalar {
    type_name: String,
    size: u32,
    kind: Kind,
}

/// The scalar a `const volatile` type qualifies (through typedefs and enums), or None if the
/// type is not both const and volatile, or not a scalar of 1, 2, 4 or 8 bytes.
fn const_volatile_scalar(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &gimli::Unit<R<'_>>,
    mut ty: gimli::UnitOffset,
) -> Result<Option<Scalar>, gimli::Error> {
    let (mut is_const, mut is_volatile) = (false, false);
    let mut type_name: Option<String> = None;
    // A chain of qualifiers and typedefs is short; the bound stops a malformed cycle.
    for _ in 0..32 {
        let e = unit.entry(ty)?;
        let qualifier = matches!(
            e.tag(),
            gimli::DW_TAG_const_type | gimli::DW_TAG_volatile_type
        );
        if type_name.is_none() && !qualifier {
            type_name = attr_string(dwarf, unit, e.attr_value(gimli::DW_AT_name))?;
        }
        let next = match e.tag() {
            gimli::DW_TAG_const_type => {
                is_const = true;
                e.attr_value(gimli::DW_AT_type)
            }
            gimli::DW_TAG_volatile_type => {
                is_volatile = true;
                e.attr_value(gimli::DW_AT_type)
            }
            gimli::DW_TAG_typedef | gimli::DW_TAG_enumeration_type => {
                e.attr_value(gimli::DW_AT_type)
            }
            gimli::DW_TAG_base_type => {
                if !(is_const && is_volatile) {
                    return Ok(None);
                }
                let size = match e.attr_value(gimli::DW_AT_byte_size) {
                    Some(v) => v.udata_value().unwrap_or(0) as u32,
                    None => 0,
                };
                let kind = match e.attr_value(gimli::DW_AT_encoding) {
                    Some(AttributeValue::Encoding(gimli::DW_ATE_boolean)) => Kind::Bool,
                    Some(AttributeValue::Encoding(
                        gimli::DW_ATE_signed | gimli::DW_ATE_signed_char,
                    )) => Kind::Signed,
                    Some(AttributeValue::Encoding(
                        gimli::DW_ATE_unsigned | gimli::DW_ATE_unsigned_char,
                    )) => Kind::Unsigned,
                    _ => return Ok(None),
                };
                if ![1, 2, 4, 8].contains(&size) {
                    return Ok(None);
                }
                let type_name = type_name.unwrap_or_default();
                return Ok(Some(Scalar {
                    type_name,
                    size,
                    kind,
                }));
            }
            _ => return Ok(None),
        };
        match next {
            Some(AttributeValue::UnitRef(t)) => ty = t,
            _ => return Ok(None),
        }
    }
    Ok(None)
}

fn attr_string(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &gimli::Unit<R<'_>>,
    v: Option<AttributeValue<R<'_>>>,
) -> Result<Option<String>, gimli::Error> {
    match v {
        Some(v) => Ok(Some(
            dwarf.attr_string(unit, v)?.to_string_lossy().into_owned(),
        )),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(size: u32, kind: Kind) -> Tunable {
        Tunable {
            name: "x".into(),
            type_name: "t".into(),
            addr: 1024,
            size,
            kind,
            default: 0,
        }
    }

    #[test]
    fn ranges_are_the_c_types() {
        assert_eq!(t(4, Kind::Unsigned).range(), (0, 4_294_967_295));
        assert_eq!(t(1, Kind::Signed).range(), (-128, 127));
        assert_eq!(
            t(8, Kind::Signed).range(),
            (i64::MIN as i128, i64::MAX as i128)
        );
        assert_eq!(t(1, Kind::Bool).range(), (0, 1));
        assert!(t(2, Kind::Unsigned).check(65_536).is_err());
        assert!(t(2, Kind::Signed).check(-32_768).is_ok());
    }

    #[test]
    fn values_round_trip_through_their_bytes() {
        let s = t(4, Kind::Signed);
        assert_eq!(s.bytes(-3), vec![0xfd, 0xff, 0xff, 0xff]);
        assert_eq!(s.value_of(&s.bytes(-3)), -3);
        let u = t(8, Kind::Unsigned);
        let max = u64::MAX as i128;
        assert_eq!(u.value_of(&u.bytes(max)), max);
    }
}
