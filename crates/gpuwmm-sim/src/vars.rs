//! Variable declarations: module-scope `.global`/`.const`/`.shared` variables (with their
//! initialisers), function-scope `.shared`/`.local` arrays, and kernel `.param` lists.
//!
//! The PTX IR keeps these declarations verbatim; the simulator needs their sizes, alignments and
//! initial bytes to lay out memory, so this module parses exactly that much of them.

/// Where a declared variable lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarSpace {
    Global,
    Const,
    Shared,
    Local,
    Param,
}

/// One parsed declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct VarDecl {
    pub space: VarSpace,
    pub name: String,
    pub align: u64,
    /// Size of one element in bytes (vector types included).
    pub elem_bytes: u64,
    /// Element count; `None` for an unsized `[]` array (dynamic shared memory).
    pub len: Option<u64>,
    pub is_extern: bool,
    /// Initial bytes, for variables with an initialiser.
    pub init: Option<Vec<u8>>,
    /// The element type word (`u32`, `f32`, `b8`), used to encode initialisers.
    pub elem_type: String,
}

impl VarDecl {
    pub fn bytes(&self) -> u64 {
        self.elem_bytes * self.len.unwrap_or(0)
    }
}

/// Parses `text` if it declares a variable in one of the spaces the simulator lays out; `Ok(None)`
/// for any other directive.
pub fn parse_var(text: &str) -> Result<Option<VarDecl>, String> {
    let text = text.trim().trim_end_matches(';').trim();
    let (decl, init) = match text.split_once('=') {
        Some((d, i)) => (d.trim(), Some(i.trim())),
        None => (text, None),
    };
    let words: Vec<&str> = decl.split_whitespace().collect();
    let space = match words.iter().find_map(|w| space_of(w)) {
        Some(s) => s,
        None => return Ok(None),
    };
    if words.iter().any(|w| *w == ".func" || *w == ".entry") {
        return Ok(None);
    }
    let mut align = 0;
    let mut elem_type = None;
    let mut vector = 1;
    let mut i = 0;
    while i < words.len() {
        match words[i] {
            ".align" => {
                align = words
                    .get(i + 1)
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(|| format!("bad .align in '{text}'"))?;
                i += 1;
            }
            ".v2" => vector = 2,
            ".v4" => vector = 4,
            w => {
                if let Some(t) = w.strip_prefix('.').filter(|t| type_bytes(t).is_some()) {
                    elem_type = Some(t.to_string());
                }
            }
        }
        i += 1;
    }
    let elem_type = elem_type.ok_or_else(|| format!("no type in declaration '{text}'"))?;
    let elem_bytes = type_bytes(&elem_type).unwrap_or(1) * vector;
    let name_word = words
        .last()
        .filter(|w| !w.starts_with('.'))
        .ok_or_else(|| format!("no name in declaration '{text}'"))?;
    let (name, len) = split_array(name_word, text)?;
    let mut var = VarDecl {
        space,
        name,
        align: if align == 0 { elem_bytes } else { align },
        elem_bytes,
        len,
        is_extern: words.contains(&".extern"),
        init: None,
        elem_type,
    };
    if let Some(init) = init {
        var.init = Some(encode_init(&var, init)?);
        if var.len.is_none() {
            var.len = Some(var.init.as_ref().map_or(0, |b| b.len() as u64) / var.elem_bytes);
        }
    }
    Ok(Some(var))
}

fn space_of(word: &str) -> Option<VarSpace> {
    match word {
        ".global" => Some(VarSpace::Global),
        ".const" => Some(VarSpace::Const),
        ".shared" => Some(VarSpace::Shared),
        ".local" => Some(VarSpace::Local),
        ".param" => Some(VarSpace::Param),
        _ => None,
    }
}

/// Bytes of a fundamental type (`u32` -> 4); `pred` counts as 1.
pub fn type_bytes(t: &str) -> Option<u64> {
    if t == "pred" {
        return Some(1);
    }
    gpuwmm_ptx::access::type_bits(t).map(|b| u64::from(b) / 8)
}

/// `name`, `name[16]`, `name[]`; multi-dimensional arrays multiply out.
fn split_array(word: &str, text: &str) -> Result<(String, Option<u64>), String> {
    let Some(open) = word.find('[') else {
        return Ok((word.to_string(), Some(1)));
    };
    let name = word[..open].to_string();
    let mut len = 1u64;
    for dim in word[open..].split('[').skip(1) {
        let dim = dim.trim_end_matches(']').trim();
        if dim.is_empty() {
            return Ok((name, None));
        }
        let n: u64 = parse_int(dim).ok_or_else(|| format!("bad array size in '{text}'"))? as u64;
        len *= n;
    }
    Ok((name, Some(len)))
}

