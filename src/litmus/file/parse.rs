//! The litmus dialect of Dat3M's PTX suite, read into a [`LitmusFile`].
//!
//! The format is line-oriented once past the init block: a thread header row, one row per step
//! with a cell per thread (`|`-separated, `;`-terminated), then the final condition. Malformed
//! text is a [`LitmusFileError::Syntax`] naming the file and line. An instruction that is
//! well-formed text but not one this crate knows is kept as [`Instr::Unknown`], so that the
//! translator can refuse just that test and a directory of tests still runs.

use super::ast::*;
use super::LitmusFileError;
use std::collections::HashSet;
use std::path::Path;

/// Reads and parses a litmus file.
pub fn parse_file(path: &Path) -> Result<LitmusFile, LitmusFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| LitmusFileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse(path, &text)
}

/// `text` with herd's `(* … *)` comments (anywhere outside a quoted comment, over several
/// lines too) made blanks, newlines kept, so that lines keep their numbers; an unclosed one
/// runs to the end.
fn blank_herd_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut quoted, mut in_comment) = (false, false);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (in_comment, c) {
            (true, '*') if chars.peek() == Some(&')') => {
                chars.next();
                out.push_str("  ");
                in_comment = false;
            }
            (true, '\n') => out.push('\n'),
            (true, _) => out.push(' '),
            (false, '(') if !quoted && chars.peek() == Some(&'*') => {
                chars.next();
                out.push_str("  ");
                in_comment = true;
            }
            (false, '"') => {
                quoted = !quoted;
                out.push(c);
            }
            (false, _) => out.push(c),
        }
    }
    out
}

/// Parses the text of a litmus file; `path` only names it in errors and in the result.
pub fn parse(path: &Path, text: &str) -> Result<LitmusFile, LitmusFileError> {
    let text = &blank_herd_comments(text);
    let mut p = Parser { path, text, pos: 0 };
    let name = p.header()?;
    let comment = p.comments()?;
    let init = p.init_block()?;
    let lines: Vec<(usize, &str)> = p.rest_lines();
    let mut rows = lines.iter().filter(|(_, l)| !l.trim().is_empty());
    let &(header_line, header) = rows.next().ok_or_else(|| {
        p.error_at(
            p.line(),
            "expected the thread header row (`P0@cta 0,gpu 0 | ...;`)",
        )
    })?;
    let mut threads = p.thread_header(header_line, header)?;
    let mut condition_start = None;
    for &(line, text) in rows {
        if starts_condition(text) {
            condition_start = Some(line);
            break;
        }
        p.instruction_row(line, text, &mut threads)?;
    }
    let condition_line = condition_start.ok_or_else(|| {
        p.error_at(
            p.line_count(),
            "expected a final condition (`exists`, `~exists` or `forall`)",
        )
    })?;
    let condition_text: Vec<(usize, &str)> = lines
        .iter()
        .filter(|(line, _)| *line >= condition_line)
        .copied()
        .collect();
    let condition = ConditionParser::new(&p, &condition_text)?.condition()?;
    let file = LitmusFile {
        path: path.to_path_buf(),
        name,
        comment,
        init,
        threads,
        header_line,
        condition,
    };
    p.check_references(&file)?;
    Ok(file)
}

struct Parser<'a> {
    path: &'a Path,
    text: &'a str,
    /// Byte offset of what has not been read yet (header, comments, init block).
    pos: usize,
}

impl<'a> Parser<'a> {
    fn error_at(&self, line: usize, message: impl Into<String>) -> LitmusFileError {
        LitmusFileError::Syntax {
            file: self.path.to_path_buf(),
            line,
            message: message.into(),
        }
    }

    fn line_of(&self, pos: usize) -> usize {
        self.text[..pos.min(self.text.len())].matches('\n').count() + 1
    }

    fn line(&self) -> usize {
        self.line_of(self.pos)
    }

    fn line_count(&self) -> usize {
        self.text.lines().count().max(1)
    }

    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    fn skip_space(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }

