//! PTX text to IR.
//!
//! Parsing runs in two steps. [`split`] cuts the text into raw statements (ending at `;`, at a
//! brace, at a label's `:`, or at the end of the line for the line-terminated directives such as
//! `.loc`), remembering the line each starts on. [`parse`] then builds the [`Module`], parsing
//! instructions fully and keeping other directives verbatim. Errors name the line.

use super::ir::*;
use thiserror::Error;

/// A malformed PTX input.
#[derive(Debug, Error, PartialEq)]
#[error("line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

fn error(line: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        line,
        message: message.into(),
    }
}

/// A statement as cut from the text.
#[derive(Debug, Clone, PartialEq)]
struct Raw {
    line: usize,
    text: String,
    kind: RawKind,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum RawKind {
    /// Ended by `;` (the `;` is dropped).
    Statement,
    /// A function header ended by `{` (the `{` is dropped and a `BlockOpen` follows).
    Header,
    /// A line-terminated directive.
    LineDirective,
    Label,
    Comment,
    BlockOpen,
    BlockClose,
    /// A `.section` with its braced body, verbatim.
    Section,
}

/// Directives that end at the end of their line rather than at a `;`.
const LINE_DIRECTIVES: [&str; 5] = [".loc", ".file", ".version", ".target", ".address_size"];

/// Parses a PTX module.
pub fn parse(text: &str) -> Result<Module, ParseError> {
    let raws = split(text)?;
    Builder::new(raws).module()
}

fn split(text: &str) -> Result<Vec<Raw>, ParseError> {
    Splitter {
        chars: text.chars().collect(),
        pos: 0,
        line: 1,
        out: Vec::new(),
    }
    .run()
}

struct Splitter {
    chars: Vec<char>,
    pos: usize,
    line: usize,
    out: Vec<Raw>,
}

impl Splitter {
    fn run(mut self) -> Result<Vec<Raw>, ParseError> {
        while self.skip_space() {
            self.next_raw()?;
        }
        Ok(self.out)
    }

