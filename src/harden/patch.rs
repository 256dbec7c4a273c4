//! Suggested fences as source changes: statements placed after given lines of a CUDA source,
//! and the unified diff that makes the same change.
//!
//! Hardening ends with fences placed after particular source lines. A developer wants to see
//! them in context and apply them with ordinary tools, so this module renders them both as the
//! new file text ([`insert_statements`]) and as a unified diff ([`statements_diff`]) that
//! `git apply` and `patch -p1` accept. Both share one plan of the change, so the diff applies
//! to exactly the text the other returns. The diff is computed from the changed lines rather
//! than by comparing two texts: lines are only added or edited in place, so the hunks follow
//! directly from where the changes are, with no longest-common-subsequence search.
//!
//! A fence "after a line" must end up, on every path the program can take from that line's
//! accesses, between them and the accesses that follow, as the PTX fence after each run of the
//! line's accesses is (`gpuwmm_ptx::passes::fences`: never between two accesses of one
//! expression, where no statement can go).
//! Lines do not say where that is, so the placement works from the statements the line holds
//! ([`super::statements`]); each that can hold an access gets the fence on every way out of it:
//! - a simple statement (an expression, a declaration): after it, on its own line when the
//!   statement ends its line, else on the line just after its `;`, so that of two statements on
//!   one line (`data[0] = 1; flag[0] = 1;`) the first is fenced before the second runs;
//! - the condition of an `if`: first in the `then` part, and first in the `else` part, or after
//!   the `if` when it has none; an `else if` gets it at the start of its condition
//!   (`else if (__threadfence(), c)`), before that condition's own accesses;
//! - the condition of a `while` or `for`, of a `do … while`: first in the body and after the
//!   loop;
//! - `return E;`: the value is computed first and the fence goes between it and the return
//!   (`{ auto gpuwmm_value = E; fence; return gpuwmm_value; }`, or `{ E; fence; return; }` in a
//!   `void` function); a function that returns a reference cannot be rewritten so, and the fence
//!   is left out with a note saying why.
//!
//! A body without braces (`if (c) x = y;`, `else x = y;`, `while (c) x = y;`) that gets a fence
//! is put in braces with the fence inside, so that the fence neither leaves the body nor takes
//! its place. A fence after a statement that ends a branch of an `if` is left out when the
//! fence after that `if` follows it anyway. A line with no such statement (a line of braces
//! alone, code inside a lambda, a `switch` condition) gets no fence, and the note says so: the
//! patch never guesses. "Before a line" ([`Anchor::Before`]) puts the fence before the first
//! statement that starts on it.
//!
//! Line endings are kept: an inserted line ends like the line it follows, so CRLF files stay
//! CRLF. A file without a final newline keeps lacking one: inserting after its last line gives
//! that line a line ending and leaves the new last line (the statement) without one.

use super::statements::{NodeKind, Part, Returns, Statements};
use std::collections::BTreeMap;
use thiserror::Error;

/// Lines of unchanged context around each change in a diff.
pub const CONTEXT: usize = 3;

const NO_NEWLINE: &str = "\\ No newline at end of file\n";

/// The variable a `return` statement's value is kept in while the fence runs.
const RETURN_VALUE: &str = "gpuwmm_value";

/// Where a statement goes, relative to a 1-based line of the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// After the line's accesses, on every path from them (module doc).
    After(usize),
    /// Just before the first statement that starts on the line.
    Before(usize),
    /// A line of its own right after the line, unindented, whatever the line holds (an
    /// `#include`); line 0 means before the first line.
    Own(usize),
}