    /// `PTX <name>` on the first non-blank line.
    fn header(&mut self) -> Result<String, LitmusFileError> {
        self.skip_space();
        let line = self.line();
        let rest = self.rest();
        let end = rest.find('\n').unwrap_or(rest.len());
        let first = rest[..end].trim();
        self.pos += end;
        let mut words = first.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some("PTX"), Some(name), None) => Ok(name.to_string()),
            (Some("PTX"), None, _) => Err(self.error_at(line, "the header `PTX` has no test name")),
            (Some(arch), ..) if arch != "PTX" => Err(self.error_at(
                line,
                format!(
                    "expected `PTX <name>`, found `{first}` (only PTX litmus files are supported)"
                ),
            )),
            _ => Err(self.error_at(line, format!("expected `PTX <name>`, found `{first}`"))),
        }
    }

    /// Quoted comments after the header (one or more; each may span lines). A comment that
    /// quotes text itself (`means "No, but ..."`) does not end at its inner quote: as Dat3M's
    /// grammar skips everything before the init block, so does this, when the quoted comments
    /// do not end right before a line that opens it.
    fn comments(&mut self) -> Result<Option<String>, LitmusFileError> {
        let start = self.pos;
        let quoted = self.quoted_comments()?;
        self.skip_space();
        if self.rest().starts_with('{') {
            return Ok(quoted);
        }
        match self.line_opening_init(start) {
            Some(open) => {
                let comment = self.text[start..open].trim().trim_matches('"').trim();
                self.pos = open;
                Ok((!comment.is_empty()).then(|| comment.to_string()))
            }
            None => Ok(quoted),
        }
    }

    /// The offset of the first line after `from` whose first non-blank character is `{`.
    fn line_opening_init(&self, from: usize) -> Option<usize> {
        let mut at = from;
        for line in self.text[from..].split_inclusive('\n') {
            if line.trim_start().starts_with('{') {
                return Some(at + line.len() - line.trim_start().len());
            }
            at += line.len();
        }
        None
    }

    fn quoted_comments(&mut self) -> Result<Option<String>, LitmusFileError> {
        let mut out = Vec::new();
        loop {
            self.skip_space();
            if !self.rest().starts_with('"') {
                break;
            }
            let line = self.line();
            let body = &self.rest()[1..];
            let end = body
                .find('"')
                .ok_or_else(|| self.error_at(line, "unterminated comment (no closing `\"`)"))?;
            out.push(body[..end].trim().to_string());
            self.pos += end + 2;
        }
        Ok((!out.is_empty()).then(|| out.join("\n")))
    }

    /// `{ x=0; P1:r1=0; ... }`: entries separated by `;` or line breaks.
    fn init_block(&mut self) -> Result<Vec<Init>, LitmusFileError> {
        self.skip_space();
        let open_line = self.line();
        if !self.rest().starts_with('{') {
            return Err(self.error_at(open_line, "expected the init block `{ ... }`"));
        }
        let start = self.pos + 1;
        let len = self.text[start..]
            .find('}')
            .ok_or_else(|| self.error_at(open_line, "the init block has no closing `}`"))?;
        let body = &self.text[start..start + len];
        self.pos = start + len + 1;
        let mut out = Vec::new();
        let mut offset = 0;
        for piece in body.split_inclusive([';', '\n']) {
            let line = self.line_of(start + offset);
            offset += piece.len();
            let item = piece.trim_end_matches([';', '\n']).trim();
            if !item.is_empty() {
                out.push(self.init_item(line, item)?);
            }
        }
        Ok(out)
    }

    fn init_item(&self, line: usize, item: &str) -> Result<Init, LitmusFileError> {
        if let Some(alias) = self.alias_item(line, item)? {
            return Ok(alias);
        }
        let (lhs, rhs) = item.split_once('=').ok_or_else(|| {
            self.error_at(
                line,
                format!("expected `name=value` in the init block, found `{item}`"),
            )
        })?;
        let (thread, name) = match lhs.split_once(':') {
            Some((t, r)) => (Some(self.thread_number(line, t.trim())?), r.trim()),
            None => (None, lhs.trim()),
        };
        let named = match thread {
            Some(_) => is_register(name),
            None => is_identifier(name),
        };
        if !named {
            return Err(self.error_at(line, format!("`{name}` is not a register or location name")));
        }
        let rhs = rhs.trim();
        let value = match parse_int(rhs) {
            Some(v) => match not_a_word(rhs, v) {
                Some(why) => return Err(self.error_at(line, why)),
                None => InitValue::Int(v),
            },
            None if is_identifier(rhs) => InitValue::Address(rhs.to_string()),
            None => return Err(self.error_at(line, format!("`{rhs}` is not an initial value"))),
        };
        Ok(Init {
            line,
            thread,
            name: name.to_string(),
            value,
        })
    }

    /// `x @ texture aliases y` (a proxy alias), if the item is one.
    fn alias_item(&self, line: usize, item: &str) -> Result<Option<Init>, LitmusFileError> {
        let Some((name, rest)) = item.split_once('@') else {
            return Ok(None);
        };
        let words: Vec<&str> = rest.split_whitespace().collect();
        let [proxy, "aliases", target] = words.as_slice() else {
            return Err(self.error_at(
                line,
                format!(
                    "expected `name @ proxy aliases location` in the init block, found `{item}`"
                ),
            ));
        };
        let name = name.trim();
        if !is_identifier(name) || !is_identifier(target) {
            return Err(self.error_at(line, format!("`{item}` does not name two locations")));
        }
        Ok(Some(Init {
            line,
            thread: None,
            name: name.to_string(),
            value: InitValue::Alias {
                proxy: proxy.to_string(),
                target: target.to_string(),
            },
        }))
    }

    /// `P3` or `3`.
    fn thread_number(&self, line: usize, text: &str) -> Result<usize, LitmusFileError> {
        text.strip_prefix('P').unwrap_or(text).parse().map_err(|_| {
            self.error_at(
                line,
                format!("`{text}` is not a thread (expected e.g. `P1`)"),
            )
        })
    }

    /// The lines after the init block, numbered (the first may be the tail of the `}` line).
    fn rest_lines(&self) -> Vec<(usize, &'a str)> {
        let first = self.line();
        self.rest()
            .split('\n')
            .enumerate()
            .map(|(i, l)| (first + i, l.trim_end_matches('\r')))
            .collect()
    }

    /// `P0@cta 0,gpu 0 | P1@cta 1, gpu 0 ;`
    fn thread_header(&self, line: usize, text: &str) -> Result<Vec<Thread>, LitmusFileError> {
        let body = text.trim().strip_suffix(';').ok_or_else(|| {
            self.error_at(
                line,
                format!("the thread header row must end with `;`: `{}`", text.trim()),
            )
        })?;
        let mut threads = Vec::new();
        for (column, cell) in body.split('|').enumerate() {
            let cell = cell.trim();
            let (who, placement) = match cell.split_once('@') {
                Some((w, p)) => (w.trim(), Some(p)),
                None => (cell, None),
            };
            let id = who
                .strip_prefix('P')
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| {
                    self.error_at(
                        line,
                        format!("expected a thread like `P0@cta 0,gpu 0`, found `{cell}`"),
                    )
                })?;
            if id != column {
                return Err(self.error_at(
                    line,
                    format!(
                        "thread P{id} is in column {column}; threads must be P0, P1, ... in order"
                    ),
                ));
            }
            let (cta, gpu) = match placement {
                Some(p) => self.placement(line, p)?,
                None => (None, 0),
            };
            threads.push(Thread {
                id,
                cta,
                gpu,
                code: Vec::new(),
            });
        }
        Ok(threads)
    }

    /// `cta 0,gpu 0`
    fn placement(&self, line: usize, text: &str) -> Result<(Option<u32>, u32), LitmusFileError> {
        let (mut cta, mut gpu) = (None, 0);
        for part in text.split(',') {
            let mut words = part.split_whitespace();
            let (key, value) = (
                words.next(),
                words.next().and_then(|v| v.parse::<u32>().ok()),
            );
            match (key, value, words.next()) {
                (Some("cta"), Some(v), None) => cta = Some(v),
                (Some("gpu"), Some(v), None) => gpu = v,
                _ => {
                    return Err(self.error_at(
                        line,
                        format!("bad placement `{}` (expected `cta N, gpu M`)", part.trim()),
                    ))
                }
            }
        }
        Ok((cta, gpu))
    }

    /// One step: a cell per thread, `|`-separated, ending in `;`.
    fn instruction_row(
        &self,
        line: usize,
        text: &str,
        threads: &mut [Thread],
    ) -> Result<(), LitmusFileError> {
        let body = text.trim().strip_suffix(';').ok_or_else(|| {
            self.error_at(
                line,
                format!("an instruction row must end with `;`: `{}`", text.trim()),
            )
        })?;
        let cells: Vec<&str> = body.split('|').collect();
        if cells.len() != threads.len() {
            return Err(self.error_at(
                line,
                format!(
                    "this row has {} cells, the header has {} threads",
                    cells.len(),
                    threads.len()
                ),
            ));
        }
        for (thread, cell) in threads.iter_mut().zip(cells) {
            for (text, instr) in self.cell(line, cell.trim())? {
                thread.code.push(Step {
                    line,
                    text: text.to_string(),
                    instr,
                });
            }
        }
        Ok(())
    }

    /// A cell: empty, a label `LC00:`, an instruction, or a label then an instruction.
    fn cell<'c>(
        &self,
        line: usize,
        cell: &'c str,
    ) -> Result<Vec<(&'c str, Instr)>, LitmusFileError> {
        if cell.is_empty() {
            return Ok(Vec::new());
        }
        if let Some((label, rest)) = cell.split_once(':') {
            if is_identifier(label) {
                let mut out = vec![(&cell[..label.len() + 1], Instr::Label(label.to_string()))];
                let rest = rest.trim();
                if !rest.is_empty() {
                    out.push((rest, self.instruction(line, rest)?));
                }
                return Ok(out);
            }
        }
        Ok(vec![(cell, self.instruction(line, cell)?)])
    }

    fn instruction(&self, line: usize, text: &str) -> Result<Instr, LitmusFileError> {
        let (opcode, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
        let operands: Vec<&str> = if rest.trim().is_empty() {
            Vec::new()
        } else {
            rest.split(',').map(str::trim).collect()
        };
        if operands.iter().any(|o| o.is_empty()) {
            return Err(self.error_at(line, format!("empty operand in `{text}`")));
        }
        let words: Vec<&str> = opcode.split('.').collect();
        let ops = Operands {
            p: self,
            line,
            text,
            list: &operands,
        };
        let instr = match words[0] {
            "ld" => load(&words[1..], &ops)?,
            "st" => store(&words[1..], &ops)?,
            "fence" | "membar" => {
                ops.count(0)?;
                fence(&words)
            }
            "atom" | "red" => rmw(words[0] == "red", &words[1..], &ops)?,
            "bar" | "barrier" => barrier(&words[1..], &ops)?,
            "goto" if words.len() == 1 => {
                ops.count(1)?;
                Instr::Goto(ops.label(0)?)
            }
            "add" | "sub" | "mul" | "div" if words.len() == 1 => {
                ops.count(3)?;
                let op = match words[0] {
                    "add" => Arith::Add,
                    "sub" => Arith::Sub,
                    "mul" => Arith::Mul,
                    _ => Arith::Div,
                };
                Instr::Arith {
                    op,
                    dst: ops.reg(0)?,
                    a: ops.value(1)?,
                    b: ops.value(2)?,
                }
            }
            w => match branch_comparison(w) {
                Some(cmp) if words.len() == 1 => {
                    ops.count(3)?;
                    Instr::Branch {
                        cmp,
                        a: ops.value(0)?,
                        b: ops.value(1)?,
                        target: ops.label(2)?,
                    }
                }
                _ => Instr::Unknown(text.to_string()),
            },
        };
        Ok(instr)
    }

    /// Labels defined twice, jumps to labels that do not exist, threads and init entries that do
    /// not exist.
    fn check_references(&self, file: &LitmusFile) -> Result<(), LitmusFileError> {
        let n = file.threads.len();
        for init in &file.init {
            if let Some(t) = init.thread.filter(|t| *t >= n) {
                return Err(self.error_at(
                    init.line,
                    format!("P{t} is not a thread of this test ({n} threads)"),
                ));
            }
        }
        for thread in &file.threads {
            let mut labels = HashSet::new();
            for step in &thread.code {
                if let Instr::Label(l) = &step.instr {
                    if !labels.insert(l.as_str()) {
                        return Err(self.error_at(
                            step.line,
                            format!("label {l} is defined twice in P{}", thread.id),
                        ));
                    }
                }
            }
            for step in &thread.code {
                if let Instr::Branch { target, .. } | Instr::Goto(target) = &step.instr {
                    if !labels.contains(target.as_str()) {
                        return Err(self.error_at(
                            step.line,
                            format!("P{} jumps to {target}, which it does not define", thread.id),
                        ));
                    }
                }
            }
        }
        // Last, so that errors in the code are reported first.
        for term in file.condition.expr.terms() {
            if let Some(message) = undeclared(file, term) {
                return Err(self.error_at(file.condition.line, message));
            }
        }
        Ok(())
    }
}

