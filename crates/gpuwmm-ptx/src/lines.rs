//! Which source line each PTX statement comes from, through inlined code.
//!
//! Reports and patches name fence sites by source line, and the line a user can patch is one of
//! the function the PTX was compiled from: for code inlined from a helper (in the same file or in
//! a header such as CUB's), the line of the outermost call that leads to it. NVRTC says where
//! inlined code comes from with `.loc F L C, function_name N, inlined_at F2 L2 C2`: `F L C` is a
//! position inside the inlined function and `inlined_at` the position of its call, which may
//! itself be inside another inlined function. The chain is not spelled out in one directive:
//! each call site is a position that an earlier `.loc` of the same body named (NVRTC emits the
//! enclosing frames' `.loc`s, outermost first, before the code of an inlined call), and that
//! `.loc` has its own `inlined_at`, and so on up to a `.loc` without one, a line of the function
//! itself. Code motion can separate inlined code from the `.loc`s of its frames (a later block
//! reuses a frame emitted much earlier), so the chain must be followed through the body's
//! history, not through the nearest non-inlined `.loc`, which may belong to an unrelated line.
//!
//! The rule here: a call site resolves through the most recent `.loc` at exactly that position
//! (the same position can be a call site in several inlined copies; the most recent is the copy
//! being emitted). A call site no `.loc` named yet ends the chain at itself. NVRTC sometimes
//! repeats a position of inlined code without its `inlined_at` (seen in ls-bh: `.loc 1 143 9`,
//! a branch inside `split`, among code inlined at kernel.cu:392); a position that an earlier
//! `.loc` of the body named as inlined code keeps that chain.
//!
//! Unrolled loops break "the most recent": NVRTC emits the frames of an inlined call once, for
//! the loop's first copy, and the later copies name only the innermost position, whose call site
//! every call of the body resolved in turn. A loop of `cuda::atomic_ref` loads at four lines
//! thus put every later copy of all four at the fourth line. So a call site that resolved to
//! more than one chain, named again after a line of the body's own function (the loop went on)
//! or by the same `.loc` twice in a row (a fully unrolled loop: copies that print alike), and
//! before its frames are emitted anew, takes its chains in the order they first came, one per
//! copy: a copy starts where an inner position repeats. The copies of an unrolled body keep
//! the order of its first copy, so each goes back to its own line; where the compiler reorders
//! them more than that, a copy can land on another line of the same body (the site listing then
//! names a line of the loop that is not the access's own).
//!
//! Besides the two ends of the chain, the whole chain can be had ([`statement_frames`]): a patch
//! that must put a fence next to an access inside an inlined helper of the app's own source
//! needs the helper's line, which is a frame between the two ends when helpers call helpers.

use crate::ir::{Loc, SourcePos, Statement};
use std::collections::HashMap;
use std::rc::Rc;

/// Where a statement comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineAttribution {
    /// The position the most recent `.loc` names (inside the inlined function, if any).
    pub inner: SourcePos,
    /// The outermost frame of the inlining chain: a line of the function the code was inlined
    /// into, or the inner position itself for code that is not inlined.
    pub outer: SourcePos,
}

/// Follows a body's `.loc` directives in order and resolves inlining chains as it goes.
#[derive(Debug, Default)]
pub struct LocFollower {
    current: Option<LineAttribution>,
    /// The chain of the statements after the `.loc`s seen so far, outermost frame first.
    frames: Option<Rc<[SourcePos]>>,
    /// For each position a `.loc` has named, the chain it resolved to then (outermost first,
    /// ending with the position itself).
    chain_of: HashMap<SourcePos, Rc<[SourcePos]>>,
    /// For each position, the distinct chains it resolved to, in the order they first came.
    history: HashMap<SourcePos, Vec<Rc<[SourcePos]>>>,
    /// How many `.loc`s of the body's own function (chains of one frame) came so far, and for
    /// each position that count when it last resolved.
    own_lines: u64,
    resolved_at: HashMap<SourcePos, u64>,
    /// For each call site named in unrolled copies, where the copies are.
    copies: HashMap<SourcePos, Copies>,
    /// The last `.loc`'s position and call site.
    last: Option<(SourcePos, Option<SourcePos>)>,
}