impl Anchor {
    /// The line it is anchored at.
    pub fn line(self) -> usize {
        match self {
            Anchor::After(line) | Anchor::Before(line) | Anchor::Own(line) => line,
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

/// A placed change: the diff, and per insertion asked for, whether the patch holds it and
/// notes on where it went when that is not simply on a line of its own after the line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Placed {
    pub diff: String,
    /// The text with the statements in (the old text when none is placed).
    pub text: String,
    /// The 1-based lines of `text` that the statements changed or were inserted as.
    pub changed_lines: Vec<usize>,
    /// Per insertion, in the order given: false when no statement of it is in the patch.
    pub in_patch: Vec<bool>,
    /// Per insertion: how its statement was placed, or why (part of) it was left out.
    pub notes: Vec<Vec<String>>,
}

/// `text` with, after each of `lines` (1-based), a line holding `statement` indented like the
/// line it follows: just after the line, whatever the line holds (see [`insert_statements`] for
/// fences placed by the statements).
///
/// Lines are sorted and duplicates inserted once; line 0 means before the first line
/// (unindented), and a line past the end is an error.
pub fn insert_after_lines(
    text: &str,
    lines: &[usize],
    statement: &str,
) -> Result<String, PatchError> {
    Ok(Plan::after_lines(text, lines, statement)?.text())
}

/// A unified diff, for `path` (as `a/<path>` and `b/<path>`), from `old` to
/// [`insert_after_lines`]`(old, lines, statement)`.
///
/// Each change gets [`CONTEXT`] lines of context on each side; changes whose context overlaps
/// or touches share a hunk. Returns an empty string when `lines` is empty.
pub fn insertion_diff(
    path: &str,
    old: &str,
    lines: &[usize],
    statement: &str,
) -> Result<String, PatchError> {
    Ok(Plan::after_lines(old, lines, statement)?.diff(path))
}

/// `text` with each `(anchor, statement)` placed where its anchor says (module doc). Where two
/// statements go to the same place, the first given is kept.
pub fn insert_statements(text: &str, insertions: &[(Anchor, &str)]) -> Result<String, PatchError> {
    Ok(Plan::placed(text, insertions)?.0.text())
}

/// A unified diff, for `path`, from `old` to [`insert_statements`]`(old, insertions)`.
pub fn statements_diff(
    path: &str,
    old: &str,
    insertions: &[(Anchor, &str)],
) -> Result<String, PatchError> {
    Ok(place_statements(path, old, insertions)?.diff)
}

/// [`statements_diff`] with, per insertion, whether it is in the patch and how it was placed.
pub fn place_statements(
    path: &str,
    old: &str,
    insertions: &[(Anchor, &str)],
) -> Result<Placed, PatchError> {
    let (plan, placed) = Plan::placed(old, insertions)?;
    Ok(Placed {
        diff: plan.diff(path),
        text: plan.text(),
        changed_lines: plan.changed_lines(),
        ..placed
    })
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

/// Checks the statements and the anchors' lines.
fn validate(lines: &[Line<'_>], insertions: &[(Anchor, &str)]) -> Result<(), PatchError> {
    if insertions.iter().any(|(_, s)| s.contains(['\n', '\r'])) {
        return Err(PatchError::StatementNotOneLine);
    }
    let out_of_range = |anchor: Anchor| match anchor {
        Anchor::After(l) => l > lines.len() || l == 0,
        Anchor::Own(l) => l > lines.len() || (l == 0 && lines.is_empty()),
        Anchor::Before(l) => l > lines.len() || l == 0,
    };
    match insertions.iter().find(|&&(a, _)| out_of_range(a)) {
        Some(&(anchor, _)) => Err(PatchError::LineOutOfRange {
            line: anchor.line(),
            lines: lines.len(),
        }),
        None => Ok(()),
    }
}

/// A place a fence goes, in terms of statements (node ids of [`Statements`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Point {
    /// Before the statement (in braces with it when it is a body without them).
    Before(usize),
    /// After the statement (likewise).
    After(usize),
    /// First in the statement, a body: after its `{`, or in braces before it.
    FirstIn(usize),
    /// Between computing a `return`'s value and returning it.
    ReturnValue(usize),
    /// At the start of an `if`'s condition (an `else if`).
    IntoCondition(usize),
}

/// Where the fence after the accesses of `line` goes, and notes on what cannot be placed.
fn points_after(st: &Statements<'_>, line: usize) -> (Vec<Point>, Vec<String>) {
    let mut points = Vec::new();
    let mut notes = Vec::new();
    let parts = st.parts_on_line(line);
    if parts.is_empty() {
        notes.push(format!(
            "line {line} holds no statement of its own that the patch can place a fence after \
             (braces alone, code inside a lambda or a macro): left out of the patch"
        ));
    }
    for &(id, part) in &parts {
        let node = &st.nodes[id];
        match (&node.kind, part) {
            (NodeKind::Return { .. }, _) => match node.returns {
                Some(Returns::Value | Returns::Void) => points.push(Point::ReturnValue(id)),
                _ => notes.push(format!(
                    "the access on line {line} is in the value of a `return` from a function \
                     that returns a reference, which cannot be kept in a variable without \
                     changing what is returned: no fence after it in the patch (fence the \
                     caller's use of the reference instead)"
                )),
            },
            (
                NodeKind::If {
                    then, otherwise, ..
                },
                Part::Condition,
            ) => {
                points.push(Point::FirstIn(*then));
                points.push(match otherwise {
                    Some(e)
                        if matches!(st.nodes[*e].kind, NodeKind::If { .. })
                            && !st.condition_declares(*e) =>
                    {
                        Point::IntoCondition(*e)
                    }
                    Some(e) => Point::FirstIn(*e),
                    None => Point::After(id),
                });
            }
            (NodeKind::Loop { body, .. } | NodeKind::Do { body, .. }, Part::Condition) => {
                points.push(Point::FirstIn(*body));
                points.push(Point::After(id));
            }
            (NodeKind::Switch { .. }, _) => notes.push(format!(
                "the access on line {line} is in a `switch` condition, which leads to its cases: \
                 no fence after it in the patch (compute the value into a variable first)"
            )),
            _ => points.push(Point::After(id)),
        }
    }
    // After a one-statement branch of an `if` comes what comes after the `if`: the fence goes
    // there (which also fences the other branch) rather than into braces around the branch.
    for point in &mut points {
        if let Point::After(id) = point {
            *id = st.lifted_out_of_branches(*id);
        }
    }
    points.dedup();
    // After a statement that ends a branch of an `if` comes what comes after the `if`.
    let covered = |id: usize| {
        let mut up = st.branch_end_of(id);
        while let Some(i) = up {
            if points.contains(&Point::After(i)) {
                return true;
            }
            up = st.branch_end_of(i);
        }
        false
    };
    let kept: Vec<Point> = (points.iter().copied())
        .filter(|p| !matches!(p, Point::After(id) if covered(*id)))
        .collect();
    (kept, notes)
}

/// Notes on the shapes `points` are placed in that differ from a line after the line.
fn shape_notes(st: &Statements<'_>, points: &[Point]) -> Vec<String> {
    let mut notes = Vec::new();
    for &point in points {
        let note = match point {
            Point::ReturnValue(id) => format!(
                "the access on line {} is in the value of a `return`: the value is computed \
                 first, then the fence runs, then the function returns it",
                st.line_of(id)
            ),
            Point::IntoCondition(id) => format!(
                "the `else if` on line {} gets the fence at the start of its condition, before \
                 that condition's accesses",
                st.line_of(id)
            ),
            Point::After(id) | Point::Before(id) | Point::FirstIn(id)
                if st.is_unbraced_body(id) =>
            {
                format!(
                    "the one-statement body `{}…` on line {} is put in braces with the fence \
                     inside",
                    st.keyword(id),
                    st.line_of(id)
                )
            }
            Point::After(id) => match st.next_on_line(id) {
                None => continue,
                Some("}") => format!(
                    "the fence goes on line {} itself, between the statement and the `}}` after it",
                    st.line_of(id)
                ),
                Some(_) => format!(
                    "line {} holds more than one statement: the fence goes just after each that \
                     can hold an access, on the line",
                    st.line_of(id)
                ),
            },
            _ => continue,
        };
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
    notes
}

/// Which side of a statement a fence is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Side {
    /// Before its first token.
    Open,
    /// After its last token.
    Close,
    /// Just after a block's `{`.
    Inner,
}

/// What is inserted at an offset of the text.
#[derive(Debug, Clone, PartialEq, Eq)]
enum What {
    /// A fence statement; `node` is the statement it is placed by.
    Fence {
        statement: String,
        side: Side,
        node: usize,
    },
    /// Other text: braces, a `return`'s rewrite.
    Text(String),
    /// Text that replaces the text up to `end`.
    Replace { end: usize, text: String },
}

/// An insertion at a byte offset; at one offset, closings come before openings, inner
/// closings before outer ones, outer openings before inner ones.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Event {
    offset: usize,
    phase: u8,
    rank: i64,
    seq: u8,
    order: usize,
    what: What,
}

impl Event {
    fn key(&self) -> (usize, u8, i64, u8, usize) {
        (self.offset, self.phase, self.rank, self.seq, self.order)
    }

    fn is_fence(&self, side: Side) -> bool {
        matches!(self.what, What::Fence { side: s, .. } if s == side)
    }
}

/// The fences each statement gets, with the order of the insertion that asked for each.
#[derive(Debug, Clone, Default)]
struct NodeFences<'s> {
    before: Vec<(usize, &'s str)>,
    after: Vec<(usize, &'s str)>,
    inner: Vec<(usize, &'s str)>,
    value: Option<(usize, &'s str)>,
    condition: Option<(usize, &'s str)>,
}

/// The events that place `fences` on the statements of `st`, in order.
fn events(st: &Statements<'_>, fences: &[NodeFences<'_>]) -> Vec<Event> {
    let mut out: Vec<Event> = (fences.iter().enumerate())
        .flat_map(|(id, f)| node_events(st, id, f))
        .collect();
    out.sort_by_key(Event::key);
    out
}

/// The events of the fences of statement `id`: braces around it when it is a body without
/// them that gets a fence before or after it (or a `return` rewritten), the fences, the
/// `return` rewrite and the `else if` condition's fence.
fn node_events(st: &Statements<'_>, id: usize, f: &NodeFences<'_>) -> Vec<Event> {
    let node = &st.nodes[id];
    let (first, last) = (&st.tokens[node.first], &st.tokens[node.last]);
    let depth = node.depth as i64;
    let at = |offset, phase, rank, seq, order, what| Event {
        offset,
        phase,
        rank,
        seq,
        order,
        what,
    };
    let open = |seq, order, what| at(first.start, 1, depth, seq, order, what);
    let close = |seq, order, what| at(last.end, 0, -depth, seq, order, what);
    let fence = |statement: &str, side| What::Fence {
        statement: statement.to_string(),
        side,
        node: id,
    };
    let mut out = Vec::new();
    let braces = f.value.is_some()
        || (st.is_unbraced_body(id) && !(f.before.is_empty() && f.after.is_empty()));
    if braces {
        out.push(open(0, 0, What::Text("{ ".into())));
        out.push(close(2, 0, What::Text(" }".into())));
    }
    out.extend(
        f.before
            .iter()
            .map(|&(o, s)| open(1, o, fence(s, Side::Open))),
    );
    out.extend(
        f.after
            .iter()
            .map(|&(o, s)| close(1, o, fence(s, Side::Close))),
    );
    let inner = |&(o, s): &(usize, &str)| at(first.end, 1, depth, 1, o, fence(s, Side::Inner));
    out.extend(f.inner.iter().map(inner));
    if let (Some((order, s)), NodeKind::Return { value }) = (f.value, &node.kind) {
        let (keep, give) = return_rewrite(st, id, *value, s);
        out.push(open(2, order, keep));
        out.push(close(0, order, give));
    }
    if let (Some((order, s)), NodeKind::If { close, .. }) = (f.condition, &node.kind) {
        let paren = &st.tokens[st_open_paren(st, *close)];
        let expression = s.trim_end().trim_end_matches(';');
        let text = What::Text(format!("{expression}, "));
        out.push(at(paren.end, 1, depth, 0, order, text));
    }
    out
}

/// How `return E;` (statement `id`, `E` from token `value`) becomes `{ auto v = E; fence;
/// return v; }` (`{ E; fence; return; }` in a `void` function): what replaces `return` (and
/// the space after it on its line), and what follows the `;` (the braces come from the caller).
fn return_rewrite(st: &Statements<'_>, id: usize, value: usize, fence: &str) -> (What, What) {
    let node = &st.nodes[id];
    let (keyword, value) = (&st.tokens[node.first], &st.tokens[value]);
    let end = match value.line == keyword.line {
        true => value.start,
        false => keyword.end,
    };
    let (keep, give) = match node.returns {
        Some(Returns::Void) => (String::new(), "return;".to_string()),
        _ => (
            format!("auto {RETURN_VALUE} = "),
            format!("return {RETURN_VALUE};"),
        ),
    };
    let replace = What::Replace { end, text: keep };
    (replace, What::Text(format!(" {fence} {give}")))
}

/// The `(` that pairs with the `)` at token `close` (the nearest unbalanced one before it).
fn st_open_paren(st: &Statements<'_>, close: usize) -> usize {
    let mut depth = 0i64;
    for i in (0..close).rev() {
        match st.tokens[i].text {
            ")" => depth += 1,
            "(" if depth == 0 => return i,
            "(" => depth -= 1,
            _ => {}
        }
    }
    close
}

/// A placement in progress: the fences per statement and the notes per insertion.
struct Placing<'s, 't> {
    st: &'s Statements<'t>,
    fences: Vec<NodeFences<'s>>,
    in_patch: Vec<bool>,
    notes: Vec<Vec<String>>,
}

impl<'s, 't> Placing<'s, 't> {
    /// Records the fence of insertion `order` at `point`.
    fn add(&mut self, order: usize, point: Point, statement: &'s str) {
        let entry = (order, statement);
        let is_block = |id: usize| matches!(self.st.nodes[id].kind, NodeKind::Block { .. });
        match point {
            Point::Before(id) => self.fences[id].before.push(entry),
            Point::After(id) => self.fences[id].after.push(entry),
            Point::FirstIn(id) if is_block(id) => self.fences[id].inner.push(entry),
            Point::FirstIn(id) => self.fences[id].before.push(entry),
            Point::ReturnValue(id) => {
                self.fences[id].value.get_or_insert(entry);
            }
            Point::IntoCondition(id) => {
                self.fences[id].condition.get_or_insert(entry);
            }
        }
        self.in_patch[order] = true;
    }

    /// Places insertion `order`, anchored at `anchor`.
    fn place(&mut self, order: usize, anchor: Anchor, statement: &'s str) {
        let (points, mut notes) = match anchor {
            Anchor::After(line) => points_after(self.st, line),
            Anchor::Before(line) => match self.st.first_starting_on(line) {
                Some(id) => (vec![Point::Before(id)], Vec::new()),
                None => (
                    Vec::new(),
                    vec![format!(
                        "no statement starts on line {line}: no fence before it in the patch"
                    )],
                ),
            },
            Anchor::Own(_) => unreachable!("own lines need no statement: `placed` adds them"),
        };
        notes.extend(shape_notes(self.st, &points));
        for point in points {
            self.add(order, point, statement);
        }
        self.notes[order] = notes;
    }
}

/// The new content of changed lines and the line inserted after lines, from `events`:
/// fences at the end of a line (or just after a `{` that ends it) go on a line of their own
/// after it, fences at the start of a line on a line of their own before it (above any
/// `#pragma` lines just before it), the rest into the line; fences that meet at one place are
/// written once (the first insertion's).
fn line_changes(
    text: &str,
    lines: &[Line<'_>],
    st: &Statements<'_>,
    events: Vec<Event>,
) -> BTreeMap<usize, Change> {
    let mut changes: BTreeMap<usize, Change> = BTreeMap::new();
    let mut own_line: BTreeMap<usize, (usize, String)> = BTreeMap::new();
    let mut inline: Vec<Event> = Vec::new();
    let ends: BTreeMap<usize, usize> = line_end_offsets(st);
    let starts: BTreeMap<usize, usize> = line_start_offsets(st);
    let mut i = 0;
    while i < events.len() {
        let offset = events[i].offset;
        let group_end = i + events[i..]
            .iter()
            .take_while(|e| e.offset == offset)
            .count();
        let group = &events[i..group_end];
        i = group_end;
        let mut rest: Vec<Event> = group.to_vec();
        if let Some(&line) = ends.get(&offset) {
            let tail = rest
                .iter()
                .rev()
                .take_while(|e| e.is_fence(Side::Close) || e.is_fence(Side::Inner))
                .count();
            for e in rest.split_off(rest.len() - tail) {
                let indent = new_line_indent(lines, st, &e, line);
                offer(&mut own_line, line, e.order, indent, &e.what);
            }
        }
        if let Some(&line) = starts.get(&offset) {
            let target = line_above(lines, line);
            let head = match target {
                Some(_) => rest.iter().take_while(|e| e.is_fence(Side::Open)).count(),
                None => 0,
            };
            let indent = indentation(lines[line - 1].content).to_string();
            for e in rest.drain(..head) {
                offer(
                    &mut own_line,
                    target.unwrap(),
                    e.order,
                    indent.clone(),
                    &e.what,
                );
            }
        }
        inline.extend(dedup_fences(rest));
    }
    apply_inline(text, lines, &inline, &mut changes);
    for (line, (_, inserted)) in own_line {
        changes.entry(line).or_default().inserted = Some(inserted);
    }
    changes
}

/// Keeps, of fences next to each other at one offset, the one of the first insertion.
fn dedup_fences(events: Vec<Event>) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    for e in events {
        let fence = matches!(e.what, What::Fence { .. });
        match out.last_mut() {
            Some(prev) if fence && matches!(prev.what, What::Fence { .. }) => {
                if e.order < prev.order {
                    *prev = e;
                }
            }
            _ => out.push(e),
        }
    }
    out
}

/// Offers a line holding `what`'s statement after `line`; of several, the first insertion's.
fn offer(
    own_line: &mut BTreeMap<usize, (usize, String)>,
    line: usize,
    order: usize,
    indent: String,
    what: &What,
) {
    let What::Fence { statement, .. } = what else {
        return;
    };
    let candidate = (order, format!("{indent}{statement}"));
    match own_line.get(&line) {
        Some((existing, _)) if *existing <= order => {}
        _ => {
            own_line.insert(line, candidate);
        }
    }
}

/// The indentation of a fence on a line of its own after `line`: like the line its statement
/// starts on, or, first in a block, like the block's first line (one level deeper than the
/// `{` line for an empty block, by the file's own step: [`indent_step`]).
fn new_line_indent(lines: &[Line<'_>], st: &Statements<'_>, e: &Event, line: usize) -> String {
    let What::Fence { side, node, .. } = &e.what else {
        return String::new();
    };
    if *side != Side::Inner {
        return indentation(lines[st.line_of(*node) - 1].content).to_string();
    }
    let close = st.tokens[st.nodes[*node].last].line;
    let first = ((line + 1)..close).find(|&n| !lines[n - 1].content.trim().is_empty());
    match first {
        Some(n) => indentation(lines[n - 1].content).to_string(),
        None => {
            let outer = indentation(lines[line - 1].content);
            format!("{outer}{}", indent_step(lines, outer))
        }
    }
}

/// One level of indentation in the file of `lines`, for a line nested in one indented by
/// `outer`: a tab where `outer` has one, else the number of spaces by which a line most often
/// goes deeper than the line above it (the smaller on a tie; 4 where none does). Lines of a
/// block comment (` * …`) do not count.
fn indent_step(lines: &[Line<'_>], outer: &str) -> String {
    if outer.contains('\t') {
        return "\t".to_string();
    }
    let depths: Vec<usize> = (lines.iter())
        .map(|l| l.content)
        .filter(|c| !c.trim().is_empty() && !c.trim_start().starts_with('*'))
        .map(indentation)
        .filter(|i| !i.contains('\t'))
        .map(str::len)
        .collect();
    let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
    for w in depths.windows(2).filter(|w| w[1] > w[0]) {
        *counts.entry(w[1] - w[0]).or_default() += 1;
    }
    let step = (counts.iter())
        .max_by_key(|&(step, n)| (n, std::cmp::Reverse(step)))
        .map_or(4, |(&step, _)| step);
    " ".repeat(step)
}

/// The line after which a line goes that is to come before `line`: the one above it, or above
/// the `#pragma` lines just before it; none for the first line.
fn line_above(lines: &[Line<'_>], line: usize) -> Option<usize> {
    let mut above = line - 1;
    while above >= 1 && lines[above - 1].content.trim_start().starts_with("#pragma") {
        above -= 1;
    }
    (above >= 1).then_some(above)
}

/// For each line whose last token ends it (no block comment open after it), that token's end
/// offset and the line.
fn line_end_offsets(st: &Statements<'_>) -> BTreeMap<usize, usize> {
    let mut ends = BTreeMap::new();
    for (i, token) in st.tokens.iter().enumerate() {
        let last_on_line = st.tokens.get(i + 1).is_none_or(|n| n.line != token.line);
        let line_end = token.line + token.text.matches('\n').count();
        if last_on_line && !st.open_comment_lines.contains(&line_end) {
            ends.insert(token.end, line_end);
        }
    }
    ends
}

/// For each line whose first token starts it (no block comment open before it), that token's
/// start offset and the line.
fn line_start_offsets(st: &Statements<'_>) -> BTreeMap<usize, usize> {
    let mut starts = BTreeMap::new();
    for (i, token) in st.tokens.iter().enumerate() {
        let first_on_line = i == 0 || st.tokens[i - 1].line != token.line;
        if first_on_line && !st.open_comment_lines.contains(&(token.line - 1)) {
            starts.insert(token.start, token.line);
        }
    }
    starts
}

/// Writes the inline `events` into the lines they fall in.
fn apply_inline(
    text: &str,
    lines: &[Line<'_>],
    events: &[Event],
    changes: &mut BTreeMap<usize, Change>,
) {
    let mut line_start = 0;
    let mut next = 0;
    for (index, line) in lines.iter().enumerate() {
        let line_end = line_start + line.content.len();
        let here = next
            + events[next..]
                .iter()
                .take_while(|e| e.offset <= line_end)
                .count();
        if here > next {
            let mut content = String::new();
            let mut cursor = line_start;
            for e in &events[next..here] {
                content.push_str(&text[cursor..e.offset.max(cursor)]);
                cursor = cursor.max(e.offset);
                match &e.what {
                    What::Fence {
                        statement, side, ..
                    } => match side {
                        Side::Open => content.push_str(&format!("{statement} ")),
                        // In an empty block on one line: `{ fence; }`.
                        Side::Inner if text[e.offset..].starts_with('}') => {
                            content.push_str(&format!(" {statement} "))
                        }
                        _ => content.push_str(&format!(" {statement}")),
                    },
                    What::Text(t) => content.push_str(t),
                    What::Replace { end, text } => {
                        content.push_str(text);
                        cursor = (*end).min(line_end);
                    }
                }
            }
            content.push_str(&text[cursor..line_end]);
            changes.entry(index + 1).or_default().content = Some(content);
        }
        next = here;
        line_start = line_end + line.ending.len();
    }
}

/// What changes at one old line: its new content, and the line inserted after it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Change {
    content: Option<String>,
    inserted: Option<String>,
}

/// Old lines `first..=last` (1-based) shown in one hunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hunk {
    first: usize,
    last: usize,
}

/// A validated change: the old lines and what changes at each (line 0: before the first).
struct Plan<'a> {
    lines: Vec<Line<'a>>,
    changes: BTreeMap<usize, Change>,
    /// The ending given to a last line that had none: the file's first line ending, else `\n`.
    default_ending: &'a str,
}

impl<'a> Plan<'a> {
    fn with_changes(lines: Vec<Line<'a>>, changes: BTreeMap<usize, Change>) -> Plan<'a> {
        let default_ending = lines
            .iter()
            .map(|line| line.ending)
            .find(|ending| !ending.is_empty())
            .unwrap_or("\n");
        Plan {
            lines,
            changes,
            default_ending,
        }
    }

    /// `statement` on a line of its own after each of `numbers`, indented like it.
    fn after_lines(
        text: &'a str,
        numbers: &[usize],
        statement: &str,
    ) -> Result<Plan<'a>, PatchError> {
        let lines = split_lines(text);
        let anchors: Vec<(Anchor, &str)> = numbers
            .iter()
            .map(|&l| (Anchor::Own(l), statement))
            .collect();
        validate(&lines, &anchors)?;
        let mut changes: BTreeMap<usize, Change> = BTreeMap::new();
        for &number in numbers {
            let indent = match number {
                0 => "",
                _ => indentation(lines[number - 1].content),
            };
            changes.entry(number).or_default().inserted = Some(format!("{indent}{statement}"));
        }
        Ok(Plan::with_changes(lines, changes))
    }

    /// `insertions` placed by the statements of `text` (module doc), with per insertion
    /// whether it is in the patch and notes on how it was placed (the diff left empty).
    fn placed(
        text: &'a str,
        insertions: &[(Anchor, &str)],
    ) -> Result<(Plan<'a>, Placed), PatchError> {
        let lines = split_lines(text);
        validate(&lines, insertions)?;
        let st = Statements::parse(text);
        let mut placing = Placing {
            st: &st,
            fences: vec![NodeFences::default(); st.nodes.len()],
            in_patch: vec![false; insertions.len()],
            notes: vec![Vec::new(); insertions.len()],
        };
        let mut own_lines: Vec<(usize, &str)> = Vec::new();
        for (order, &(anchor, statement)) in insertions.iter().enumerate() {
            match anchor {
                Anchor::Own(line) => {
                    own_lines.push((line, statement));
                    placing.in_patch[order] = true;
                }
                _ => placing.place(order, anchor, statement),
            }
        }
        let events = events(&st, &placing.fences);
        let mut changes = line_changes(text, &lines, &st, events);
        for (line, statement) in own_lines {
            // A line already followed by a fence (never a comment or an include guard, where
            // includes go) would hold two: the top of the file takes this one instead.
            let line = match changes.get(&line).is_some_and(|c| c.inserted.is_some()) {
                true => 0,
                false => line,
            };
            changes
                .entry(line)
                .or_default()
                .inserted
                .get_or_insert(statement.to_string());
        }
        let placed = Placed {
            diff: String::new(),
            text: String::new(),
            changed_lines: Vec::new(),
            in_patch: placing.in_patch,
            notes: placing.notes,
        };
        Ok((Plan::with_changes(lines, changes), placed))
    }

    fn inserted_after(&self, number: usize) -> Option<&str> {
        self.changes.get(&number)?.inserted.as_deref()
    }

    fn content(&self, number: usize) -> &str {
        let changed = self.changes.get(&number).and_then(|c| c.content.as_deref());
        changed.unwrap_or(self.lines[number - 1].content)
    }

    /// The new text.
    fn text(&self) -> String {
        let mut out = String::new();
        if let Some(top) = self.inserted_after(0) {
            out.push_str(top);
            out.push_str(self.default_ending);
        }
        for (index, line) in self.lines.iter().enumerate() {
            out.push_str(self.content(index + 1));
            match self.inserted_after(index + 1) {
                Some(inserted) => {
                    out.push_str(self.ending_before_insertion(line));
                    out.push_str(inserted);
                    out.push_str(line.ending);
                }
                None => out.push_str(line.ending),
            }
        }
        out
    }

    /// The lines of [`Plan::text`] (1-based) that are changed or inserted.
    fn changed_lines(&self) -> Vec<usize> {
        let mut changed = Vec::new();
        let mut at = 0;
        let mut insert = |text: &str, at: &mut usize| {
            for _ in 0..text.lines().count().max(1) {
                *at += 1;
                changed.push(*at);
            }
        };
        if let Some(top) = self.inserted_after(0) {
            insert(top, &mut at);
        }
        for number in 1..=self.lines.len() {
            match self
                .changes
                .get(&number)
                .is_some_and(|c| c.content.is_some())
            {
                true => insert("", &mut at),
                false => at += 1,
            }
            if let Some(text) = self.inserted_after(number) {
                insert(text, &mut at);
            }
        }
        changed
    }

    /// The unified diff for `path`; empty when nothing changes.
    fn diff(&self, path: &str) -> String {
        if self.changes.is_empty() {
            return String::new();
        }
        let mut out = format!("--- a/{path}\n+++ b/{path}\n");
        for hunk in self.hunks() {
            self.write_hunk(&mut out, hunk);
        }
        out
    }

    /// The ending `line` gets when a line is inserted after it.
    fn ending_before_insertion(&self, line: &Line<'a>) -> &'a str {
        if line.ending.is_empty() {
            self.default_ending
        } else {
            line.ending
        }
    }

    /// The old lines around each change, merged where they overlap or touch.
    fn hunks(&self) -> Vec<Hunk> {
        let mut hunks: Vec<Hunk> = Vec::new();
        for (&at, change) in &self.changes {
            let first = match change.content {
                Some(_) => at.saturating_sub(CONTEXT),
                None => (at + 1).saturating_sub(CONTEXT),
            };
            let hunk = Hunk {
                first: first.max(1),
                last: (at + CONTEXT).min(self.lines.len()),
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
        let inserted = |range: std::ops::Range<usize>| {
            (self.changes.range(range))
                .filter(|(_, c)| c.inserted.is_some())
                .count()
        };
        let before = inserted(0..lowest);
        let within = inserted(lowest..hunk.last + 1);
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
        let inserted = self.inserted_after(number);
        let ending = match inserted {
            Some(_) => self.ending_before_insertion(&line),
            None => line.ending,
        };
        let content = self.content(number);
        if content != line.content || ending != line.ending {
            // Changed in place, or the last line gains a line ending.
            push_diff_line(out, '-', line.content, line.ending);
            push_diff_line(out, '+', content, ending);
        } else {
            push_diff_line(out, ' ', line.content, line.ending);
        }
        if let Some(inserted) = inserted {
            push_diff_line(out, '+', inserted, line.ending);
        }
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

    /// The lines the patch check keeps fences on (of a `-nf` variant) are the lines holding
    /// the inserted statements, whether on lines of their own or inside a changed line.
    #[test]
    fn changed_lines_are_the_lines_that_hold_inserted_statements() {
        let old = "void k(int *c) {\n    x = 1;\n    while (c[0] == 0) y = 2;\n    z = 3;\n}\n";
        let anchors = [(Anchor::After(2), "F;"), (Anchor::After(3), "F;")];
        let placed = place_statements("k.cu", old, &anchors).unwrap();
        let holding: Vec<usize> = (placed.text.lines().enumerate())
            .filter(|(_, line)| line.contains("F;"))
            .map(|(i, _)| i + 1)
            .collect();
        assert_eq!(placed.changed_lines, holding, "{}", placed.text);
        assert!(holding.len() >= 3, "{}", placed.text);
        let untouched = placed.text.lines().enumerate();
        for (i, line) in untouched.filter(|(i, _)| !placed.changed_lines.contains(&(i + 1))) {
            assert!(old.lines().any(|l| l == line), "line {}: {line}", i + 1);
        }
    }

    #[test]
    fn inserts_with_indentation() {
        let old = "a {\n    x = 1;\n\tflag = 1;\n}\n";
        let new = insert_after_lines(old, &[2, 3], FENCE).unwrap();
        let expected =
            "a {\n    x = 1;\n    __threadfence();\n\tflag = 1;\n\t__threadfence();\n}\n";
        assert_eq!(new, expected);
    }

    /// [`insert_statements`] with each of `lines` anchored after.
    fn fenced_after(text: &str, lines: &[usize]) -> String {
        let anchors: Vec<(Anchor, &str)> =
            lines.iter().map(|&l| (Anchor::After(l), "F;")).collect();
        insert_statements(text, &anchors).unwrap()
    }

    /// Also a regression: a loop whose block is on the header's line (`while (…) { }`) was
    /// fenced only after the loop, so consecutive evaluations of the condition had no fence
    /// between them; now the fence goes into the block too.
    #[test]
    fn a_site_on_a_loop_header_goes_first_in_the_body_and_after_the_loop() {
        let text = "if (t == 0) {\n    while (atomicCAS(l, 0, 1) != 0) {\n        // spin\n    }\n    x = 1;\n}\n";
        assert_eq!(
            fenced_after(text, &[2]),
            "if (t == 0) {\n    while (atomicCAS(l, 0, 1) != 0) {\n        F;\n        // spin\n    }\n    F;\n    x = 1;\n}\n"
        );
        let one_line = "while (atomicCAS(l, 0, 1) != 0) { }\nx = 1;\n";
        assert_eq!(
            fenced_after(one_line, &[1]),
            "while (atomicCAS(l, 0, 1) != 0) { F; }\nF;\nx = 1;\n"
        );
        // An empty block with no space in it: `{}` becomes `{ F; }`, not `{ F;}`.
        let closed = "while (flag[0] == 0) {}\nx = 1;\n";
        assert_eq!(
            fenced_after(closed, &[1]),
            "while (flag[0] == 0) { F; }\nF;\nx = 1;\n"
        );
    }

    /// Bug (QA, a spin loop in a file indented by 2): the fence in an empty loop body was
    /// indented 4 deeper than the loop, as if every file used 4.
    #[test]
    fn a_fence_in_an_empty_block_takes_the_files_own_indentation_step() {
        let text = "void k() {\n  if (t) {\n    while (flag[0] == 0) {\n    }\n  }\n}\n";
        assert_eq!(
            fenced_after(text, &[3]),
            "void k() {\n  if (t) {\n    while (flag[0] == 0) {\n      F;\n    }\n    F;\n  }\n}\n"
        );
        // A block comment's ` * ` lines are no step of 1.
        let commented = format!("/*\n * spin\n */\n{text}");
        assert!(
            fenced_after(&commented, &[6]).contains("\n      F;\n    }\n"),
            "{}",
            fenced_after(&commented, &[6])
        );
        let tabs = "void k() {\n\twhile (flag[0] == 0) {\n\t}\n}\n";
        assert_eq!(
            fenced_after(tabs, &[2]),
            "void k() {\n\twhile (flag[0] == 0) {\n\t\tF;\n\t}\n\tF;\n}\n"
        );
    }

    /// Regression (tpo-tm's `if (h < tail[q]) {`): a site on an `if` line was fenced inside the
    /// `if` body only, so when the condition was false nothing ordered its load against what
    /// follows the `if`. The fence goes on both ways out of the condition.
    #[test]
    fn fence_on_an_if_condition_line_goes_on_every_path_out_of_the_condition() {
        let text = "    if (h < tail[q]) {\n        task = items[h];\n        head[q] = h + 1;\n    }\n    atomicExch(&lock[q], 0u);\n";
        let expected = "    if (h < tail[q]) {\n        F;\n        task = items[h];\n        head[q] = h + 1;\n    }\n    F;\n    atomicExch(&lock[q], 0u);\n";
        assert_eq!(fenced_after(text, &[1]), expected);
        let no_else = "if (a[0]) {\n  x = 1;\n} else if (b) {\n  y = 1;\n}\nz = 1;\n";
        assert_eq!(
            fenced_after(no_else, &[3]),
            "if (a[0]) {\n  x = 1;\n} else if (b) {\n  F;\n  y = 1;\n}\nF;\nz = 1;\n"
        );
    }

    /// Regression: with `} else if (b) {` after it, the fence of an `if` condition went first
    /// into the `else if` body, so `b`'s own accesses ran before it on the false path. It now
    /// starts `b`'s condition.
    #[test]
    fn an_else_if_condition_is_fenced_before_its_own_accesses() {
        let chain = "if (a[0]) {\n  x = 1;\n} else if (b[0]) {\n  y = 1;\n} else {\n}\nz = 1;\n";
        assert_eq!(
            fenced_after(chain, &[1]),
            "if (a[0]) {\n  F;\n  x = 1;\n} else if (F, b[0]) {\n  y = 1;\n} else {\n}\nz = 1;\n"
        );
    }

    /// A declaration in the `else if` condition cannot follow a comma: the `else` part is put
    /// in braces with the fence first instead.
    #[test]
    fn an_else_if_that_declares_is_braced_instead() {
        let chain = "void k() {\n  if (a[0]) x = 1;\n  else if (int v = b[0]) y = v;\n}\n";
        assert_eq!(
            fenced_after(chain, &[2]),
            "void k() {\n  if (a[0]) { F; x = 1; }\n  else { F; if (int v = b[0]) y = v; }\n  F;\n}\n"
        );
    }

    #[test]
    fn a_do_while_condition_is_fenced_after_it_and_first_in_the_body() {
        let text = "do {\n  v = 1;\n} while (flag[0] == 0);\nx = 1;\n";
        assert_eq!(
            fenced_after(text, &[3]),
            "do {\n  F;\n  v = 1;\n} while (flag[0] == 0);\nF;\nx = 1;\n"
        );
    }

    #[test]
    fn a_statement_over_several_lines_is_fenced_after_its_last() {
        let text = "{\n  int v = f(a[0],\n            b[1]);\n  x = v;\n}\n";
        assert_eq!(
            fenced_after(text, &[2]),
            "{\n  int v = f(a[0],\n            b[1]);\n  F;\n  x = v;\n}\n"
        );
        assert_eq!(fenced_after(text, &[3]), fenced_after(text, &[2]));
    }

    /// Bug: a fence "after" a `return` line came after the return, never reached. The value is
    /// computed first, then the fence, then the return; a jump without a value has no access,
    /// so a statement before it on its line is fenced before the jump.
    #[test]
    fn an_access_on_a_return_break_or_continue_line_is_fenced_before_the_jump() {
        let text = "__device__ int load(int *p) {\n    return p[0];\n}\n";
        assert_eq!(
            fenced_after(text, &[2]),
            "__device__ int load(int *p) {\n    { auto gpuwmm_value = p[0]; F; return gpuwmm_value; }\n}\n"
        );
        let void = "__device__ void put(int *p) {\n    return store(p);\n}\n";
        assert_eq!(
            fenced_after(void, &[2]),
            "__device__ void put(int *p) {\n    { store(p); F; return; }\n}\n"
        );
        let jumps =
            "void k() {\n  for (;;) {\n    x[0] = 1; break;\n    if (flag[0]) continue;\n  }\n}\n";
        assert_eq!(
            fenced_after(jumps, &[3, 4]),
            "void k() {\n  for (;;) {\n    x[0] = 1; F; break;\n    if (flag[0]) { F; continue; }\n    F;\n  }\n}\n"
        );
        let guarded = "int f(int *p) {\n  if (p[1]) return p[0];\n  return 0;\n}\n";
        assert_eq!(
            fenced_after(guarded, &[2]),
            "int f(int *p) {\n  if (p[1]) { F; auto gpuwmm_value = p[0]; F; return gpuwmm_value; }\n  F;\n  return 0;\n}\n"
        );
    }

    /// A reference cannot be kept in an `auto` variable: the fence is left out, and said so.
    #[test]
    fn a_return_of_a_reference_is_left_out_of_the_patch_with_a_note() {
        let text = "__device__ int &at(int *p) {\n    return p[0];\n}\n";
        let placed = place_statements("k.cu", text, &[(Anchor::After(2), "F;")]).unwrap();
        assert_eq!(placed.diff, "");
        assert_eq!(placed.in_patch, [false]);
        assert!(
            placed.notes[0][0].contains("returns a reference"),
            "{:?}",
            placed.notes
        );
    }

    /// Bug: in `if (c) x = y;` a fence on the next line fell outside the condition, and one
    /// before the statement split the `if` from its body. The body is put in braces with the
    /// fence inside; a loop's body also gets one at its end, before the next condition.
    #[test]
    fn a_one_line_if_while_or_for_body_is_braced_with_the_fence_inside() {
        let text = "void k() {\n  if (c[0]) x = y;\n  z = 1;\n}\n";
        assert_eq!(
            fenced_after(text, &[2]),
            "void k() {\n  if (c[0]) { F; x = y; }\n  F;\n  z = 1;\n}\n"
        );
        let two_lines = "void k() {\n  if (c[0])\n    x = y;\n  z = 1;\n}\n";
        assert_eq!(
            fenced_after(two_lines, &[2]),
            "void k() {\n  if (c[0])\n    { F; x = y; }\n  F;\n  z = 1;\n}\n"
        );
        assert_eq!(
            fenced_after(two_lines, &[3]),
            "void k() {\n  if (c[0])\n    x = y;\n  F;\n  z = 1;\n}\n"
        );
        let spin =
            "void k() {\n  while (flag[0] == 0) n++;\n  for (i = 0; i < m[0]; i++) s += a[i];\n}\n";
        assert_eq!(
            fenced_after(spin, &[2, 3]),
            "void k() {\n  while (flag[0] == 0) { F; n++; F; }\n  F;\n  for (i = 0; i < m[0]; i++) { F; s += a[i]; F; }\n  F;\n}\n"
        );
        let before = "void k() {\n  if (c) cub_call(p);\n}\n";
        let insertions = [(Anchor::Before(2), "F;")];
        assert_eq!(
            insert_statements(before, &insertions).unwrap(),
            "void k() {\n  F;\n  if (c) cub_call(p);\n}\n"
        );
    }

    /// Bug: with `else` on a line of its own (or `} else x = y;`), the fence after the `if`
    /// block landed between `}` and `else`, which does not compile, or outside the `else`.
    #[test]
    fn an_else_on_its_own_line_or_without_braces_keeps_its_if() {
        let allman =
            "void k() {\n  if (a[0])\n  {\n    x = 1;\n  }\n  else\n  {\n    y = 1;\n  }\n}\n";
        assert_eq!(
            fenced_after(allman, &[2]),
            "void k() {\n  if (a[0])\n  {\n    F;\n    x = 1;\n  }\n  else\n  {\n    F;\n    y = 1;\n  }\n}\n"
        );
        let unbraced = "void k() {\n  if (a[0]) {\n    x = 1;\n  } else y = 1;\n  z = 1;\n}\n";
        assert_eq!(
            fenced_after(unbraced, &[2, 4]),
            "void k() {\n  if (a[0]) {\n    F;\n    x = 1;\n  } else { F; y = 1; }\n  F;\n  z = 1;\n}\n"
        );
        let one_line = "void k() {\n  if (a[0]) x = 1; else y = b[0];\n}\n";
        assert_eq!(
            fenced_after(one_line, &[2]),
            "void k() {\n  if (a[0]) { F; x = 1; } else { F; y = b[0]; }\n  F;\n}\n"
        );
    }

    /// Bug: of `data[0] = 1; flag[0] = 1;` the fence went after the line, so nothing ordered
    /// the first store before the second. Each statement of the line gets one after its `;`.
    #[test]
    fn two_statements_on_one_line_get_a_fence_between_them() {
        let text = "void k() {\n    data[0] = 1; flag[0] = 1;  // publish\n}\n";
        assert_eq!(
            fenced_after(text, &[2]),
            "void k() {\n    data[0] = 1; F; flag[0] = 1;  // publish\n    F;\n}\n"
        );
        let placed = place_statements("k.cu", text, &[(Anchor::After(2), "F;")]).unwrap();
        assert!(
            placed.notes[0][0].contains("more than one statement"),
            "{:?}",
            placed.notes
        );
    }

    /// A line with no statement of its own (a brace, a lambda's body, a declaration outside a
    /// function) gets no fence: the patch does not guess, and the note says so.
    #[test]
    fn a_line_without_a_statement_of_its_own_is_left_out_with_a_note() {
        let global = "__device__ int counter;\nstruct S { int a; };\n";
        let placed = place_statements(
            "k.cu",
            global,
            &[(Anchor::After(1), "F;"), (Anchor::After(2), "F;")],
        )
        .unwrap();
        assert_eq!(
            (placed.diff.as_str(), placed.in_patch.as_slice()),
            ("", &[false, false][..])
        );
        let text = "void k() {\n  auto f = [&](int i) {\n    return a[i];\n  };\n}\n";
        let placed = place_statements("k.cu", text, &[(Anchor::After(3), "F;")]).unwrap();
        assert_eq!(
            (placed.diff.as_str(), placed.in_patch.as_slice()),
            ("", &[false][..])
        );
        assert!(placed.notes[0][0].contains("no statement of its own"));
        let switch = "void k() {\n  switch (a[0]) { default: x = 1; }\n}\n";
        let placed = place_statements("k.cu", switch, &[(Anchor::After(2), "F;")]).unwrap();
        assert!(
            placed.notes[0][0].contains("`switch`"),
            "{:?}",
            placed.notes
        );
        assert!(
            placed
                .diff
                .contains("+  switch (a[0]) { default: x = 1; F; }"),
            "{}",
            placed.diff
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
    fn an_own_line_0_goes_before_the_first_line_unindented() {
        let text = "{ a;\r\nb; }\r\n";
        let insertions = [(Anchor::Own(0), "#include <x>"), (Anchor::After(1), "f;")];
        assert_eq!(
            insert_statements(text, &insertions).unwrap(),
            "#include <x>\r\n{ a;\r\nf;\r\nb; }\r\n"
        );
        let diff = statements_diff(
            "k.cu",
            "a\nb\nc\nd\ne\n",
            &[(Anchor::Own(0), "#include <x>")],
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
