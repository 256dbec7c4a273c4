//! Device-side `printf` (`call vprintf(format, args)`): the format string's directives applied
//! to the caller's argument buffer, as CUDA's `printf` does, so that a kernel debugged on the
//! simulator shows what it prints.
//!
//! [`format`] is a pure function of the format string and a [`PrintfSource`] that reads the
//! argument buffer and the strings `%s` names; the interpreter gives it the calling thread's
//! memory (`exec.rs`) and appends the text to the launch's [`DeviceOutput`] (`fifo.rs`).
//!
//! The argument buffer is what the caller built: each argument at its natural alignment, 4 bytes
//! for `int`, `unsigned`, `char` and `short` (promoted), 8 for `long`, `long long`, `size_t`,
//! pointers and `double` (`float` is promoted to `double`). A directive is C's
//! `%[flags][width][.precision][length]conversion` with the flags `-+ #0`, a width in digits or
//! `*` (an `int` argument, as CUDA's width allows), a precision in digits, the lengths `hh h l ll
//! z j t` and the conversions `d i u o x X c s p f F e E g G a A %`. Anything else (`%n`, `%L`,
//! a `.*` precision, which CUDA does not take) is printed as written and consumes nothing, as is
//! every directive after the 32nd argument (CUDA's limit). The return value is CUDA's: the number
//! of arguments the format consumed, or -1 for a null format.

mod call;
mod fifo;
mod number;

pub use self::fifo::{DeviceOutput, FIFO_BYTES};

use self::number::{format_float, format_int, pad};
use crate::device::BackendError;

/// Arguments CUDA's `printf` takes after the format; directives past them print as written.
pub const MAX_ARGUMENTS: u32 = 32;

/// Bytes read at most of a format string or of a `%s` string without its NUL: what is left
/// is not printed.
pub const STRING_LIMIT: usize = 4096;

/// Width and precision are clamped here: a field this wide cannot fit the launch's buffer
/// anyway, so its line is dropped (`fifo.rs`) rather than built in full.
const FIELD_LIMIT: usize = FIFO_BYTES + 1;

/// What a format's directives read: the calling thread's memory.
pub trait PrintfSource {
    /// The `size`-byte (4 or 8) little-endian argument at byte `offset` of the argument buffer.
    fn argument(&mut self, offset: u64, size: u64) -> Result<u64, BackendError>;

    /// The bytes of the NUL-terminated string at generic address `addr` (not 0) before its NUL,
    /// at most `limit` of them.
    fn string(&mut self, addr: u64, limit: usize) -> Result<Vec<u8>, BackendError>;
}

/// One `printf` call's text and return value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Formatted {
    pub text: Vec<u8>,
    /// Arguments the format consumed: what CUDA's `printf` returns.
    pub arguments: u32,
}

/// Formats `format` (without its NUL) with the arguments `source` reads, in order.
pub fn format(format: &[u8], source: &mut impl PrintfSource) -> Result<Formatted, BackendError> {
    let mut out = Formatted {
        text: Vec::with_capacity(format.len()),
        arguments: 0,
    };
    let mut cursor = 0u64;
    let mut rest = format;
    while let Some(at) = rest.iter().position(|&b| b == b'%') {
        out.text.extend_from_slice(&rest[..at]);
        let (spec, len) = parse_directive(&rest[at..]);
        let raw = &rest[at..at + len];
        rest = &rest[at + len..];
        match spec {
            Some(spec) if spec.arguments() + out.arguments <= MAX_ARGUMENTS => {
                let mut args = Arguments {
                    source: &mut *source,
                    cursor: &mut cursor,
                    consumed: &mut out.arguments,
                };
                spec.write(&mut args, &mut out.text)?;
            }
            _ => out.text.extend_from_slice(raw),
        }
    }
    out.text.extend_from_slice(rest);
    Ok(out)
}

/// The argument buffer as directives consume it: each argument at its natural alignment after
/// the previous one.
struct Arguments<'a, S: PrintfSource> {
    source: &'a mut S,
    cursor: &'a mut u64,
    consumed: &'a mut u32,
}

impl<S: PrintfSource> Arguments<'_, S> {
    /// The next argument of `size` bytes.
    fn next(&mut self, size: u64) -> Result<u64, BackendError> {
        let offset = self.cursor.next_multiple_of(size);
        let value = self.source.argument(offset, size)?;
        *self.cursor = offset + size;
        *self.consumed += 1;
        Ok(value)
    }
}

/// A length modifier: how wide an integer argument is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Length {
    /// None: `int`, or `double` for the float conversions.
    Default,
    /// `hh`: a `char` (promoted to `int`).
    Char,
    /// `h`: a `short` (promoted to `int`).
    Short,
    /// `l`, `ll`, `z`, `j`, `t`: 8 bytes.
    Long,
}

/// A directive's flags, width and precision.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Flags {
    /// `-`
    pub left: bool,
    /// `+`
    pub plus: bool,
    /// ` `
    pub space: bool,
    /// `#`
    pub alt: bool,
    /// `0`
    pub zero: bool,
    pub width: usize,
    pub precision: Option<usize>,
}

/// A field width: digits, or `*` (an argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Width {
    Fixed(usize),
    Argument,
}

/// One parsed directive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Spec {
    flags: Flags,
    width: Width,
    length: Length,
    conversion: u8,
}