/// The copies of an unrolled body that name a call site without its frames: the copy being
/// read (an index into the site's history, wrapping) and the inner positions it named so far.
#[derive(Debug, Default)]
struct Copies {
    copy: usize,
    named: Vec<SourcePos>,
}

impl LocFollower {
    /// Takes in one `.loc`. Line 0 marks compiler-generated code, which stays attributed to the
    /// previous line.
    pub fn see(&mut self, loc: &Loc) {
        if loc.at.line == 0 {
            return;
        }
        // The same `.loc` twice in a row is two inlined copies that print alike (a fully
        // unrolled loop has no line of its own between them).
        let repeated =
            self.last.replace((loc.at, loc.inlined_at)) == Some((loc.at, loc.inlined_at));
        let chain: Rc<[SourcePos]> = match loc.inlined_at {
            Some(call_site) => {
                let mut chain = self.chain_of_call(call_site, loc.at, repeated).to_vec();
                chain.push(loc.at);
                chain.into()
            }
            // A position inlined code of this body named before is that code again, emitted
            // without its `inlined_at` (NVRTC does so for some branches): it keeps its chain.
            // A function cannot be inlined into itself, so this is never a line of the body's
            // own function.
            None => self.chain_of_call(loc.at, loc.at, repeated),
        };
        self.current = Some(LineAttribution {
            inner: loc.at,
            outer: chain[0],
        });
        self.remember(loc.at, &chain);
        self.frames = Some(chain);
    }

    /// Records that `position` resolved to `chain`.
    fn remember(&mut self, position: SourcePos, chain: &Rc<[SourcePos]>) {
        if chain.len() == 1 {
            self.own_lines += 1;
        }
        let history = self.history.entry(position).or_default();
        if !history.contains(chain) {
            history.push(Rc::clone(chain));
        }
        self.resolved_at.insert(position, self.own_lines);
        self.chain_of.insert(position, Rc::clone(chain));
    }

    /// The attribution of the statements after the `.loc`s seen so far.
    pub fn current(&self) -> Option<LineAttribution> {
        self.current
    }

    /// The whole chain of the statements after the `.loc`s seen so far: the outermost frame
    /// first, the position the last `.loc` names last (one frame for code that is not inlined).
    pub fn frames(&self) -> &[SourcePos] {
        self.frames.as_deref().unwrap_or_default()
    }

    /// The chain a `.loc` at `call_site` resolved to, or the call site alone when none named it;
    /// for a `.loc` at `inner` in an unrolled copy (after a line of the body's own, or
    /// `repeated` right after itself), the chain of that copy (see the module doc).
    fn chain_of_call(
        &mut self,
        call_site: SourcePos,
        inner: SourcePos,
        repeated: bool,
    ) -> Rc<[SourcePos]> {
        let Some(chain) = self.chain_of.get(&call_site) else {
            return Rc::from([call_site].as_slice());
        };
        let history = &self.history[&call_site];
        let fresh = self.resolved_at.get(&call_site) == Some(&self.own_lines) && !repeated;
        if history.len() < 2 || fresh {
            self.copies.remove(&call_site);
            return Rc::clone(chain);
        }
        let copies = self.copies.entry(call_site).or_default();
        if copies.named.contains(&inner) {
            copies.copy += 1;
            copies.named.clear();
        }
        copies.named.push(inner);
        Rc::clone(&history[copies.copy % history.len()])
    }
}

/// The attribution of every statement of a body, by index: `None` before the first `.loc`. A
/// `.loc` statement itself gets the attribution it starts.
pub fn attribute_statements(body: &[Statement]) -> Vec<Option<LineAttribution>> {
    let mut follower = LocFollower::default();
    body.iter()
        .map(|statement| {
            if let Statement::Loc(loc) = statement {
                follower.see(loc);
            }
            follower.current()
        })
        .collect()
}