fn encode_init(var: &VarDecl, init: &str) -> Result<Vec<u8>, String> {
    let values: Vec<&str> = init
        .split([',', '{', '}'])
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect();
    let scalar_bytes = type_bytes(&var.elem_type).unwrap_or(1) as usize;
    let mut out = Vec::with_capacity(values.len() * scalar_bytes);
    for v in values {
        let bits = literal_bits(v, &var.elem_type)
            .ok_or_else(|| format!("unsupported initialiser value '{v}' of '{}'", var.name))?;
        out.extend_from_slice(&bits.to_le_bytes()[..scalar_bytes]);
    }
    if let Some(len) = var.len {
        out.resize((len * var.elem_bytes) as usize, 0);
    }
    Ok(out)
}

/// An integer literal: decimal, hex (`0x`), octal-free, optional `U` suffix and sign.
pub fn parse_int(text: &str) -> Option<i64> {
    let (neg, digits) = match text.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, text),
    };
    let digits = digits.trim_end_matches('U');
    let v = if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        u64::from_str_radix(hex, 16).ok()? as i64
    } else {
        digits.parse::<u64>().ok()? as i64
    };
    Some(if neg { v.wrapping_neg() } else { v })
}

/// The bit pattern of a literal for a value of type `ty` (`u32`, `f32`, `f64`, ...).
pub fn literal_bits(text: &str, ty: &str) -> Option<u64> {
    let is_f32 = ty == "f32";
    let is_f64 = ty == "f64";
    let (neg, body) = match text.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, text),
    };
    let hex_float = |prefix_lower: &str, prefix_upper: &str| {
        body.strip_prefix(prefix_lower)
            .or_else(|| body.strip_prefix(prefix_upper))
            .filter(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()))
            .and_then(|h| u64::from_str_radix(h, 16).ok())
    };
    if let Some(bits) = hex_float("0f", "0F") {
        let f = f32::from_bits(bits as u32);
        let f = if neg { -f } else { f };
        return Some(if is_f64 {
            f64::from(f).to_bits()
        } else {
            u64::from(f.to_bits())
        });
    }
    if let Some(bits) = hex_float("0d", "0D") {
        let f = f64::from_bits(bits);
        let f = if neg { -f } else { f };
        return Some(if is_f32 {
            u64::from((f as f32).to_bits())
        } else {
            f.to_bits()
        });
    }
    if let Some(i) = parse_int(text) {
        return Some(if is_f32 {
            u64::from((i as f32).to_bits())
        } else if is_f64 {
            (i as f64).to_bits()
        } else {
            i as u64
        });
    }
    let f: f64 = text.parse().ok()?;
    Some(if is_f32 {
        u64::from((f as f32).to_bits())
    } else if is_f64 {
        f.to_bits()
    } else {
        return None;
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalar_and_array_declarations() {
        let v = parse_var(".global .align 4 .u32 lock_;").unwrap().unwrap();
        assert_eq!(
            (v.space, v.name.as_str(), v.bytes(), v.align),
            (VarSpace::Global, "lock_", 4, 4)
        );
        let v = parse_var(".shared .align 4 .b8 cache[1024]")
            .unwrap()
            .unwrap();
        assert_eq!((v.space, v.bytes()), (VarSpace::Shared, 1024));
        let v = parse_var(".extern .shared .align 16 .b8 dyn[];")
            .unwrap()
            .unwrap();
        assert!(v.is_extern && v.len.is_none());
        assert!(parse_var(".version 8.8").unwrap().is_none());
    }

    #[test]
    fn initialisers() {
        let v = parse_var(".visible .global .align 4 .u32 t[3] = {1, 2, 0xff};")
            .unwrap()
            .unwrap();
        assert_eq!(v.init.unwrap(), vec![1, 0, 0, 0, 2, 0, 0, 0, 255, 0, 0, 0]);
        let v = parse_var(".const .align 4 .f32 c = 0f3F800000;")
            .unwrap()
            .unwrap();
        assert_eq!(v.init.unwrap(), 1.0f32.to_le_bytes().to_vec());
        let v = parse_var(".global .align 1 .b8 s[4] = {7};")
            .unwrap()
            .unwrap();
        assert_eq!(v.init.unwrap(), vec![7, 0, 0, 0]);
    }

    #[test]
    fn params() {
        let v = parse_var(".param .u64 .ptr .global .align 8 k_param_0")
            .unwrap()
            .unwrap();
        assert_eq!((v.space, v.bytes(), v.align), (VarSpace::Param, 8, 8));
        let v = parse_var(".param .align 8 .b8 k_param_1[24]")
            .unwrap()
            .unwrap();
        assert_eq!((v.bytes(), v.align), (24, 8));
    }
}
