//! The element types an `app.toml` may declare for its buffers.
//!
//! Backends move bytes; apps think in `u32`, `i32`, `f32` and `u64` elements.
//! [`crate::backend::words::Word`] converts between the two for the typed helpers of
//! [`super::RunContext`]; [`ElemType`] names the types a manifest may use.

/// An element type of an app buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElemType {
    U32,
    I32,
    F32,
    U64,
}

impl ElemType {
    pub const ALL: [ElemType; 4] = [ElemType::U32, ElemType::I32, ElemType::F32, ElemType::U64];

    pub fn name(self) -> &'static str {
        match self {
            ElemType::U32 => "u32",
            ElemType::I32 => "i32",
            ElemType::F32 => "f32",
            ElemType::U64 => "u64",
        }
    }

    pub fn bytes(self) -> usize {
        match self {
            ElemType::U64 => 8,
            _ => 4,
        }
    }

    /// The integers the type holds exactly: its range for integer types, ±2^24 for `f32`.
    pub fn exact_integer_range(self) -> (i128, i128) {
        match self {
            ElemType::U32 => (0, u32::MAX as i128),
            ElemType::I32 => (i32::MIN as i128, i32::MAX as i128),
            ElemType::F32 => (-(1 << 24), 1 << 24),
            ElemType::U64 => (0, u64::MAX as i128),
        }
    }

    /// The little-endian bytes of integer `value` as this type (the caller checked the range).
    pub fn int_bytes(self, value: i128, out: &mut Vec<u8>) {
        match self {
            ElemType::U32 => out.extend_from_slice(&(value as u32).to_le_bytes()),
            ElemType::I32 => out.extend_from_slice(&(value as i32).to_le_bytes()),
            ElemType::F32 => out.extend_from_slice(&(value as f32).to_le_bytes()),
            ElemType::U64 => out.extend_from_slice(&(value as u64).to_le_bytes()),
        }
    }
}

display_by_name!(ElemType, name);
parse_by_name!(ElemType, name, String, |s| format!(
    "unknown element type '{s}' (expected u32, i32, f32 or u64)"
));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_parse_and_know_their_sizes() {
        assert_eq!("f32".parse::<ElemType>(), Ok(ElemType::F32));
        assert!("f16"
            .parse::<ElemType>()
            .unwrap_err()
            .contains("u32, i32, f32 or u64"));
        assert_eq!(ElemType::U64.bytes(), 8);
        let mut out = Vec::new();
        ElemType::F32.int_bytes(3, &mut out);
        assert_eq!(out, 3.0f32.to_le_bytes());
    }
}