    fn peek(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    fn starts_with(&self, s: &str) -> bool {
        s.chars().enumerate().all(|(i, c)| self.peek(i) == Some(c))
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek(0)?;
        self.pos += 1;
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    /// Skips whitespace; false at end of input.
    fn skip_space(&mut self) -> bool {
        while let Some(c) = self.peek(0) {
            if !c.is_whitespace() {
                return true;
            }
            self.bump();
        }
        false
    }

    fn push(&mut self, line: usize, text: String, kind: RawKind) {
        self.out.push(Raw { line, text, kind });
    }

    fn next_raw(&mut self) -> Result<(), ParseError> {
        let line = self.line;
        if self.starts_with("//") {
            let text = self.take_line();
            self.push(line, text, RawKind::Comment);
        } else if self.starts_with("/*") {
            let text = self.take_block_comment(line)?;
            self.push(line, text, RawKind::Comment);
        } else if self.peek(0) == Some('{') {
            self.bump();
            self.push(line, "{".into(), RawKind::BlockOpen);
        } else if self.peek(0) == Some('}') {
            self.bump();
            self.push(line, "}".into(), RawKind::BlockClose);
        } else if self.starts_with(".section") {
            let text = self.take_section(line)?;
            self.push(line, text, RawKind::Section);
        } else if LINE_DIRECTIVES.iter().any(|d| self.starts_directive(d)) {
            let text = self.take_line();
            self.push(line, text.trim_end().to_string(), RawKind::LineDirective);
        } else {
            self.take_statement(line)?;
        }
        Ok(())
    }

    fn starts_directive(&self, name: &str) -> bool {
        self.starts_with(name)
            && self
                .peek(name.chars().count())
                .is_none_or(|c| c.is_whitespace())
    }

    /// Takes the rest of the line, without the newline, with any `//` comment dropped unless the
    /// line is itself a comment.
    fn take_line(&mut self) -> String {
        let mut text = String::new();
        while let Some(c) = self.peek(0) {
            if c == '\n' {
                break;
            }
            text.push(c);
            self.bump();
        }
        text
    }

    fn take_block_comment(&mut self, line: usize) -> Result<String, ParseError> {
        let mut text = String::new();
        while !self.starts_with("*/") {
            text.push(
                self.bump()
                    .ok_or_else(|| error(line, "unterminated /* comment"))?,
            );
        }
        self.bump();
        self.bump();
        text.push_str("*/");
        Ok(text)
    }

    fn take_section(&mut self, line: usize) -> Result<String, ParseError> {
        let mut text = String::new();
        let mut depth = 0usize;
        loop {
            let c = self
                .bump()
                .ok_or_else(|| error(line, "unterminated .section block"))?;
            text.push(c);
            match c {
                '{' => depth += 1,
                '}' if depth == 1 => return Ok(text),
                '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
    }

    /// Takes a `;`-terminated statement, a label, or a function header ended by `{`.
    fn take_statement(&mut self, line: usize) -> Result<(), ParseError> {
        let mut text = String::new();
        let mut parens = 0i32;
        let mut braces = 0i32;
        let mut brackets = 0i32;
        loop {
            if self.starts_with("//") {
                // A trailing comment inside a multi-line statement (function headers).
                self.take_line();
                text.push('\n');
                continue;
            }
            let Some(c) = self.peek(0) else {
                return Err(error(
                    line,
                    format!("statement not terminated by ';': {}", text.trim()),
                ));
            };
            match c {
                ';' if parens == 0 && braces == 0 && brackets == 0 => {
                    self.bump();
                    self.push(line, text.trim().to_string(), RawKind::Statement);
                    return Ok(());
                }
                ':' if parens == 0
                    && braces == 0
                    && brackets == 0
                    && is_label(&text)
                    && self.peek(1) != Some(':') =>
                {
                    self.bump();
                    self.push(line, text.trim().to_string(), RawKind::Label);
                    return Ok(());
                }
                '{' if parens == 0 && braces == 0 && is_function_header(&text) => {
                    self.push(line, text.trim().to_string(), RawKind::Header);
                    return Ok(());
                }
                '(' => parens += 1,
                ')' => parens -= 1,
                '{' => braces += 1,
                '}' => braces -= 1,
                '[' => brackets += 1,
                ']' => brackets -= 1,
                _ => {}
            }
            text.push(c);
            self.bump();
        }
    }
}

fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '$' || c == '%')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

fn is_label(text: &str) -> bool {
    is_identifier(text.trim())
}

fn is_function_header(text: &str) -> bool {
    text.split_whitespace()
        .any(|w| w == ".entry" || w == ".func")
}

struct Builder {
    raws: std::vec::IntoIter<Raw>,
}

impl Builder {
    fn new(raws: Vec<Raw>) -> Builder {
        Builder {
            raws: raws.into_iter(),
        }
    }

    fn module(mut self) -> Result<Module, ParseError> {
        let mut items = Vec::new();
        while let Some(raw) = self.raws.next() {
            items.push(self.item(raw)?);
        }
        Ok(Module { items })
    }

    fn item(&mut self, raw: Raw) -> Result<Item, ParseError> {
        match raw.kind {
            RawKind::Comment => Ok(Item::Comment(raw.text)),
            RawKind::Section => Ok(Item::Directive(raw.text)),
            RawKind::LineDirective if raw.text.starts_with(".file") => {
                parse_file(&raw).map(Item::File)
            }
            RawKind::LineDirective => Ok(Item::Directive(raw.text)),
            RawKind::Statement if is_function_header(&raw.text) => {
                parse_header(&raw).map(Item::Function)
            }
            RawKind::Statement => Ok(Item::Directive(format!("{};", raw.text))),
            RawKind::Header => {
                let mut function = parse_header(&raw)?;
                function.body = Some(self.body(raw.line)?);
                Ok(Item::Function(function))
            }
            RawKind::Label => Err(error(
                raw.line,
                format!("label '{}' outside a function", raw.text),
            )),
            RawKind::BlockOpen | RawKind::BlockClose => {
                Err(error(raw.line, "brace outside a function body"))
            }
        }
    }

    /// Reads a function body up to its closing brace.
    fn body(&mut self, header_line: usize) -> Result<Vec<Statement>, ParseError> {
        match self.raws.next() {
            Some(r) if r.kind == RawKind::BlockOpen => {}
            _ => return Err(error(header_line, "expected '{' after function header")),
        }
        let mut body = Vec::new();
        let mut depth = 1usize;
        for raw in self.raws.by_ref() {
            let statement = match raw.kind {
                RawKind::BlockOpen => {
                    depth += 1;
                    Statement::BlockOpen
                }
                RawKind::BlockClose => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(body);
                    }
                    Statement::BlockClose
                }
                RawKind::Comment => Statement::Comment(raw.text),
                RawKind::Label => Statement::Label(raw.text),
                RawKind::LineDirective if raw.text.split_whitespace().next() == Some(".loc") => {
                    Statement::Loc(parse_loc(&raw)?)
                }
                RawKind::LineDirective => Statement::Directive(raw.text),
                RawKind::Statement if raw.text.starts_with('.') => Statement::Directive(raw.text),
                RawKind::Statement => {
                    Statement::Instruction(parse_instruction(&raw.text, raw.line)?)
                }
                RawKind::Header | RawKind::Section => {
                    return Err(error(
                        raw.line,
                        "function or section inside a function body",
                    ))
                }
            };
            body.push(statement);
        }
        Err(error(header_line, "function body not closed by '}'"))
    }
}

fn parse_file(raw: &Raw) -> Result<FileEntry, ParseError> {
    let rest = raw.text[".file".len()..].trim();
    let (index, rest) = rest
        .split_once(char::is_whitespace)
        .ok_or_else(|| error(raw.line, "malformed .file directive"))?;
    let index = index
        .parse()
        .map_err(|_| error(raw.line, format!("bad .file index '{index}'")))?;
    let rest = rest.trim();
    let path_end = rest
        .strip_prefix('"')
        .and_then(|r| r.find('"'))
        .ok_or_else(|| error(raw.line, "the .file path must be quoted"))?;
    Ok(FileEntry {
        index,
        path: rest[1..=path_end].to_string(),
        rest: rest[path_end + 2..].trim().to_string(),
    })
}

fn parse_loc(raw: &Raw) -> Result<Loc, ParseError> {
    let body = raw.text[".loc".len()..].trim();
    let mut parts = body.split(',').map(str::trim);
    let at = parse_pos(parts.next().unwrap_or(""), raw.line)?;
    let mut loc = Loc {
        at,
        function_name: None,
        inlined_at: None,
    };
    for part in parts {
        if let Some(name) = part.strip_prefix("function_name") {
            loc.function_name = Some(name.trim().to_string());
        } else if let Some(pos) = part.strip_prefix("inlined_at") {
            loc.inlined_at = Some(parse_pos(pos, raw.line)?);
        } else {
            return Err(error(raw.line, format!("unknown .loc attribute '{part}'")));
        }
    }
    Ok(loc)
}

fn parse_pos(text: &str, line: usize) -> Result<SourcePos, ParseError> {
    let numbers: Vec<u32> = text
        .split_whitespace()
        .map(|n| {
            n.parse()
                .map_err(|_| error(line, format!("bad number '{n}' in .loc")))
        })
        .collect::<Result<_, _>>()?;
    match numbers[..] {
        [file, line_no, column] => Ok(SourcePos {
            file,
            line: line_no,
            column,
        }),
        [file, line_no] => Ok(SourcePos {
            file,
            line: line_no,
            column: 0,
        }),
        _ => Err(error(line, format!("malformed .loc position '{text}'"))),
    }
}

fn parse_header(raw: &Raw) -> Result<Function, ParseError> {
    let text = raw.text.as_str();
    let words: Vec<&str> = text.split_whitespace().collect();
    let kind_at = text
        .find(".entry")
        .map(|i| (i, FunctionKind::Entry, ".entry"))
        .or_else(|| text.find(".func").map(|i| (i, FunctionKind::Func, ".func")))
        .ok_or_else(|| error(raw.line, "expected .entry or .func"))?;
    debug_assert!(!words.is_empty());
    let (kind_pos, kind, keyword) = kind_at;
    let linkage = text[..kind_pos].trim().to_string();
    let mut rest = text[kind_pos + keyword.len()..].trim_start();
    let mut returns = None;
    if rest.starts_with('(') {
        let close = matching_paren(rest).ok_or_else(|| error(raw.line, "unclosed return list"))?;
        returns = Some(rest[..=close].to_string());
        rest = rest[close + 1..].trim_start();
    }
    let name_end = rest
        .find(|c: char| c == '(' || c.is_whitespace())
        .unwrap_or(rest.len());
    let name = rest[..name_end].to_string();
    if !is_identifier(&name) {
        return Err(error(raw.line, format!("bad function name '{name}'")));
    }
    rest = rest[name_end..].trim_start();
    let mut params = Vec::new();
    if rest.starts_with('(') {
        let close =
            matching_paren(rest).ok_or_else(|| error(raw.line, "unclosed parameter list"))?;
        params = parse_params(&rest[1..close], raw.line)?;
        rest = rest[close + 1..].trim_start();
    }
    let directives = rest
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    Ok(Function {
        linkage,
        kind,
        returns,
        name,
        params,
        directives,
        body: None,
    })
}

fn matching_paren(text: &str) -> Option<usize> {
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

fn parse_params(text: &str, line: usize) -> Result<Vec<Param>, ParseError> {
    split_top_level(text, ',')
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .map(|decl| {
            let name = decl
                .split_whitespace()
                .last()
                .map(|w| w.split('[').next().unwrap_or(w).to_string())
                .filter(|n| is_identifier(n))
                .ok_or_else(|| error(line, format!("bad parameter '{decl}'")))?;
            Ok(Param { decl, name })
        })
        .collect()
}

/// Splits at `sep` outside of brackets, braces and parentheses.
fn split_top_level(text: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            c if c == sep && depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// Parses one instruction without its `;`.
pub fn parse_instruction(text: &str, line: usize) -> Result<Instruction, ParseError> {
    let mut rest = text.trim();
    let mut guard = None;
    if let Some(g) = rest.strip_prefix('@') {
        let end = g
            .find(char::is_whitespace)
            .ok_or_else(|| error(line, "guard without instruction"))?;
        let (negated, predicate) = match g[..end].strip_prefix('!') {
            Some(p) => (true, p),
            None => (false, &g[..end]),
        };
        guard = Some(Guard {
            negated,
            predicate: predicate.to_string(),
        });
        rest = g[end..].trim_start();
    }
    let opcode_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let opcode_text = &rest[..opcode_end];
    if opcode_text.is_empty()
        || !opcode_text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':'))
        || !opcode_text.starts_with(|c: char| c.is_ascii_alphabetic())
    {
        return Err(error(line, format!("malformed instruction '{text}'")));
    }
    let operands_text = rest[opcode_end..].trim();
    let operands = if operands_text.is_empty() {
        Vec::new()
    } else {
        split_top_level(operands_text, ',')
            .into_iter()
            .map(|o| parse_operand(o.trim(), line))
            .collect::<Result<_, _>>()?
    };
    Ok(Instruction {
        guard,
        opcode: Opcode::parse(opcode_text),
        operands,
        ptx_line: line,
    })
}

fn parse_operand(text: &str, line: usize) -> Result<Operand, ParseError> {
    if text.is_empty() {
        return Err(error(line, "empty operand"));
    }
    if let Some(inner) = enclosed(text, '[', ']') {
        return parse_address(inner.trim(), line);
    }
    if let Some(inner) = enclosed(text, '{', '}') {
        return parse_list(inner, line).map(Operand::Vector);
    }
    if let Some(inner) = enclosed(text, '(', ')') {
        return parse_list(inner, line).map(Operand::List);
    }
    if is_register(text) {
        return Ok(Operand::Register(text.to_string()));
    }
    if is_immediate(text) {
        return Ok(Operand::Immediate(text.to_string()));
    }
    if is_identifier(text) {
        return Ok(Operand::Symbol(text.to_string()));
    }
    Ok(Operand::Other(text.to_string()))
}

fn enclosed(text: &str, open: char, close: char) -> Option<&str> {
    text.strip_prefix(open)?.strip_suffix(close)
}

fn parse_list(inner: &str, line: usize) -> Result<Vec<Operand>, ParseError> {
    if inner.trim().is_empty() {
        return Ok(Vec::new());
    }
    split_top_level(inner, ',')
        .into_iter()
        .map(|o| parse_operand(o.trim(), line))
        .collect()
}

fn parse_address(inner: &str, line: usize) -> Result<Operand, ParseError> {
    let split_at = inner
        .char_indices()
        .skip(1)
        .find(|&(_, c)| c == '+' || c == '-');
    let (base, offset) = match split_at {
        Some((i, sign)) => {
            let number = inner[i + 1..].trim().trim_start_matches('+');
            let magnitude = parse_int(number)
                .ok_or_else(|| error(line, format!("bad address offset in '[{inner}]'")))?;
            let offset = if sign == '-' { -magnitude } else { magnitude };
            (inner[..i].trim(), offset)
        }
        None => (inner, 0),
    };
    if base.is_empty() {
        return Err(error(line, format!("malformed address '[{inner}]'")));
    }
    if let Some(value) = parse_int(base) {
        return Ok(Operand::Address {
            base: String::new(),
            offset: value + offset,
        });
    }
    Ok(Operand::Address {
        base: base.to_string(),
        offset,
    })
}

/// An integer literal: decimal or hex, optionally negative, optionally with a `U` suffix. Values
/// above `i64::MAX` keep their 64-bit pattern (PTX immediates are 64-bit bit patterns).
fn parse_int(text: &str) -> Option<i64> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, text),
    };
    let digits = digits.trim_end_matches('U');
    let magnitude = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16).ok()?,
        None => digits.parse::<u64>().ok()?,
    };
    if negative {
        i64::try_from(-i128::from(magnitude)).ok()
    } else {
        Some(magnitude as i64)
    }
}

