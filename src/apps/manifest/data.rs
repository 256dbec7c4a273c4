//! Buffer contents given as data: a literal list in the manifest, or a file in the app's folder.
//!
//! Real applications read their inputs from files; a manifest names such a file and the buffer
//! starts as its contents. Three formats: whitespace-separated numbers (text), the buffer's raw
//! little-endian image (binary), and NumPy's `.npy` (its dtype must be the buffer's type, in C
//! order). Every element is checked to fit the buffer's type exactly, and a bad one is named by
//! its place (`input.txt:3`, element 17), so a wrong file fails at load time, never mid-run.

use super::error::{FieldErrors, ManifestError};
use crate::apps::words::ElemType;
use std::path::Path;
use toml::Value;

type R<T> = Result<T, ManifestError>;

/// How a data file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Binary,
    Npy,
}

impl Format {
    pub const NAMES: &'static str = "\"text\", \"binary\" or \"npy\"";

    pub fn parse(name: &str) -> Option<Format> {
        match name {
            "text" => Some(Format::Text),
            "binary" => Some(Format::Binary),
            "npy" => Some(Format::Npy),
            _ => None,
        }
    }

    /// The format a file name implies: `.npy`, `.bin` or `.raw` (binary), anything else text.
    pub fn of_file(name: &str) -> Format {
        let extension = Path::new(name).extension().and_then(|e| e.to_str());
        match extension {
            Some("npy") => Format::Npy,
            Some("bin" | "raw") => Format::Binary,
            _ => Format::Text,
        }
    }
}

/// The image of a literal list of elements.
pub fn list_image(
    items: &[Value],
    elem: ElemType,
    field: &str,
    errors: &FieldErrors,
) -> R<Vec<u8>> {
    let mut image = Vec::with_capacity(items.len() * elem.bytes());
    for (i, item) in items.iter().enumerate() {
        let field = format!("{field}[{i}]");
        match (item, elem) {
            (Value::Integer(v), _) => push_int(*v as i128, elem, &mut image)
                .map_err(|m| errors.bad_value(&field, format!("{v} {m}")))?,
            (Value::Float(x), ElemType::F32) if x.is_finite() => {
                image.extend_from_slice(&(*x as f32).to_le_bytes())
            }
            (other, ElemType::F32) => {
                return Err(errors.wrong_type(&field, "a finite number", other))
            }
            (other, _) => return Err(errors.wrong_type(&field, "an integer", other)),
        }
    }
    Ok(image)
}

/// The image of the data file `name` (relative to `dir`) read as `format`.
pub fn file_image(
    dir: &Path,
    name: &str,
    format: Format,
    elem: ElemType,
    field: &str,
    errors: &FieldErrors,
) -> R<Vec<u8>> {
    let path = dir.join(name);
    let bytes = std::fs::read(&path)
        .map_err(|e| errors.bad_value(field, format!("cannot read '{}': {e}", path.display())))?;
    let bad = |message: String| errors.bad_value(field, format!("{name}: {message}"));
    match format {
        Format::Text => text_image(&bytes, elem).map_err(bad),
        Format::Binary => binary_image(bytes, elem).map_err(bad),
        Format::Npy => npy_image(&bytes, elem).map_err(bad),
    }
}

/// Appends integer `v` as `elem`, or says why it does not fit.
fn push_int(v: i128, elem: ElemType, image: &mut Vec<u8>) -> Result<(), String> {
    let (lo, hi) = elem.exact_integer_range();
    if v < lo || v > hi {
        return Err(format!("does not fit {elem} exactly (range {lo} to {hi})"));
    }
    elem.int_bytes(v, image);
    Ok(())
}

fn text_image(bytes: &[u8], elem: ElemType) -> Result<Vec<u8>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| {
        "not UTF-8 text (name a raw file `.bin` or write format = \"binary\")".to_string()
    })?;
    let mut image = Vec::new();
    for (number, line) in text.lines().enumerate() {
        for word in line.split_whitespace() {
            let at = |m: String| format!("line {}: '{word}' {m}", number + 1);
            match elem {
                ElemType::F32 => match word.parse::<f64>() {
                    Ok(x) if x.is_finite() => image.extend_from_slice(&(x as f32).to_le_bytes()),
                    _ => return Err(at("is not a finite number".into())),
                },
                _ => {
                    let v: i128 = word
                        .parse()
                        .map_err(|_| at(format!("is not an integer (the buffer is {elem})")))?;
                    push_int(v, elem, &mut image).map_err(at)?;
                }
            }
        }
    }
    Ok(image)
}