/// The operands of one instruction, with the context its errors need.
struct Operands<'p, 'a> {
    p: &'p Parser<'a>,
    line: usize,
    text: &'p str,
    list: &'p [&'p str],
}

impl Operands<'_, '_> {
    fn error(&self, message: impl std::fmt::Display) -> LitmusFileError {
        self.p
            .error_at(self.line, format!("`{}`: {message}", self.text))
    }

    fn count(&self, n: usize) -> Result<(), LitmusFileError> {
        if self.list.len() == n {
            Ok(())
        } else {
            Err(self.error(format_args!(
                "expected {n} operands, found {}",
                self.list.len()
            )))
        }
    }

    /// Operand `i`, when `is_one` accepts it as a `what`.
    fn operand_of_kind(
        &self,
        i: usize,
        is_one: fn(&str) -> bool,
        what: &str,
    ) -> Result<String, LitmusFileError> {
        let o = self.list[i];
        if is_one(o) {
            Ok(o.to_string())
        } else {
            Err(self.error(format_args!("`{o}` is not a {what}")))
        }
    }

    fn name(&self, i: usize, what: &str) -> Result<String, LitmusFileError> {
        self.operand_of_kind(i, is_identifier, what)
    }

    fn reg(&self, i: usize) -> Result<String, LitmusFileError> {
        self.operand_of_kind(i, is_register, "register")
    }