fn is_register(text: &str) -> bool {
    text.starts_with('%')
        && text[1..]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == '.')
        && text.len() > 1
}

fn is_immediate(text: &str) -> bool {
    let t = text.strip_prefix('-').unwrap_or(text);
    let hex_float =
        (t.starts_with("0f") || t.starts_with("0F") || t.starts_with("0d") || t.starts_with("0D"))
            && t.len() > 2
            && t[2..].chars().all(|c| c.is_ascii_hexdigit());
    hex_float || parse_int(t).is_some() || (t.contains('.') && t.parse::<f64>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = r#"
.version 8.8
.target sm_70
.address_size 64

	// .globl	k
.global .align 4 .u32 flag;

.visible .entry k(
	.param .u64 k_param_0,
	.param .u32 k_param_1
)
.maxntid 256, 1, 1
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<9>;
	.reg .b64 	%rd<5>;
	.loc	1 7 3
	ld.param.u64 	%rd1, [k_param_0];
	cvta.to.global.u64 	%rd2, %rd1;
	mov.u32 	%r1, %tid.x;
	setp.ne.s32 	%p1, %r1, 0;
	@%p1 bra 	$L__BB0_2;
	.loc	1 2 33, function_name $L__info_string0, inlined_at 1 9 3
	@!%p1 st.global.u32 	[%rd2+-8], %r1;
	ld.global.v4.u32 	{%r2, %r3, %r4, %r5}, [%rd2+16];
$L__BB0_2:
	{
	.reg .b32 temp;
	atom.global.cas.b32 	%r6, [flag], %r1, 1;
	}
	ret;
}
	.file	1 "/src/kernel.cu"
"#;

    #[test]
    fn parses_a_small_kernel() {
        let m = parse(SMALL).unwrap();
        let k = m.function("k").unwrap();
        assert_eq!(k.kind, FunctionKind::Entry);
        assert_eq!(k.linkage, ".visible");
        assert_eq!(k.params.len(), 2);
        assert_eq!(k.params[1].name, "k_param_1");
        assert_eq!(k.directives, vec![".maxntid 256, 1, 1".to_string()]);
        assert_eq!(m.file_path(1), Some("/src/kernel.cu"));
        let instructions: Vec<_> = k.instructions().collect();
        assert_eq!(instructions.len(), 9);
        assert_eq!(instructions[2].operands[1], Operand::reg("%tid.x"));
    }

    #[test]
    fn keeps_guards_addresses_and_vectors() {
        let m = parse(SMALL).unwrap();
        let st = m
            .function("k")
            .unwrap()
            .instructions()
            .nth(5)
            .unwrap()
            .clone();
        assert_eq!(
            st.guard,
            Some(Guard {
                negated: true,
                predicate: "%p1".into()
            })
        );
        assert_eq!(
            st.operands[0],
            Operand::Address {
                base: "%rd2".into(),
                offset: -8
            }
        );
        let ld = m
            .function("k")
            .unwrap()
            .instructions()
            .nth(6)
            .unwrap()
            .clone();
        assert!(matches!(&ld.operands[0], Operand::Vector(v) if v.len() == 4));
    }

    #[test]
    fn parses_inlined_locs() {
        let m = parse(SMALL).unwrap();
        let locs: Vec<_> = m
            .function("k")
            .unwrap()
            .body
            .as_ref()
            .unwrap()
            .iter()
            .filter_map(|s| match s {
                Statement::Loc(l) => Some(l.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(locs[1].at.line, 2);
        assert_eq!(locs[1].inlined_at.unwrap().line, 9);
        assert_eq!(locs[1].function_name.as_deref(), Some("$L__info_string0"));
    }

    #[test]
    fn nested_blocks_are_kept() {
        let m = parse(SMALL).unwrap();
        let body = m.function("k").unwrap().body.as_ref().unwrap();
        assert!(body.contains(&Statement::BlockOpen));
        assert!(body.contains(&Statement::BlockClose));
    }

    #[test]
    fn errors_name_the_line() {
        let bad = ".version 8.8\n.visible .entry k()\n{\n\tmov.u32 %r1, 1;\n\t+++ nonsense;\n}\n";
        let e = parse(bad).unwrap_err();
        assert_eq!(e.line, 5);
        assert!(e.message.contains("nonsense"), "{e}");
    }

    #[test]
    fn unterminated_statement_is_an_error() {
        let e = parse(".visible .entry k()\n{\n\tmov.u32 %r1, 1\n").unwrap_err();
        assert!(e.message.contains("not terminated"), "{e}");
    }

    #[test]
    fn unclosed_body_is_an_error() {
        let e = parse(".visible .entry k()\n{\n\tret;\n").unwrap_err();
        assert!(e.message.contains("not closed"), "{e}");
    }

    #[test]
    fn declarations_without_body() {
        let m = parse(".extern .func (.param .b32 func_retval0) vprintf(\n.param .b64 a,\n.param .b64 b\n);\n").unwrap();
        let f = m.function("vprintf").unwrap();
        assert_eq!(f.kind, FunctionKind::Func);
        assert!(f.body.is_none());
        assert_eq!(f.returns.as_deref(), Some("(.param .b32 func_retval0)"));
        assert_eq!(f.params.len(), 2);
    }

    #[test]
    fn regression_i64_min_literal_is_an_immediate() {
        let i = parse_instruction("mov.b64 %rd1, -9223372036854775808", 1).unwrap();
        assert_eq!(i.operands[1], Operand::imm("-9223372036854775808"));
        let i = parse_instruction("mov.b64 %rd1, 0xFFFFFFFFFFFFFFFF", 1).unwrap();
        assert_eq!(i.operands[1], Operand::imm("0xFFFFFFFFFFFFFFFF"));
        assert_eq!(parse_int("-9223372036854775809"), None);
    }

    #[test]
    fn immediates_and_symbols() {
        let i = parse_instruction("mov.f32 %f1, 0f3F800000", 1).unwrap();
        assert_eq!(i.operands[1], Operand::imm("0f3F800000"));
        let i = parse_instruction("mov.u64 %rd1, lock_", 1).unwrap();
        assert_eq!(i.operands[1], Operand::Symbol("lock_".into()));
        let i = parse_instruction("call.uni (retval0), foo, (param0, param1)", 1).unwrap();
        assert!(matches!(&i.operands[2], Operand::List(v) if v.len() == 2));
        let i = parse_instruction("setp.lt.s32 %p1|%p2, %r1, -4", 1).unwrap();
        assert_eq!(i.operands[0], Operand::Other("%p1|%p2".into()));
        assert_eq!(i.operands[2], Operand::imm("-4"));
    }
}