fn binary_image(bytes: Vec<u8>, elem: ElemType) -> Result<Vec<u8>, String> {
    if !bytes.len().is_multiple_of(elem.bytes()) {
        return Err(format!(
            "{} bytes is not a whole number of {}-byte {elem} elements",
            bytes.len(),
            elem.bytes()
        ));
    }
    Ok(bytes)
}

/// The data of a `.npy` file (format versions 1 to 3) whose dtype is `elem`, little-endian, in
/// C order; any shape (the elements are taken in order).
fn npy_image(bytes: &[u8], elem: ElemType) -> Result<Vec<u8>, String> {
    const MAGIC: &[u8] = b"\x93NUMPY";
    if !bytes.starts_with(MAGIC) || bytes.len() < 10 {
        return Err("not a .npy file (no \\x93NUMPY header)".into());
    }
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(format!("unsupported .npy format version {v}")),
    };
    let header = bytes
        .get(start..start + header_len)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or("truncated .npy header")?;
    let descr = dict_value(header, "descr").ok_or("the .npy header has no 'descr'")?;
    let expected = match elem {
        ElemType::U32 => "<u4",
        ElemType::I32 => "<i4",
        ElemType::F32 => "<f4",
        ElemType::U64 => "<u8",
    };
    if descr.trim_matches(['\'', '"']) != expected {
        return Err(format!(
            "dtype {descr} does not match the buffer's {elem} (expected '{expected}')"
        ));
    }
    if dict_value(header, "fortran_order").is_some_and(|v| v.starts_with("True")) {
        return Err("Fortran-ordered arrays are not supported (save in C order)".into());
    }
    binary_image(bytes[start + header_len..].to_vec(), elem)
}

/// The text of `key`'s value in a `.npy` header dictionary, up to the next comma.
fn dict_value<'h>(header: &'h str, key: &str) -> Option<&'h str> {
    let at = header.find(&format!("'{key}'"))?;
    let rest = header[at + key.len() + 2..]
        .trim_start()
        .strip_prefix(':')?;
    let rest = rest.trim_start();
    Some(rest.split(',').next().unwrap_or(rest).trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(descr: &str, data: &[u8]) -> Vec<u8> {
        let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (2,), }}");
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn text_numbers_become_the_buffer_image() {
        let image = text_image(b"1 2\n  3\n", ElemType::U32).unwrap();
        assert_eq!(image, [1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0]);
        let floats = text_image(b"0.5 -2", ElemType::F32).unwrap();
        assert_eq!(&floats[..4], &0.5f32.to_le_bytes());
    }

    #[test]
    fn a_bad_text_element_is_named_by_line() {
        let err = text_image(b"1\n2 x\n", ElemType::I32).unwrap_err();
        assert_eq!(err, "line 2: 'x' is not an integer (the buffer is i32)");
        let err = text_image(b"-1", ElemType::U32).unwrap_err();
        assert!(err.starts_with("line 1: '-1' does not fit u32"), "{err}");
    }

    #[test]
    fn raw_binary_must_be_whole_elements() {
        assert_eq!(
            binary_image(vec![1, 0, 0, 0], ElemType::U32).unwrap().len(),
            4
        );
        assert!(binary_image(vec![1, 0, 0], ElemType::U32).is_err());
    }

    #[test]
    fn npy_data_of_the_buffer_type_is_read_and_another_dtype_refused() {
        let data = [7, 0, 0, 0, 9, 0, 0, 0];
        assert_eq!(npy_image(&npy("<i4", &data), ElemType::I32).unwrap(), data);
        let err = npy_image(&npy("<f8", &data), ElemType::I32).unwrap_err();
        assert!(
            err.contains("dtype '<f8' does not match the buffer's i32"),
            "{err}"
        );
        assert!(npy_image(b"not npy at all", ElemType::I32).is_err());
    }

    #[test]
    fn formats_follow_the_file_name() {
        assert_eq!(Format::of_file("a.npy"), Format::Npy);
        assert_eq!(Format::of_file("a.bin"), Format::Binary);
        assert_eq!(Format::of_file("input.txt"), Format::Text);
    }
}