    fn loc(&self, i: usize) -> Result<String, LitmusFileError> {
        self.name(i, "location")
    }

    fn label(&self, i: usize) -> Result<String, LitmusFileError> {
        self.name(i, "label")
    }

    /// A register or an integer.
    fn value(&self, i: usize) -> Result<Value, LitmusFileError> {
        let o = self.list[i];
        match parse_int(o) {
            Some(v) => match not_a_word(o, v) {
                Some(why) => Err(self.error(format_args!("{why}"))),
                None => Ok(Value::Imm(v)),
            },
            None if is_register(o) => Ok(Value::Reg(o.to_string())),
            None => Err(self.error(format_args!("`{o}` is not a register or an integer"))),
        }
    }
}

/// `ld{.weak|.volatile|.relaxed.S|.acquire.S} r, x`, and `ld{.weak} r, imm` (a constant
/// moved into the register, as the suite's Memalloy translations write it).
fn load(q: &[&str], ops: &Operands) -> Result<Instr, LitmusFileError> {
    ops.count(2)?;
    let dst = ops.reg(0)?;
    let Some(sem) = access_sem(q, "acquire") else {
        return Ok(Instr::Unknown(ops.text.to_string()));
    };
    if let (AccessSem::Weak, Some(value)) = (&sem, parse_int(ops.list[1])) {
        if let Some(why) = not_a_word(ops.list[1], value) {
            return Err(ops.error(format_args!("{why}")));
        }
        return Ok(Instr::Move { dst, value });
    }
    Ok(Instr::Load {
        sem,
        dst,
        loc: ops.loc(1)?,
    })
}