/// The directive at the start of `text` (which starts with `%`) and its length in bytes;
/// `None` when it is not one the formatter takes (it is then printed as written).
fn parse_directive(text: &[u8]) -> (Option<Spec>, usize) {
    let mut i = 1;
    let at = |i: usize| text.get(i).copied().unwrap_or(0);
    let mut flags = Flags::default();
    loop {
        match at(i) {
            b'-' => flags.left = true,
            b'+' => flags.plus = true,
            b' ' => flags.space = true,
            b'#' => flags.alt = true,
            b'0' => flags.zero = true,
            _ => break,
        }
        i += 1;
    }
    let width = match at(i) {
        b'*' => {
            i += 1;
            Width::Argument
        }
        _ => Width::Fixed(digits(text, &mut i)),
    };
    let mut precision_ok = true;
    if at(i) == b'.' {
        i += 1;
        precision_ok = at(i) != b'*';
        flags.precision = Some(digits(text, &mut i));
    }
    let length = match (at(i), at(i + 1)) {
        (b'h', b'h') => (Length::Char, 2),
        (b'h', _) => (Length::Short, 1),
        (b'l', b'l') => (Length::Long, 2),
        (b'l' | b'z' | b'j' | b't', _) => (Length::Long, 1),
        _ => (Length::Default, 0),
    };
    i += length.1;
    let conversion = at(i);
    let known = b"diuoxXcspfFeEgGaA%".contains(&conversion) && conversion != 0;
    let len = if conversion == 0 { i } else { i + 1 };
    let float = b"fFeEgGaA".contains(&conversion);
    // A length on a float conversion (`%lf` is `%f`) changes nothing.
    let length = if float { Length::Default } else { length.0 };
    let spec = (known && precision_ok).then_some(Spec {
        flags,
        width,
        length,
        conversion,
    });
    (spec, len.min(text.len()))
}

/// The decimal number at `text[*i..]` (0 when there is none), clamped to [`FIELD_LIMIT`].
fn digits(text: &[u8], i: &mut usize) -> usize {
    let mut n = 0usize;
    while let Some(d) = text.get(*i).filter(|b| b.is_ascii_digit()) {
        n = (n * 10 + usize::from(d - b'0')).min(FIELD_LIMIT);
        *i += 1;
    }
    n
}

impl Spec {
    /// Arguments the directive consumes.
    fn arguments(&self) -> u32 {
        let value = u32::from(self.conversion != b'%');
        value + u32::from(self.width == Width::Argument)
    }

    /// Bytes of the directive's value argument.
    fn argument_size(&self) -> u64 {
        match (self.conversion, self.length) {
            (b's' | b'p' | b'f' | b'F' | b'e' | b'E' | b'g' | b'G' | b'a' | b'A', _) => 8,
            // `%lc` takes a `wint_t`, 4 bytes like `int`.
            (b'c', _) => 4,
            (_, Length::Long) => 8,
            _ => 4,
        }
    }

    /// Consumes the directive's arguments and writes its text.
    fn write<S: PrintfSource>(
        mut self,
        args: &mut Arguments<'_, S>,
        out: &mut Vec<u8>,
    ) -> Result<(), BackendError> {
        if self.conversion == b'%' {
            out.push(b'%');
            return Ok(());
        }
        if self.width == Width::Argument {
            // A negative width is a `-` flag and its magnitude, as in C.
            let width = args.next(4)? as u32 as i32;
            self.flags.left |= width < 0;
            self.flags.width = (width.unsigned_abs() as usize).min(FIELD_LIMIT);
        } else if let Width::Fixed(w) = self.width {
            self.flags.width = w;
        }
        let value = args.next(self.argument_size())?;
        let f = &self.flags;
        match self.conversion {
            b'd' | b'i' => {
                let v = self.signed(value);
                format_int(f, v < 0, v.unsigned_abs(), b'd', out)
            }
            b'u' | b'o' | b'x' | b'X' => {
                format_int(f, false, self.unsigned(value), self.conversion, out)
            }
            b'c' => pad(f, b"", &[value as u8], false, out),
            b's' => self.write_string(args.source, value, out)?,
            b'p' => write_pointer(f, value, out),
            _ => format_float(f, f64::from_bits(value), self.conversion, out),
        }
        Ok(())
    }

    /// An integer argument as the length modifier makes it, sign-extended.
    fn signed(&self, v: u64) -> i64 {
        match self.length {
            Length::Default => i64::from(v as u32 as i32),
            Length::Short => i64::from(v as u16 as i16),
            Length::Char => i64::from(v as u8 as i8),
            Length::Long => v as i64,
        }
    }

    /// An integer argument as the length modifier makes it, unsigned.
    fn unsigned(&self, v: u64) -> u64 {
        match self.length {
            Length::Default => u64::from(v as u32),
            Length::Short => u64::from(v as u16),
            Length::Char => u64::from(v as u8),
            Length::Long => v,
        }
    }

    /// `%s`: the string at `addr`, at most `precision` bytes; a null pointer is `(null)`.
    fn write_string(
        &self,
        source: &mut impl PrintfSource,
        addr: u64,
        out: &mut Vec<u8>,
    ) -> Result<(), BackendError> {
        let limit = self.flags.precision.unwrap_or(usize::MAX).min(STRING_LIMIT);
        let text = match addr {
            0 => b"(null)"[..limit.min(6)].to_vec(),
            _ => source.string(addr, limit)?,
        };
        pad(&self.flags, b"", &text, false, out);
        Ok(())
    }
}

/// `%p`: `0x` and lowercase hex, `(nil)` for a null pointer (as glibc prints them).
fn write_pointer(f: &Flags, addr: u64, out: &mut Vec<u8>) {
    let text = match addr {
        0 => "(nil)".to_string(),
        _ => format!("0x{addr:x}"),
    };
    let flags = Flags {
        precision: None,
        ..*f
    };
    pad(&flags, b"", text.as_bytes(), false, out);
}

#[cfg(test)]
mod tests;
