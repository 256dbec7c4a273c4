//! Suggested fences as source changes: statements inserted after given lines, and the unified
//! diff that makes the same change.
//!
//! Hardening ends with fences placed after particular source lines. A developer wants to see
//! them in context and apply them with ordinary tools, so this module renders them both as the
//! new file text ([`insert_after_lines`]) and as a unified diff ([`insertion_diff`]) that
//! `git apply` and `patch -p1` accept.
//!
//! The diff is computed from the insertion positions rather than by comparing two texts: the
//! only change ever made is adding lines, so the hunks follow directly from where they go, with
//! no longest-common-subsequence search and no risk of an ambiguous alignment. Both functions
//! share one plan of the change, so the diff applies to exactly the text the other returns.
//!
//! A fence "after a line" must end up, on every path the program can take from that line's
//! accesses, between them and the accesses that follow, as the PTX fence after each access is.
//! For a plain statement that is the next line. For a line that opens a block with a condition
//! (`if (...) {`, `} else if (...) {`, `while (...) {`, `for (...) {`) the condition's accesses
//! are followed either by the block or by what comes after it, so the statement goes in both
//! places: first in the block, and after the block (for a loop: after its closing brace, where
//! the last evaluation of the condition leads; for an `if`: first in each `else` part, or after
//! the closing brace when there is none). A `} while (...);` line goes after the line and first
//! in the `do` body. A statement that continues on later lines (unclosed parentheses) counts as
//! its last line. See [`fence_slots`].
//!
//! Line endings are kept: an inserted line ends like the line it follows, so CRLF files stay
//! CRLF. A file without a final newline keeps lacking one: inserting after its last line gives
//! that line a line ending and leaves the new last line (the statement) without one.

use thiserror::Error;

/// Lines of unchanged context around each insertion in a diff.
pub const CONTEXT: usize = 3;

const NO_NEWLINE: &str = "\\ No newline at end of file\n";

/// Where a statement goes, relative to a 1-based line of the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// After the line's accesses, on every path from them (see [`fence_slots`]); line 0 means
    /// before the first line, unindented (an `#include`).
    After(usize),
    /// Just before the line, indented like it.
    Before(usize),
}

impl Anchor {
    /// The line it is anchored at.
    pub fn line(self) -> usize {
        match self {
            Anchor::After(line) | Anchor::Before(line) => line,
        }
    }
}

/// Why fences cannot be inserted.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PatchError {
    /// A line number is 0 or past the end of the file.
    #[error("line {line} is out of range: the file has {lines} lines (numbered from 1)")]
    LineOutOfRange {
        /// The 1-based line asked for.
        line: usize,
        /// The lines in the file.
        lines: usize,
    },
    /// The statement would span several lines.
    #[error("the statement to insert must be one line, but it contains a line break")]
    StatementNotOneLine,
}

/// `text` with, after each of `lines` (1-based), a line holding `statement` indented like the
/// line it follows.
///
/// Lines are sorted and duplicates inserted once; a line that is 0 or past the end is an error.
pub fn insert_after_lines(
    text: &str,
    lines: &[usize],
    statement: &str,
) -> Result<String, PatchError> {
    let insertions: Vec<(Anchor, &str)> = (lines.iter())
        .map(|&l| (Anchor::After(l), statement))
        .collect();
    insert_statements(text, &insertions)
}

/// `text` with each `(anchor, statement)` inserted where its anchor says. Where two statements
/// go after the same line, the first given is kept.
pub fn insert_statements(text: &str, insertions: &[(Anchor, &str)]) -> Result<String, PatchError> {
    let plan = Plan::new(text, insertions)?;
    let mut out = String::with_capacity(text.len() + plan.after.len() * 96);
    if let Some(top) = plan.inserted_after(0) {
        out.push_str(top);
        out.push_str(plan.default_ending);
    }
    for (index, line) in plan.lines.iter().enumerate() {
        out.push_str(line.content);
        match plan.inserted_after(index + 1) {
            Some(inserted) => {
                out.push_str(plan.ending_before_insertion(line));
                out.push_str(inserted);
                out.push_str(line.ending);
            }
            None => out.push_str(line.ending),
        }
    }
    Ok(out)
}