/// `st{.weak|.volatile|.relaxed.S|.release.S} x, v`.
fn store(q: &[&str], ops: &Operands) -> Result<Instr, LitmusFileError> {
    let Some(sem) = access_sem(q, "release") else {
        return Ok(Instr::Unknown(ops.text.to_string()));
    };
    ops.count(2)?;
    Ok(Instr::Store {
        sem,
        loc: ops.loc(0)?,
        value: ops.value(1)?,
    })
}

/// The semantics of a load's or store's qualifiers `q`, `ordered` naming the ordering one
/// (`acquire` for a load, `release` for a store); `None` for any other qualifiers.
fn access_sem(q: &[&str], ordered: &str) -> Option<AccessSem> {
    Some(match q {
        [] | ["weak"] => AccessSem::Weak,
        ["volatile"] => AccessSem::Volatile,
        ["relaxed", s] if litmus_scope(s).is_some() => AccessSem::Relaxed(scope(s)),
        [o, s] if *o == ordered && litmus_scope(s).is_some() => AccessSem::Ordered(scope(s)),
        _ => return None,
    })
}

fn scope(word: &str) -> Scope {
    litmus_scope(word).unwrap_or(Scope::Sys)
}

/// `fence.sc.S`, `fence.acq_rel.S`, `membar.{cta,gl,sys}`; anything else (`fence.proxy...`) is
/// unknown.
fn fence(words: &[&str]) -> Instr {
    let fence = match words {
        ["fence", "sc", s] => litmus_scope(s).map(Fence::Sc),
        ["fence", "acq_rel", s] => litmus_scope(s).map(Fence::AcqRel),
        ["membar", "cta"] => Some(Fence::Membar(Scope::Cta)),
        ["membar", "gl"] => Some(Fence::Membar(Scope::Gpu)),
        ["membar", "sys"] => Some(Fence::Membar(Scope::Sys)),
        _ => None,
    };
    fence.map_or_else(|| Instr::Unknown(words.join(".")), Instr::Fence)
}