/// The inlining chain of every statement of a body, by index, outermost frame first: empty
/// before the first `.loc`. Its first frame is [`LineAttribution::outer`] and its last
/// [`LineAttribution::inner`].
pub fn statement_frames(body: &[Statement]) -> Vec<Vec<SourcePos>> {
    let mut follower = LocFollower::default();
    body.iter()
        .map(|statement| {
            if let Statement::Loc(loc) = statement {
                follower.see(loc);
            }
            follower.frames().to_vec()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    /// The attribution of every instruction of kernel `k` in `body`, as `(inner, outer)` lines
    /// written `file:line`.
    fn instruction_lines(body: &str) -> Vec<(String, String)> {
        let text = format!(
            ".version 8.8\n.target sm_70\n.address_size 64\n\n.visible .entry k()\n{{\n{body}}}\n"
        );
        let module = parse(&text).unwrap();
        let body = module.function("k").unwrap().body.clone().unwrap();
        let show = |p: SourcePos| format!("{}:{}", p.file, p.line);
        attribute_statements(&body)
            .into_iter()
            .zip(&body)
            .filter(|(_, s)| matches!(s, Statement::Instruction(_)))
            .map(|(a, _)| {
                let a = a.expect("every instruction follows a .loc");
                (show(a.inner), show(a.outer))
            })
            .collect()
    }

    fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
        expected
            .iter()
            .map(|(i, o)| (i.to_string(), o.to_string()))
            .collect()
    }

    #[test]
    fn code_that_is_not_inlined_is_its_own_outer_line() {
        let lines =
            instruction_lines("\t.loc 1 5 3\n\tst.global.u32 [%rd1], 1;\n\t.loc 1 6 3\n\tret;\n");
        assert_eq!(lines, pairs(&[("1:5", "1:5"), ("1:6", "1:6")]));
    }

    #[test]
    fn one_level_of_inlining_takes_the_call_line() {
        let lines = instruction_lines(
            "\t.loc 1 11 3\n\
             \t.loc 1 2 5, function_name $L__info_string0, inlined_at 1 11 3\n\
             \tatom.global.exch.b32 %r1, [%rd1], 1;\n",
        );
        assert_eq!(lines, pairs(&[("1:2", "1:11")]));
    }

    #[test]
    fn inlined_code_takes_its_call_line_not_the_previous_line_of_the_kernel() {
        // The call at line 9 was never named by a `.loc` of its own; the previous kernel line (7)
        // is unrelated to it.
        let lines = instruction_lines(
            "\t.loc 1 7 3\n\tmov.u32 %r1, 0;\n\
             \t.loc 1 2 33, function_name $L__info_string0, inlined_at 1 9 3\n\
             \tst.global.u32 [%rd1], %r1;\n",
        );
        assert_eq!(lines, pairs(&[("1:7", "1:7"), ("1:2", "1:9")]));
    }

    #[test]
    fn two_levels_of_inlining_resolve_to_the_kernel_line() {
        // kernel.cu:20 calls outer() (line 10), which calls inner() at line 11; inner's store is
        // at line 3.
        let lines = instruction_lines(
            "\t.loc 1 20 5\n\
             \t.loc 1 11 5, function_name $L__info_string0, inlined_at 1 20 5\n\
             \t.loc 1 3 5, function_name $L__info_string1, inlined_at 1 11 5\n\
             \tst.global.u32 [%rd1], 1;\n",
        );
        assert_eq!(lines, pairs(&[("1:3", "1:20")]));
    }

    #[test]
    fn three_levels_of_inlining_from_a_header_resolve_to_the_kernel_line() {
        // File 1 is kernel.cu, file 2 a header: kernel.cu:40 calls a (2:100), which calls b at
        // 2:101, which calls c at 2:50; c's load is at 2:7.
        let lines = instruction_lines(
            "\t.loc 1 40 9\n\
             \t.loc 2 101 5, function_name $L__info_string0, inlined_at 1 40 9\n\
             \t.loc 2 50 7, function_name $L__info_string1, inlined_at 2 101 5\n\
             \t.loc 2 7 3, function_name $L__info_string2, inlined_at 2 50 7\n\
             \tld.relaxed.gpu.u32 %r1, [%rd1];\n",
        );
        assert_eq!(lines, pairs(&[("2:7", "1:40")]));
    }

    #[test]
    fn code_moved_past_another_kernel_line_keeps_its_own_call_line() {
        // The cccl-scan bug: the look-back (called at kernel.cu:109) has its frames emitted,
        // then tile 0's branch (lines 104, 105) is laid out, then more of the look-back code
        // names only its innermost frame, whose call site 2:267 was resolved at the start.
        let lines = instruction_lines(
            "\t.loc 1 109 9\n\
             \t.loc 2 1266 5, function_name $L__info_string2, inlined_at 1 109 9\n\
             \t.loc 2 267 5, function_name $L__info_string10, inlined_at 2 1266 5\n\
             \t.loc 2 143 3, function_name $L__info_string11, inlined_at 2 267 5\n\
             \tmov.u32 %r1, 0;\n\
             \t.loc 1 105 13\n\
             \tst.shared.u32 [%rd2], 0;\n\
             \t.loc 2 143 3, function_name $L__info_string11, inlined_at 2 267 5\n\
             \tld.relaxed.gpu.u32 %r2, [%rd1];\n",
        );
        assert_eq!(
            lines,
            pairs(&[("2:143", "1:109"), ("1:105", "1:105"), ("2:143", "1:109")])
        );
    }

    #[test]
    fn a_call_site_shared_by_two_inlined_copies_resolves_through_the_most_recent() {
        // SetInclusive (2:897) is inlined both at kernel.cu:104 and, inside the look-back, at
        // 2:1286 (itself called at kernel.cu:109); a store inlined at 2:897 belongs to the copy
        // whose frame was emitted last.
        let lines = instruction_lines(
            "\t.loc 1 104 13\n\
             \t.loc 2 897 5, function_name $L__info_string12, inlined_at 1 104 13\n\
             \t.loc 4 252 1, function_name $L__info_string8, inlined_at 2 897 5\n\
             \tst.cg.u32 [%rd1], %r1;\n\
             \t.loc 2 1286 7, function_name $L__info_string2, inlined_at 1 109 9\n\
             \t.loc 2 897 5, function_name $L__info_string12, inlined_at 2 1286 7\n\
             \t.loc 4 252 1, function_name $L__info_string8, inlined_at 2 897 5\n\
             \tst.cg.u32 [%rd2], %r2;\n",
        );
        assert_eq!(lines, pairs(&[("4:252", "1:104"), ("4:252", "1:109")]));
    }

    #[test]
    fn inlined_code_repeated_without_inlined_at_keeps_its_chain() {
        // ls-bh's bh_build: split() (line 143 is inside it) is inlined at 192 in insert_body(),
        // inlined at kernel.cu:392; NVRTC repeats `.loc 1 143 9` without `inlined_at` for a
        // branch. The store after it, and the inlined code after that, belong to line 392.
        let lines = instruction_lines(
            "\t.loc 1 392 9\n\
             \t.loc 1 192 9, function_name $L__info_string2, inlined_at 1 392 9\n\
             \t.loc 1 143 9, function_name $L__info_string5, inlined_at 1 192 9\n\
             \tsetp.eq.s32 %p1, %r1, %r2;\n\
             \t.loc 1 143 9\n\
             \tst.global.u32 [%rd1], %r1;\n\
             \t.loc 1 125 9, function_name $L__info_string5, inlined_at 1 192 9\n\
             \tatom.global.add.u32 %r3, [%rd2], 1;\n",
        );
        assert_eq!(
            lines,
            pairs(&[("1:143", "1:392"), ("1:143", "1:392"), ("1:125", "1:392")])
        );
    }

    #[test]
    fn line_zero_keeps_the_previous_attribution() {
        let lines = instruction_lines(
            "\t.loc 1 30 5\n\
             \t.loc 1 2 5, function_name $L__info_string0, inlined_at 1 30 5\n\
             \t.loc 1 0 5\n\
             \tst.global.u32 [%rd1], 1;\n",
        );
        assert_eq!(lines, pairs(&[("1:2", "1:30")]));
    }

    #[test]
    fn frames_name_every_call_between_the_kernel_line_and_the_access() {
        // kernel.cu:392 calls insert_body, whose line 192 calls split, whose line 143 stores;
        // the repeated `.loc 1 143 9` keeps the whole chain.
        let text = ".version 8.8\n.target sm_70\n.address_size 64\n\n.visible .entry k()\n{\n\
                    \t.loc 1 392 9\n\
                    \t.loc 1 192 9, function_name $L__info_string2, inlined_at 1 392 9\n\
                    \t.loc 1 143 9, function_name $L__info_string5, inlined_at 1 192 9\n\
                    \tst.global.u32 [%rd1], %r1;\n\
                    \t.loc 1 143 9\n\
                    \tst.global.u32 [%rd2], %r1;\n\
                    \t.loc 1 7 3\n\
                    \tret;\n}\n";
        let module = parse(text).unwrap();
        let body = module.function("k").unwrap().body.clone().unwrap();
        let lines: Vec<Vec<u32>> = statement_frames(&body)
            .into_iter()
            .zip(&body)
            .filter(|(_, s)| matches!(s, Statement::Instruction(_)))
            .map(|(frames, _)| frames.iter().map(|f| f.line).collect())
            .collect();
        assert_eq!(lines, [vec![392, 192, 143], vec![392, 192, 143], vec![7]]);
    }

    /// The frames of `atomic_ref::load` at `line`, as NVRTC emits them for the first copy of a
    /// loop: the kernel line, a header frame, then the access's own position.
    fn load_frames(line: u32) -> String {
        format!(
            "\t.loc 1 {line} 13\n\
             \t.loc 2 80 3, function_name $L__info_string0, inlined_at 1 {line} 13\n\
             \t.loc 5 303 1, function_name $L__info_string1, inlined_at 2 80 3\n\
             \tld.relaxed.gpu.b32 %r1, [%rd{line}];\n"
        )
    }

    /// Regression (a seqlock reader: a loop of `atomic_ref` loads at lines 20 and 21, then an
    /// `if` at 22): the loop's later copies name only `5 303 1`, whose call site both lines
    /// resolved in turn, and all of them went to line 21. Each copy goes back to its own line.
    #[test]
    fn unrolled_copies_of_inlined_calls_go_back_to_their_own_lines() {
        let again = "\t.loc 5 303 1, function_name $L__info_string1, inlined_at 2 80 3\n\
                     \tld.relaxed.gpu.b32 %r2, [%rd9];\n";
        let body = format!(
            "{}{}\t.loc 1 22 5\n\tsetp.eq.s32 %p1, %r1, %r2;\n{again}{again}\t.loc 1 22 5\n{again}{again}",
            load_frames(20),
            load_frames(21)
        );
        let lines: Vec<String> = instruction_lines(&body)
            .into_iter()
            .map(|(_, o)| o)
            .collect();
        assert_eq!(
            lines,
            ["1:20", "1:21", "1:22", "1:20", "1:21", "1:20", "1:21"]
        );
    }

    /// A fully unrolled loop (a seqlock writer's stores at lines 13 and 14) has no line of its
    /// own between copies: the same `.loc` twice in a row starts the next copy.
    #[test]
    fn a_fully_unrolled_loop_repeats_its_loc_and_each_copy_keeps_its_line() {
        let again = "\t.loc 5 303 1, function_name $L__info_string1, inlined_at 2 80 3\n\
                     \tst.relaxed.gpu.b32 [%rd9], %r2;\n";
        let body = format!(
            "{}{}{again}{again}{again}{again}",
            load_frames(13),
            load_frames(14)
        );
        let lines: Vec<String> = instruction_lines(&body)
            .into_iter()
            .map(|(_, o)| o)
            .collect();
        assert_eq!(lines, ["1:13", "1:14", "1:13", "1:14", "1:13", "1:14"]);
    }

    /// A call site that only one call resolved is not a copy of several: a repeated `.loc` of
    /// its code keeps that call's line.
    #[test]
    fn a_repeated_loc_of_one_call_keeps_its_line() {
        let again = "\t.loc 5 303 1, function_name $L__info_string1, inlined_at 2 80 3\n\
                     \tld.relaxed.gpu.b32 %r2, [%rd9];\n";
        let body = format!("{}\t.loc 1 22 5\n\tret;\n{again}{again}", load_frames(20));
        let lines: Vec<String> = instruction_lines(&body)
            .into_iter()
            .map(|(_, o)| o)
            .collect();
        assert_eq!(lines, ["1:20", "1:22", "1:20", "1:20"]);
    }
}