/// A unified diff, for `path` (as `a/<path>` and `b/<path>`), from `old` to
/// [`insert_after_lines`]`(old, lines, statement)`.
///
/// Each insertion gets [`CONTEXT`] lines of context on each side; insertions whose context
/// overlaps or touches share a hunk. Returns an empty string when `lines` is empty.
pub fn insertion_diff(
    path: &str,
    old: &str,
    lines: &[usize],
    statement: &str,
) -> Result<String, PatchError> {
    let insertions: Vec<(Anchor, &str)> = (lines.iter())
        .map(|&l| (Anchor::After(l), statement))
        .collect();
    statements_diff(path, old, &insertions)
}

/// A unified diff, for `path`, from `old` to [`insert_statements`]`(old, insertions)`.
pub fn statements_diff(
    path: &str,
    old: &str,
    insertions: &[(Anchor, &str)],
) -> Result<String, PatchError> {
    let plan = Plan::new(old, insertions)?;
    if plan.after.is_empty() {
        return Ok(String::new());
    }
    let mut out = format!("--- a/{path}\n+++ b/{path}\n");
    for hunk in plan.hunks() {
        plan.write_hunk(&mut out, hunk);
    }
    Ok(out)
}

/// One line of a text: its content and its line ending (`""` only for a last line without one).
#[derive(Debug, Clone, Copy)]
struct Line<'a> {
    content: &'a str,
    ending: &'a str,
}

/// The lines of `text`; an empty text has none, and a final line ending starts no extra line.
fn split_lines(text: &str) -> Vec<Line<'_>> {
    text.split_inclusive('\n').map(split_ending).collect()
}

fn split_ending(piece: &str) -> Line<'_> {
    let content_len = if piece.ends_with("\r\n") {
        piece.len() - 2
    } else if piece.ends_with('\n') {
        piece.len() - 1
    } else {
        piece.len()
    };
    let (content, ending) = piece.split_at(content_len);
    Line { content, ending }
}

/// The leading spaces and tabs of `content`.
fn indentation(content: &str) -> &str {
    let rest = content.trim_start_matches([' ', '\t']);
    &content[..content.len() - rest.len()]
}

/// A place for an inserted line: after old line `after` (0: before the first), with `indent`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Slot {
    after: usize,
    indent: String,
}