/// `atom.SEM.S.OP r, x, v[, v2]` and `red.SEM.S.OP x, v`; semantics default to relaxed and
/// scope to gpu, as in PTX.
fn rmw(is_red: bool, q: &[&str], ops: &Operands) -> Result<Instr, LitmusFileError> {
    let (mut sem, mut sc, mut op) = (None, None, None);
    for w in q {
        if let (Some(s), None) = (RmwSem::from_word(w), sem) {
            sem = Some(s);
        } else if let (Some(s), None) = (litmus_scope(w), sc) {
            sc = Some(s);
        } else if let (Some(o), None) = (RmwOp::from_word(w), op) {
            op = Some(o);
        } else {
            return Ok(Instr::Unknown(ops.text.to_string()));
        }
    }
    let Some(op) = op else {
        return Ok(Instr::Unknown(ops.text.to_string()));
    };
    let (sem, scope) = (sem.unwrap_or(RmwSem::Relaxed), sc.unwrap_or(Scope::Gpu));
    if is_red {
        if matches!(op, RmwOp::Cas | RmwOp::Exch) {
            return Ok(Instr::Unknown(ops.text.to_string()));
        }
        ops.count(2)?;
        return Ok(Instr::Red {
            sem,
            scope,
            op,
            loc: ops.loc(0)?,
            value: ops.value(1)?,
        });
    }
    ops.count(2 + op.operand_count())?;
    Ok(Instr::Atom {
        sem,
        scope,
        op,
        dst: ops.reg(0)?,
        loc: ops.loc(1)?,
        operands: (2..ops.list.len())
            .map(|i| ops.value(i))
            .collect::<Result<_, _>>()?,
    })
}

/// The comparison of a branch opcode (`beq`, `bne`, `blt`, `ble`, `bgt`, `bge`).
fn branch_comparison(opcode: &str) -> Option<Cmp> {
    Some(match opcode {
        "beq" => Cmp::Eq,
        "bne" => Cmp::Ne,
        "blt" => Cmp::Lt,
        "ble" => Cmp::Le,
        "bgt" => Cmp::Gt,
        "bge" => Cmp::Ge,
        _ => return None,
    })
}

/// `bar.cta.sync a{, b...}`, `bar.sync a`, `bar.cta.arrive a, b`.
fn barrier(q: &[&str], ops: &Operands) -> Result<Instr, LitmusFileError> {
    let arrive = match q {
        ["cta", "sync"] | ["sync"] => false,
        ["cta", "arrive"] | ["arrive"] => true,
        _ => return Ok(Instr::Unknown(ops.text.to_string())),
    };
    if ops.list.is_empty() {
        return Err(ops.error("a barrier needs a barrier id"));
    }
    Ok(Instr::Barrier {
        arrive,
        operands: (0..ops.list.len())
            .map(|i| ops.value(i))
            .collect::<Result<_, _>>()?,
    })
}

/// Why a term of the condition names nothing the test has, if it does: a thread past the last,
/// a register its thread neither initialises nor uses, a location neither initialised nor
/// accessed (it would read as 0 and make the condition say something else than it seems to).
fn undeclared(file: &LitmusFile, term: &Term) -> Option<String> {
    let n = file.threads.len();
    match term {
        Term::Reg { thread, .. } if *thread >= n => Some(format!(
            "the condition names P{thread}, but the test has {n} threads"
        )),
        Term::Reg { thread, reg } => {
            let initialised = file
                .init
                .iter()
                .any(|i| i.thread == Some(*thread) && &i.name == reg);
            let code = &file.threads[*thread].code;
            // An instruction the parser does not know (e.g. a proxy's `cold.weak r3, x`) may
            // use it too: the test is refused later as unsupported, not called malformed.
            let mentions = |text: &str| text.split([' ', '\t', ',']).any(|w| w == reg);
            let used = code.iter().any(|s| match &s.instr {
                Instr::Unknown(text) => mentions(text),
                instr => instr.registers().contains(&reg.as_str()),
            });
            (!initialised && !used).then(|| {
                format!("the condition names P{thread}:{reg}, which P{thread} neither initialises nor uses")
            })
        }
        Term::Loc(name) => {
            let initialised = file
                .init
                .iter()
                .any(|i| i.thread.is_none() && &i.name == name);
            let steps = file.threads.iter().flat_map(|t| &t.code);
            let used = steps
                .clone()
                .any(|s| s.instr.location() == Some(name.as_str()));
            (!initialised && !used).then(|| {
                format!("the condition names location {name}, which the test neither initialises nor accesses")
            })
        }
        Term::Const(_) => None,
    }
}

fn starts_condition(line: &str) -> bool {
    let t = line.trim_start();
    let t = t.strip_prefix('~').map_or(t, str::trim_start);
    ["exists", "forall"].iter().any(|k| {
        t.strip_prefix(k)
            .is_some_and(|rest| !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
    })
}

/// A register name: an identifier, or one with PTX's `%` before it (`%r1`, as older Dat3M tests
/// write registers).
pub fn is_register(s: &str) -> bool {
    is_identifier(s.strip_prefix('%').unwrap_or(s))
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A decimal (optionally negative) or `0x` hexadecimal integer.
/// Why `text`, an integer, is no value of a test: registers and locations are 32-bit words, so
/// a value is one read signed or unsigned (`None` when it fits).
fn not_a_word(text: &str, v: i64) -> Option<String> {
    (!(-(1i64 << 31)..=i64::from(u32::MAX)).contains(&v))
        .then(|| format!("`{text}` does not fit a 32-bit word (-2147483648 to 4294967295)"))
}

pub fn parse_int(s: &str) -> Option<i64> {
    let (negative, digits) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let value = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => i64::from_str_radix(hex, 16).ok()?,
        None if !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) => {
            digits.parse().ok()?
        }
        None => return None,
    };
    Some(if negative { -value } else { value })
}

/// A token of the final condition.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Int(i64),
    Colon,
    Open,
    Close,
    And,
    Or,
    Not,
    Equal,
    NotEqual,
    Semicolon,
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Token::Word(w) => write!(f, "`{w}`"),
            Token::Int(i) => write!(f, "`{i}`"),
            Token::Colon => f.write_str("`:`"),
            Token::Open => f.write_str("`(`"),
            Token::Close => f.write_str("`)`"),
            Token::And => f.write_str("`/\\`"),
            Token::Or => f.write_str("`\\/`"),
            Token::Not => f.write_str("`~`"),
            Token::Equal => f.write_str("`==`"),
            Token::NotEqual => f.write_str("`!=`"),
            Token::Semicolon => f.write_str("`;`"),
        }
    }
}

/// A recursive-descent parser of `exists|~exists|forall <proposition>`, where `/\` binds tighter
/// than `\/` and `~` tighter than both.
struct ConditionParser<'p, 'a> {
    p: &'p Parser<'a>,
    tokens: Vec<(usize, Token)>,
    next: usize,
    last_line: usize,
}