/// The places a statement anchored at `anchor` goes (module doc): one for a plain line, one
/// per path out of a block header's condition.
fn fence_slots(lines: &[Line<'_>], anchor: Anchor) -> Vec<Slot> {
    let number = match anchor {
        Anchor::After(0) => return vec![slot(lines, 0, 0)],
        Anchor::Before(number) => return vec![slot(lines, number - 1, number)],
        Anchor::After(number) => number,
    };
    let first = number;
    let number = statement_end(lines, first);
    let text = lines[number - 1].content.trim();
    if let Some(header) = condition_header(text) {
        if let Some(close) = closing_line(lines, number) {
            return header_slots(lines, (first, number), close, header);
        }
    }
    if text.starts_with('}') && text.ends_with(';') && keyword_after_brace(text, "while") {
        if let Some(open) = opening_line(lines, number) {
            return vec![body_slot(lines, open, number), slot(lines, number, number)];
        }
    }
    vec![slot(lines, number, first)]
}

/// A slot after line `after`, indented like line `like` (none for 0).
fn slot(lines: &[Line<'_>], after: usize, like: usize) -> Slot {
    let indent = match like {
        0 => String::new(),
        _ => indentation(lines[like - 1].content).to_string(),
    };
    Slot { after, indent }
}

/// The line a statement starting on line `number` ends on: the first from it where the
/// parentheses opened since balance (at most 20 lines on; else `number`).
fn statement_end(lines: &[Line<'_>], number: usize) -> usize {
    let mut depth = 0i64;
    for (index, line) in lines.iter().enumerate().skip(number - 1).take(20) {
        depth += line.content.matches('(').count() as i64;
        depth -= line.content.matches(')').count() as i64;
        if depth <= 0 {
            return index + 1;
        }
    }
    number
}

/// The kinds of block header whose condition a site can be on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Header {
    If,
    Loop,
}

/// What block `text` (a trimmed line) opens with a condition, if it is such a header: it ends
/// with `{` and starts with `if`, `else if`, `} else if`, `while` or `for`.
fn condition_header(text: &str) -> Option<Header> {
    if !text.ends_with('{') {
        return None;
    }
    let rest = text.trim_start_matches('}').trim_start();
    let rest = match rest.strip_prefix("else") {
        Some(after) if starts_keyword(after.trim_start(), "if") => after.trim_start(),
        Some(_) => return None,
        None => rest,
    };
    if starts_keyword(rest, "if") {
        Some(Header::If)
    } else if starts_keyword(rest, "while") || starts_keyword(rest, "for") {
        Some(Header::Loop)
    } else {
        None
    }
}

/// Whether `text` starts with the keyword `word` (followed by a space or a parenthesis).
fn starts_keyword(text: &str, word: &str) -> bool {
    text.strip_prefix(word)
        .is_some_and(|rest| rest.starts_with([' ', '(', '\t']))
}

/// Whether `text` (starting with `}`) continues with the keyword `word`.
fn keyword_after_brace(text: &str, word: &str) -> bool {
    starts_keyword(text.trim_start_matches('}').trim_start(), word)
}

/// The slots after the condition of the block header on lines `first..=number` (the block
/// opens on `number`), whose block closes on line `close`: first in the block, then every way
/// past it.
fn header_slots(
    lines: &[Line<'_>],
    (first, number): (usize, usize),
    close: usize,
    header: Header,
) -> Vec<Slot> {
    if close == number {
        // A one-line block: the statement can only go after it.
        return vec![slot(lines, number, first)];
    }
    let mut slots = vec![body_slot(lines, number, close)];
    let mut close = close;
    // An `if` continued by `} else ... {` on its closing line: the else part is the other way.
    let mut chain = header == Header::If;
    while chain {
        let text = lines[close - 1].content.trim();
        let else_part = keyword_after_brace(text, "else") && text.ends_with('{');
        let Some(next) = else_part.then(|| closing_line(lines, close)).flatten() else {
            break;
        };
        slots.push(body_slot(lines, close, next));
        // A final `else` leaves no way past the chain without a fence.
        chain = condition_header(text).is_some();
        if !chain {
            return slots;
        }
        close = next;
    }
    slots.push(slot(lines, close, first));
    slots
}

/// The slot first in the block that line `open` opens and line `close` closes: after `open`,
/// indented like the block's first line, or one level deeper than `open` for an empty block.
fn body_slot(lines: &[Line<'_>], open: usize, close: usize) -> Slot {
    let first = ((open + 1)..close).find(|&n| !lines[n - 1].content.trim().is_empty());
    let indent = match first {
        Some(n) => indentation(lines[n - 1].content).to_string(),
        None => {
            let outer = indentation(lines[open - 1].content);
            let step = if outer.contains('\t') { "\t" } else { "    " };
            format!("{outer}{step}")
        }
    };
    Slot {
        after: open,
        indent,
    }
}

/// The line that closes the block opened by the last `{` of line `number` (braces counted
/// as characters, so braces in strings and comments count too), if any.
fn closing_line(lines: &[Line<'_>], number: usize) -> Option<usize> {
    let mut depth = 1i64;
    let own = lines[number - 1].content;
    let after_open = &own[own.rfind('{')? + 1..];
    let rest = std::iter::once((number, after_open));
    let later = (lines.iter().enumerate().skip(number)).map(|(i, l)| (i + 1, l.content));
    for (line, text) in rest.chain(later) {
        for c in text.chars() {
            depth += i64::from(c == '{') - i64::from(c == '}');
            if depth == 0 {
                return Some(line);
            }
        }
    }
    None
}

/// The line that opens the block closed by the first `}` of line `number`, if any.
fn opening_line(lines: &[Line<'_>], number: usize) -> Option<usize> {
    let mut depth = 1i64;
    for index in (0..number - 1).rev() {
        for c in lines[index].content.chars().rev() {
            depth += i64::from(c == '}') - i64::from(c == '{');
            if depth == 0 {
                return Some(index + 1);
            }
        }
    }
    None
}

/// Old lines `first..=last` (1-based) shown in one hunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hunk {
    first: usize,
    last: usize,
}

/// A validated insertion: the old lines, where statements go, and the statement.
struct Plan<'a> {
    lines: Vec<Line<'a>>,
    /// 1-based old lines followed by an insertion, sorted, without duplicates.
    after: Vec<usize>,
    /// The line (indented statement) inserted after each of `after`.
    inserted: Vec<String>,
    /// The ending given to a last line that had none: the file's first line ending, else `\n`.
    default_ending: &'a str,
}

impl<'a> Plan<'a> {
    fn new(text: &'a str, insertions: &[(Anchor, &'a str)]) -> Result<Plan<'a>, PatchError> {
        if insertions.iter().any(|(_, s)| s.contains(['\n', '\r'])) {
            return Err(PatchError::StatementNotOneLine);
        }
        let lines = split_lines(text);
        let out_of_range = |anchor: Anchor| match anchor {
            Anchor::After(l) => l > lines.len() || (l == 0 && lines.is_empty()),
            Anchor::Before(l) => l > lines.len() || l == 0,
        };
        if let Some(&(anchor, _)) = insertions.iter().find(|&&(a, _)| out_of_range(a)) {
            let (line, lines) = (anchor.line(), lines.len());
            return Err(PatchError::LineOutOfRange { line, lines });
        }
        let mut placed: Vec<(usize, usize, String, &'a str)> = Vec::new();
        for (order, &(anchor, statement)) in insertions.iter().enumerate() {
            for slot in fence_slots(&lines, anchor) {
                placed.push((slot.after, order, slot.indent, statement));
            }
        }
        placed.sort_unstable();
        placed.dedup_by_key(|p| p.0);
        let after = placed.iter().map(|p| p.0).collect();
        let inserted = placed.into_iter().map(|p| format!("{}{}", p.2, p.3));
        let default_ending = lines
            .iter()
            .map(|line| line.ending)
            .find(|ending| !ending.is_empty())
            .unwrap_or("\n");
        Ok(Plan {
            lines,
            after,
            inserted: inserted.collect(),
            default_ending,
        })
    }

    /// The line inserted after old line `number` (0: before the first), without its ending, if
    /// there is one.
    fn inserted_after(&self, number: usize) -> Option<&str> {
        let i = self.after.binary_search(&number).ok()?;
        Some(&self.inserted[i])
    }

    /// The ending `line` gets when a line is inserted after it.
    fn ending_before_insertion(&self, line: &Line<'a>) -> &'a str {
        if line.ending.is_empty() {
            self.default_ending
        } else {
            line.ending
        }
    }

    /// The old lines around each insertion, merged where they overlap or touch.
    fn hunks(&self) -> Vec<Hunk> {
        let mut hunks: Vec<Hunk> = Vec::new();
        for &after in &self.after {
            let hunk = Hunk {
                first: (after + 1).saturating_sub(CONTEXT).max(1),
                last: (after + CONTEXT).min(self.lines.len()),
            };
            match hunks.last_mut() {
                Some(previous) if hunk.first <= previous.last + 1 => previous.last = hunk.last,
                _ => hunks.push(hunk),
            }
        }
        hunks
    }

    fn write_hunk(&self, out: &mut String, hunk: Hunk) {
        let old_count = hunk.last - hunk.first + 1;
        // An insertion before the first line (after line 0) belongs to the hunk that shows it.
        let lowest = if hunk.first == 1 { 0 } else { hunk.first };
        let before = self.after.partition_point(|&a| a < lowest);
        let within = self.after.partition_point(|&a| a <= hunk.last) - before;
        let new_first = hunk.first + before;
        let new_count = old_count + within;
        let header = format!(
            "@@ -{},{old_count} +{new_first},{new_count} @@\n",
            hunk.first
        );
        out.push_str(&header);
        if hunk.first == 1 {
            if let Some(top) = self.inserted_after(0) {
                push_diff_line(out, '+', top, self.default_ending);
            }
        }
        for number in hunk.first..=hunk.last {
            self.write_line(out, number);
        }
    }

    /// Old line `number` as diff lines, followed by its insertion if it has one.
    fn write_line(&self, out: &mut String, number: usize) {
        let line = self.lines[number - 1];
        let Some(inserted) = self.inserted_after(number) else {
            return push_diff_line(out, ' ', line.content, line.ending);
        };
        if line.ending.is_empty() {
            // The last line gains a line ending, so in diff terms it changes.
            push_diff_line(out, '-', line.content, "");
            push_diff_line(out, '+', line.content, self.default_ending);
        } else {
            push_diff_line(out, ' ', line.content, line.ending);
        }
        push_diff_line(out, '+', inserted, line.ending);
    }
}

/// `marker`, `content` and `ending`; a missing ending is marked as diff tools expect.
fn push_diff_line(out: &mut String, marker: char, content: &str, ending: &str) {
    out.push(marker);
    out.push_str(content);
    if ending.is_empty() {
        out.push('\n');
        out.push_str(NO_NEWLINE);
    } else {
        out.push_str(ending);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::process::Command;

    const FENCE: &str = "__threadfence();";

    /// Lines `1..=n`, each `lineK` indented by K % 3 spaces, each ending with `\n`.
    fn numbered(n: usize) -> String {
        (1..=n)
            .map(|k| format!("{}line{k}\n", " ".repeat(k % 3)))
            .collect()
    }

    fn diff(old: &str, lines: &[usize]) -> String {
        insertion_diff("apps/k.cu", old, lines, FENCE).unwrap()
    }

    #[test]
    fn inserts_with_indentation() {
        let old = "a {\n    x = 1;\n\tflag = 1;\n}\n";
        let new = insert_after_lines(old, &[2, 3], FENCE).unwrap();
        let expected =
            "a {\n    x = 1;\n    __threadfence();\n\tflag = 1;\n\t__threadfence();\n}\n";
        assert_eq!(new, expected);
    }

    #[test]
    fn a_site_on_a_loop_header_goes_first_in_the_body_and_after_the_loop() {
        let text = "if (t == 0) {\n    while (atomicCAS(l, 0, 1) != 0) {\n        // spin\n    }\n    x = 1;\n}\n";
        let out = insert_after_lines(text, &[2], "F;").unwrap();
        assert_eq!(
            out,
            "if (t == 0) {\n    while (atomicCAS(l, 0, 1) != 0) {\n        F;\n        // spin\n    }\n    F;\n    x = 1;\n}\n"
        );
        let one_line = "while (atomicCAS(l, 0, 1) != 0) { }\nx = 1;\n";
        assert_eq!(
            insert_after_lines(one_line, &[1], "F;").unwrap(),
            "while (atomicCAS(l, 0, 1) != 0) { }\nF;\nx = 1;\n"
        );
    }

    /// Regression (tpo-tm's `if (h < tail[q]) {`): a site on an `if` line was fenced inside the
    /// `if` body only, so when the condition was false nothing ordered its load against what
    /// follows the `if`. The fence goes on both ways out of the condition.
    #[test]
    fn fence_on_an_if_condition_line_goes_on_every_path_out_of_the_condition() {
        let text = "    if (h < tail[q]) {\n        task = items[h];\n        head[q] = h + 1;\n    }\n    atomicExch(&lock[q], 0u);\n";
        let expected = "    if (h < tail[q]) {\n        F;\n        task = items[h];\n        head[q] = h + 1;\n    }\n    F;\n    atomicExch(&lock[q], 0u);\n";
        assert_eq!(insert_after_lines(text, &[1], "F;").unwrap(), expected);
        // With else parts, the fence goes first in each of them instead of after the `if`.
        let chain = "if (a[0]) {\n  x = 1;\n} else if (b) {\n  y = 1;\n} else {\n}\nz = 1;\n";
        assert_eq!(
            insert_after_lines(chain, &[1], "F;").unwrap(),
            "if (a[0]) {\n  F;\n  x = 1;\n} else if (b) {\n  F;\n  y = 1;\n} else {\n    F;\n}\nz = 1;\n"
        );
        let no_else = "if (a[0]) {\n  x = 1;\n} else if (b) {\n  y = 1;\n}\nz = 1;\n";
        assert_eq!(
            insert_after_lines(no_else, &[3], "F;").unwrap(),
            "if (a[0]) {\n  x = 1;\n} else if (b) {\n  F;\n  y = 1;\n}\nF;\nz = 1;\n"
        );
    }

    #[test]
    fn a_do_while_condition_is_fenced_after_it_and_first_in_the_body() {
        let text = "do {\n  v = 1;\n} while (flag[0] == 0);\nx = 1;\n";
        assert_eq!(
            insert_after_lines(text, &[3], "F;").unwrap(),
            "do {\n  F;\n  v = 1;\n} while (flag[0] == 0);\nF;\nx = 1;\n"
        );
    }

    #[test]
    fn a_statement_over_several_lines_is_fenced_after_its_last() {
        let text = "  int v = f(a[0],\n            b[1]);\n  x = v;\n";
        assert_eq!(
            insert_after_lines(text, &[1], "F;").unwrap(),
            "  int v = f(a[0],\n            b[1]);\n  F;\n  x = v;\n"
        );
    }

    #[test]
    fn before_goes_just_before_its_line_indented_like_it() {
        let text = "{\n    call(p);\n}\n";
        let insertions = [(Anchor::Before(2), "F;"), (Anchor::After(2), "G;")];
        assert_eq!(
            insert_statements(text, &insertions).unwrap(),
            "{\n    F;\n    call(p);\n    G;\n}\n"
        );
        assert_eq!(
            insert_statements(text, &[(Anchor::Before(0), "F;")]),
            Err(PatchError::LineOutOfRange { line: 0, lines: 3 })
        );
    }

    #[test]
    fn line_0_inserts_before_the_first_line_unindented() {
        let text = "  a\r\nb\r\n";
        let insertions = [(Anchor::After(0), "#include <x>"), (Anchor::After(1), "f;")];
        assert_eq!(
            insert_statements(text, &insertions).unwrap(),
            "#include <x>\r\n  a\r\n  f;\r\nb\r\n"
        );
        let diff = statements_diff(
            "k.cu",
            "a\nb\nc\nd\ne\n",
            &[(Anchor::After(0), "#include <x>")],
        )
        .unwrap();
        assert_eq!(
            diff,
            "--- a/k.cu\n+++ b/k.cu\n@@ -1,3 +1,4 @@\n+#include <x>\n a\n b\n c\n"
        );
    }

    #[test]
    fn duplicate_and_unsorted_lines_insert_once() {
        let old = "a\nb\nc\n";
        let new = insert_after_lines(old, &[3, 1, 3, 1], "f;").unwrap();
        assert_eq!(new, "a\nf;\nb\nc\nf;\n");
    }

    #[test]
    fn no_lines_changes_nothing() {
        assert_eq!(insert_after_lines("a\nb", &[], FENCE).unwrap(), "a\nb");
        assert_eq!(diff("a\nb", &[]), "");
    }

    #[test]
    fn out_of_range_lines_are_errors() {
        let err = PatchError::LineOutOfRange { line: 4, lines: 3 };
        assert_eq!(
            insert_after_lines("a\nb\nc\n", &[1, 4], FENCE),
            Err(err.clone())
        );
        assert_eq!(insertion_diff("p", "a\nb\nc", &[4], FENCE), Err(err));
        let zero = PatchError::LineOutOfRange { line: 0, lines: 0 };
        assert_eq!(insert_after_lines("", &[0], FENCE), Err(zero));
        let empty = PatchError::LineOutOfRange { line: 1, lines: 0 };
        assert_eq!(insert_after_lines("", &[1], FENCE), Err(empty));
    }

    #[test]
    fn multiline_statements_are_errors() {
        let err = Err(PatchError::StatementNotOneLine);
        assert_eq!(insert_after_lines("a\n", &[1], "f;\ng;"), err);
        assert_eq!(insert_after_lines("a\n", &[1], "f;\r"), err);
    }

    #[test]
    fn keeps_crlf() {
        let new = insert_after_lines("  a\r\nb\r\n", &[1], "f;").unwrap();
        assert_eq!(new, "  a\r\n  f;\r\nb\r\n");
    }

    #[test]
    fn missing_final_newline_stays_missing() {
        assert_eq!(
            insert_after_lines("a\n b", &[2], "f;").unwrap(),
            "a\n b\n f;"
        );
        assert_eq!(
            insert_after_lines("a\n b", &[1], "f;").unwrap(),
            "a\nf;\n b"
        );
        assert_eq!(
            insert_after_lines("a\r\nb", &[2], "f;").unwrap(),
            "a\r\nb\r\nf;"
        );
        assert_eq!(insert_after_lines("a", &[1], "f;").unwrap(), "a\nf;");
    }

    #[test]
    fn diff_one_insertion_in_the_middle() {
        let expected = "\
--- a/apps/k.cu
+++ b/apps/k.cu
@@ -3,6 +3,7 @@
 line3
 \x20line4
 \x20\x20line5
+  __threadfence();
 line6
 \x20line7
 \x20\x20line8
";
        assert_eq!(diff(&numbered(10), &[5]), expected);
    }

    #[test]
    fn diff_two_far_insertions_make_two_hunks() {
        let expected = "\
--- a/apps/k.cu
+++ b/apps/k.cu
@@ -1,6 +1,7 @@
 \x20line1
 \x20\x20line2
 line3
+__threadfence();
 \x20line4
 \x20\x20line5
 line6
@@ -8,6 +9,7 @@
 \x20\x20line8
 line9
 \x20line10
+ __threadfence();
 \x20\x20line11
 line12
 \x20line13
";
        assert_eq!(diff(&numbered(20), &[3, 10]), expected);
    }

    #[test]
    fn diff_two_close_insertions_share_a_hunk() {
        // After lines 3 and 9: the contexts (1..=6 and 7..=12) touch, so one hunk.
        let merged = diff(&numbered(20), &[3, 9]);
        assert_eq!(merged.matches("@@ -").count(), 1);
        assert!(merged.contains("@@ -1,12 +1,14 @@\n"));
        // After lines 3 and 10: 1..=6 and 8..=13 leave line 7 out, so two hunks.
        assert_eq!(diff(&numbered(20), &[3, 10]).matches("@@ -").count(), 2);
    }

    #[test]
    fn diff_close_insertions_exact() {
        let expected = "\
--- a/apps/k.cu
+++ b/apps/k.cu
@@ -2,7 +2,9 @@
 \x20\x20line2
 line3
 \x20line4
+ __threadfence();
 \x20\x20line5
+  __threadfence();
 line6
 \x20line7
 \x20\x20line8
";
        assert_eq!(diff(&numbered(12), &[4, 5]), expected);
    }

    #[test]
    fn diff_after_first_and_last_lines() {
        let expected = "\
--- a/apps/k.cu
+++ b/apps/k.cu
@@ -1,4 +1,5 @@
 \x20line1
+ __threadfence();
 \x20\x20line2
 line3
 \x20line4
@@ -6,3 +7,4 @@
 line6
 \x20line7
 \x20\x20line8
+  __threadfence();
";
        assert_eq!(diff(&numbered(8), &[1, 8]), expected);
    }

    #[test]
    fn diff_without_final_newline_context() {
        let expected = "\
--- a/apps/k.cu
+++ b/apps/k.cu
@@ -1,3 +1,4 @@
 a
+__threadfence();
 b
 c
\\ No newline at end of file
";
        assert_eq!(diff("a\nb\nc", &[1]), expected);
    }

    #[test]
    fn diff_after_last_line_without_final_newline() {
        let expected = "\
--- a/apps/k.cu
+++ b/apps/k.cu
@@ -1,2 +1,3 @@
 a
-\tb
\\ No newline at end of file
+\tb
+\t__threadfence();
\\ No newline at end of file
";
        assert_eq!(diff("a\n\tb", &[2]), expected);
    }

    #[test]
    fn diff_keeps_crlf() {
        let expected =
            "--- a/apps/k.cu\n+++ b/apps/k.cu\n@@ -1,2 +1,3 @@\n a\r\n+__threadfence();\r\n b\r\n";
        assert_eq!(diff("a\r\nb\r\n", &[1]), expected);
    }

    /// Cases for the tool checks: (old text, lines).
    fn cases() -> Vec<(String, Vec<usize>)> {
        vec![
            (numbered(10), vec![5]),
            (numbered(20), vec![3, 10]),
            (numbered(20), vec![3, 9]),
            (numbered(8), vec![1, 8]),
            (numbered(1), vec![1]),
            ("a\nb\nc".into(), vec![1]),
            ("a\n\tb".into(), vec![1, 2]),
            ("x".into(), vec![1]),
            (
                "  a\r\nb\r\n\tc\r\nd\r\ne\r\nf\r\ng\r\nh\r\n".into(),
                vec![1, 3, 8],
            ),
            ("a\r\nb\r\nc".into(), vec![3]),
            (numbered(12), vec![0, 2, 9]),
            ("x".into(), vec![0, 1]),
        ]
    }

    fn tool_available(tool: &str) -> bool {
        let found = Command::new(tool).arg("--version").output().is_ok();
        if !found {
            println!("note: `{tool}` is not on PATH; skipping the check that it applies the diff");
        }
        found
    }

    /// Writes `old` at `apps/k.cu` and its diff at `fence.diff`, runs `commands` in that
    /// directory, and checks that the file then equals `insert_after_lines`'s output.
    fn check_applies(old: &str, lines: &[usize], commands: &[&[&str]]) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("apps/k.cu");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, old).unwrap();
        std::fs::write(dir.path().join("fence.diff"), diff(old, lines)).unwrap();
        for command in commands {
            run(dir.path(), command);
        }
        let expected = insert_after_lines(old, lines, FENCE).unwrap();
        let actual = std::fs::read_to_string(&file).unwrap();
        assert_eq!(actual, expected, "{commands:?} on {old:?} after {lines:?}");
    }

    fn run(dir: &Path, command: &[&str]) {
        let output = Command::new(command[0])
            .args(&command[1..])
            .current_dir(dir)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{command:?} failed: {stderr}");
    }

    #[test]
    fn git_apply_accepts_the_diff() {
        if !tool_available("git") {
            return;
        }
        for (old, lines) in cases() {
            let check: &[&str] = &["git", "apply", "--check", "fence.diff"];
            check_applies(&old, &lines, &[check, &["git", "apply", "fence.diff"]]);
        }
    }

    #[test]
    fn patch_accepts_the_diff() {
        if !tool_available("patch") {
            return;
        }
        for (old, lines) in cases() {
            check_applies(&old, &lines, &[&["patch", "-p1", "-s", "-i", "fence.diff"]]);
        }
    }
}