impl<'p, 'a> ConditionParser<'p, 'a> {
    fn new(p: &'p Parser<'a>, lines: &[(usize, &str)]) -> Result<Self, LitmusFileError> {
        let mut tokens = Vec::new();
        for &(line, text) in lines {
            tokenize(text, line, &mut tokens).map_err(|m| p.error_at(line, m))?;
        }
        let last_line = lines
            .iter()
            .rev()
            .find(|l| !l.1.trim().is_empty())
            .map_or(1, |l| l.0);
        Ok(ConditionParser {
            p,
            tokens,
            next: 0,
            last_line,
        })
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.next).map(|t| &t.1)
    }

    fn line(&self) -> usize {
        self.tokens.get(self.next).map_or(self.last_line, |t| t.0)
    }

    fn bump(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.next).map(|t| t.1.clone());
        self.next += 1;
        t
    }

    fn error(&self, message: impl Into<String>) -> LitmusFileError {
        self.p.error_at(self.line(), message)
    }

    fn unexpected(&self, wanted: &str) -> LitmusFileError {
        match self.peek() {
            Some(t) => self.error(format!("in the condition: expected {wanted}, found {t}")),
            None => self.error(format!(
                "in the condition: expected {wanted}, found the end of the file"
            )),
        }
    }

    fn condition(mut self) -> Result<Condition, LitmusFileError> {
        let line = self.line();
        let negated = self.peek() == Some(&Token::Not);
        if negated {
            self.bump();
        }
        let quantifier = match (self.bump(), negated) {
            (Some(Token::Word(w)), false) if w == "exists" => Quantifier::Exists,
            (Some(Token::Word(w)), true) if w == "exists" => Quantifier::NotExists,
            (Some(Token::Word(w)), false) if w == "forall" => Quantifier::Forall,
            _ => {
                self.next -= 1;
                return Err(self.unexpected("`exists`, `~exists` or `forall`"));
            }
        };
        let expr = self.or()?;
        while self.peek() == Some(&Token::Semicolon) {
            self.bump();
        }
        if self.peek().is_some() {
            return Err(self.unexpected("the end of the condition"));
        }
        Ok(Condition {
            line,
            quantifier,
            expr,
        })
    }

    fn or(&mut self) -> Result<Expr, LitmusFileError> {
        self.left_assoc(&Token::Or, Self::and, Expr::Or)
    }

    fn and(&mut self) -> Result<Expr, LitmusFileError> {
        self.left_assoc(&Token::And, Self::not, Expr::And)
    }

    /// Operands that `operand` reads, joined by `operator` to the left: `a op b op c` is
    /// `join(join(a, b), c)`.
    fn left_assoc(
        &mut self,
        operator: &Token,
        operand: fn(&mut Self) -> Result<Expr, LitmusFileError>,
        join: fn(Box<Expr>, Box<Expr>) -> Expr,
    ) -> Result<Expr, LitmusFileError> {
        let mut e = operand(self)?;
        while self.peek() == Some(operator) {
            self.bump();
            e = join(Box::new(e), Box::new(operand(self)?));
        }
        Ok(e)
    }

    fn not(&mut self) -> Result<Expr, LitmusFileError> {
        if self.peek() == Some(&Token::Not) {
            self.bump();
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<Expr, LitmusFileError> {
        match self.peek() {
            Some(Token::Open) => {
                self.bump();
                let e = self.or()?;
                if self.bump() != Some(Token::Close) {
                    self.next -= 1;
                    return Err(self.unexpected("`)`"));
                }
                Ok(e)
            }
            Some(Token::Word(w)) if w == "true" => {
                self.bump();
                Ok(Expr::True)
            }
            Some(Token::Word(w)) if w == "false" => {
                self.bump();
                Ok(Expr::False)
            }
            _ => {
                let a = self.term()?;
                let equal = match self.bump() {
                    Some(Token::Equal) => true,
                    Some(Token::NotEqual) => false,
                    _ => {
                        self.next -= 1;
                        return Err(self.unexpected("`==`, `=` or `!=`"));
                    }
                };
                let b = self.term()?;
                Ok(Expr::Compare { equal, a, b })
            }
        }
    }

    /// `P1:r0`, `1:r0`, a location, or an integer.
    fn term(&mut self) -> Result<Term, LitmusFileError> {
        let thread_prefix = |t: &Token| match t {
            Token::Int(n) if *n >= 0 => Some(*n as usize),
            Token::Word(w) => w.strip_prefix('P').and_then(|n| n.parse().ok()),
            _ => None,
        };
        let followed_by_colon = self.tokens.get(self.next + 1).map(|t| &t.1) == Some(&Token::Colon);
        match self.peek().cloned() {
            Some(t) if followed_by_colon && thread_prefix(&t).is_some() => {
                let thread = thread_prefix(&t).unwrap_or_default();
                self.next += 2;
                match self.bump() {
                    Some(Token::Word(reg)) if is_register(&reg) => Ok(Term::Reg { thread, reg }),
                    _ => {
                        self.next -= 1;
                        Err(self.unexpected("a register after `:`"))
                    }
                }
            }
            Some(Token::Int(n)) => {
                self.bump();
                Ok(Term::Const(n))
            }
            Some(Token::Word(w)) if is_identifier(&w) => {
                self.bump();
                Ok(Term::Loc(w))
            }
            _ => Err(self.unexpected("a register (`P0:r1`), a location or an integer")),
        }
    }
}

fn tokenize(text: &str, line: usize, out: &mut Vec<(usize, Token)>) -> Result<(), String> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        let two = text.get(i..i + 2).unwrap_or("");
        let (token, len) = match c {
            _ if c.is_whitespace() => {
                i += 1;
                continue;
            }
            '(' => (Token::Open, 1),
            ')' => (Token::Close, 1),
            ':' => (Token::Colon, 1),
            ';' => (Token::Semicolon, 1),
            '~' => (Token::Not, 1),
            _ if two == "/\\" => (Token::And, 2),
            _ if two == "\\/" => (Token::Or, 2),
            _ if two == "==" => (Token::Equal, 2),
            _ if two == "!=" => (Token::NotEqual, 2),
            '=' => (Token::Equal, 1),
            _ if c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '%' => {
                let len = text[i + 1..]
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .map_or(text.len() - i, |n| n + 1);
                let word = &text[i..i + len];
                match parse_int(word) {
                    Some(n) => match not_a_word(word, n) {
                        Some(why) => return Err(format!("in the condition: {why}")),
                        None => (Token::Int(n), len),
                    },
                    // Locations, and registers with or without PTX's `%`.
                    None if c != '-' && is_register(word) => (Token::Word(word.to_string()), len),
                    None => {
                        return Err(format!(
                            "in the condition: `{word}` is neither a name nor an integer"
                        ))
                    }
                }
            }
            _ => return Err(format!("in the condition: unexpected `{c}`")),
        };
        out.push((line, token));
        i += len;
    }
    Ok(())
}

/// A scope word of a litmus file: `cta`, `gpu` or `sys` (clusters are not part of the tests'
/// dialect).
fn litmus_scope(word: &str) -> Option<Scope> {
    Scope::from_word(word).filter(|scope| *scope != Scope::Cluster)
}
