//! Loops that wait on another thread: the spins the compiler left without a load, and the
//! loads a spin waits on.
//!
//! A spin on a plain (non-`volatile`, non-atomic) flag is a data race in C++, so the compiler
//! may read the flag once, before the loop, and spin on the register: `$L: bra.uni $L;`. Such a
//! kernel hangs whatever the memory model, and no fence helps, so `check` and `harden` only see
//! timeouts. This module finds those loops in the PTX, so that the report can name the line and
//! the fix (read the flag through `volatile`, `cuda::atomic_ref` or an atomic).
//!
//! A loop is a backward branch to a label and the statements between. It is *blind* when its
//! body does nothing another thread can change or see (no memory access of any state space, no
//! call, barrier, or other instruction with an effect outside registers) and no branch or exit
//! in it is decided by a register the loop changes: once it goes round it never leaves. A
//! register counts as changed by the loop when an instruction of the body writes it from a
//! register the body writes, or from a clock (a loop that counts, or waits on `%clock`, is not
//! blind). The analysis errs towards silence: a loop it cannot prove blind is not reported.
//!
//! A *wait load* is the other side: a load in a loop that writes no memory, whose value decides
//! whether the loop goes round again or leaves ([`wait_loads`]). Its location is a flag or a lock
//! word some other thread is expected to change: the race recorder counts conflicts there as
//! the synchronisation itself, in every run, also one where the thread read it only once
//! (Peterson's `turn`, when the other thread was not in the way).

use crate::ir::{Instruction, Module, Operand, Statement};
use crate::lines::attribute_statements;
use crate::passes::fences::{source_line, SourceLine};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// A loop that, once it goes round, never leaves and never reads memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlindLoop {
    pub function: String,
    /// The line of the loop's backward branch (for inlined code, the line of the outermost call
    /// that leads to it), when the PTX has line info.
    pub source: Option<SourceLine>,
}

/// Every blind loop of the module ([`BlindLoop`], module doc), in module order.
pub fn blind_loops(module: &Module) -> Vec<BlindLoop> {
    let mut found = Vec::new();
    for function in module.functions() {
        let body = function.body.as_deref().unwrap_or_default();
        let attribution = attribute_statements(body);
        for (start, end) in backward_branches(body) {
            if is_blind(&body[start..=end]) {
                let source = attribution[end].and_then(|a| source_line(module, a.outer));
                found.push(BlindLoop {
                    function: function.name.clone(),
                    source,
                });
            }
        }
    }
    found.dedup();
    found
}

/// The PTX lines of the module's wait loads (module doc): loads of a loop whose body writes
/// no memory (no store, atomic or reduction but to `.local`, no call), whose value reaches,
/// through the registers the body computes from it, the guard of a branch or exit of that body.
pub fn wait_loads(module: &Module) -> BTreeSet<usize> {
    let mut lines = BTreeSet::new();
    for function in module.functions() {
        let body = function.body.as_deref().unwrap_or_default();
        for (start, end) in backward_branches(body) {
            let instructions = instructions_of(&body[start..=end]);
            if instructions.iter().any(|i| writes_memory(i)) {
                continue;
            }
            let guards: BTreeSet<&str> = (instructions.iter())
                .filter(|i| matches!(i.opcode.base.as_str(), "bra" | "ret" | "exit"))
                .filter_map(|i| i.guard.as_ref())
                .map(|guard| guard.predicate.as_str())
                .collect();
            for load in instructions.iter().filter(|i| i.opcode.base == "ld") {
                let reached = reached_from(load, &instructions);
                if reached.iter().any(|r| guards.contains(r)) {
                    lines.insert(load.ptx_line);
                }
            }
        }
    }
    lines
}

/// The instructions of `body`, labels and directives left out.
fn instructions_of(body: &[Statement]) -> Vec<&Instruction> {
    (body.iter())
        .filter_map(|s| match s {
            Statement::Instruction(i) => Some(i),
            _ => None,
        })
        .collect()
}

/// Whether an instruction may write memory another thread can see: a store, atomic or
/// reduction to any space but `.local`, or a call.
fn writes_memory(instruction: &Instruction) -> bool {
    let local = instruction.opcode.modifiers.iter().any(|m| m == "local");
    match instruction.opcode.base.as_str() {
        "st" | "atom" | "red" | "sust" | "cp" => !local,
        "call" => true,
        _ => false,
    }
}

/// The registers `load`'s destination reaches through the instructions of a loop body: its
/// own, and those written from one reached (round the loop as often as it takes).
fn reached_from<'a>(load: &'a Instruction, instructions: &[&'a Instruction]) -> BTreeSet<&'a str> {
    let mut reached: BTreeSet<&str> = destinations(load).into_iter().collect();
    loop {
        let before = reached.len();
        for instruction in instructions {
            if sources(instruction).iter().any(|r| reached.contains(r)) {
                reached.extend(destinations(instruction));
            }
        }
        if reached.len() == before {
            return reached;
        }
    }
}

/// `(label, branch)` statement indices of each branch to a label at or before it.
fn backward_branches(body: &[Statement]) -> Vec<(usize, usize)> {
    let labels: BTreeMap<&str, usize> = (body.iter().enumerate())
        .filter_map(|(i, s)| match s {
            Statement::Label(name) => Some((name.as_str(), i)),
            _ => None,
        })
        .collect();
    let mut loops = Vec::new();
    for (i, statement) in body.iter().enumerate() {
        let Statement::Instruction(instruction) = statement else {
            continue;
        };
        if instruction.opcode.base != "bra" {
            continue;
        }
        let target = instruction.operands.first().and_then(|o| match o {
            Operand::Symbol(name) => labels.get(name.as_str()).copied(),
            _ => None,
        });
        if let Some(label) = target.filter(|&label| label <= i) {
            if goes_round(&body[label..=i], &labels, label) {
                loops.push((label, i));
            }
        }
    }
    loops
}

/// Whether control that enters `range` at its label (statement `start` of the body) can reach
/// the backward branch that ends it, going only through the range's own statements. A block
/// that returns, laid out before the code that branches back to it, is no loop:
/// `$L: ret; … @%p bra $L;`.
fn goes_round(range: &[Statement], labels: &BTreeMap<&str, usize>, start: usize) -> bool {
    let end = range.len() - 1;
    let mut seen = vec![false; range.len()];
    let mut next = vec![0];
    while let Some(at) = next.pop() {
        if at == end {
            return true;
        }
        if std::mem::replace(&mut seen[at], true) {
            continue;
        }
        let Statement::Instruction(i) = &range[at] else {
            next.push(at + 1);
            continue;
        };
        let base = i.opcode.base.as_str();
        if !matches!(base, "bra" | "ret" | "exit" | "trap") || i.guard.is_some() {
            next.push(at + 1);
        }
        if base == "bra" {
            let target = i.operands.first().and_then(|o| match o {
                Operand::Symbol(name) => labels.get(name.as_str()),
                _ => None,
            });
            let inside = target
                .and_then(|&t| t.checked_sub(start))
                .filter(|&t| t <= end);
            next.extend(inside);
        }
    }
    false
}

/// Whether the loop `body` (its label first, its backward branch last) is blind.
fn is_blind(body: &[Statement]) -> bool {
    let instructions = instructions_of(body);
    if instructions.iter().any(|i| has_outside_effect(i)) {
        return false;
    }
    let changed = changed_registers(&instructions);
    instructions
        .iter()
        .filter(|i| matches!(i.opcode.base.as_str(), "bra" | "ret" | "exit"))
        .filter_map(|i| i.guard.as_ref())
        .all(|guard| !changed.contains(guard.predicate.as_str()))
}

/// Whether an instruction does, or may do, something outside its thread's registers: any
/// memory access (local ones too: a spilled counter; by opcode, so asynchronous and bulk copies
/// count too), a call, a barrier, a vote or shuffle
/// (other lanes' registers), an indirect branch. A fence does not: it changes no register, and
/// `while (!flag) __threadfence();` on a flag read once spins as blindly.
fn has_outside_effect(instruction: &Instruction) -> bool {
    matches!(
        instruction.opcode.base.as_str(),
        "ld" | "ldu"
            | "st"
            | "atom"
            | "red"
            | "call"
            | "bar"
            | "barrier"
            | "vote"
            | "shfl"
            | "match"
            | "activemask"
            | "brx"
            | "trap"
            | "suld"
            | "sust"
            | "tex"
            | "tld4"
            | "cp"
            | "mbarrier"
    )
}

/// The registers the loop changes (module doc): written by an instruction of the body that
/// reads a register the body writes (whatever it computes: a copy of an unchanged value
/// counts too, erring towards silence), or a clock.
fn changed_registers<'a>(instructions: &[&'a Instruction]) -> BTreeSet<&'a str> {
    let written: BTreeSet<&str> = instructions.iter().flat_map(|i| destinations(i)).collect();
    let mut changed: BTreeSet<&str> = BTreeSet::new();
    for instruction in instructions {
        let sources = sources(instruction);
        if sources.iter().any(|r| written.contains(r) || is_clock(r)) {
            changed.extend(destinations(instruction));
        }
    }
    changed
}

/// The registers an instruction writes: its first operand, for the instructions that have a
/// destination there (not stores, branches, exits or barriers).
fn destinations(instruction: &Instruction) -> Vec<&str> {
    let no_destination = matches!(
        instruction.opcode.base.as_str(),
        "st" | "red" | "bra" | "ret" | "exit" | "bar" | "barrier" | "membar" | "fence" | "trap"
    );
    match instruction.operands.first() {
        Some(first) if !no_destination => registers(first),
        _ => Vec::new(),
    }
}

/// The registers an instruction reads: every register of its operands but the destination.
fn sources(instruction: &Instruction) -> Vec<&str> {
    let skip = usize::from(!destinations(instruction).is_empty());
    (instruction.operands.iter().skip(skip))
        .flat_map(registers)
        .collect()
}

/// The register names in an operand (`%p|%q` gives both).
fn registers(operand: &Operand) -> Vec<&str> {
    match operand {
        Operand::Register(name) => vec![name.as_str()],
        Operand::Address { base, .. } => vec![base.as_str()],
        Operand::Vector(parts) | Operand::List(parts) => parts.iter().flat_map(registers).collect(),
        Operand::Other(text) => (text
            .split(|c: char| !(c.is_alphanumeric() || "%_.$".contains(c))))
        .filter(|t| t.starts_with('%'))
        .collect(),
        Operand::Immediate(_) | Operand::Symbol(_) => Vec::new(),
    }
}

/// Whether a special register changes on its own (`%clock`, `%clock64`, `%globaltimer`, the
/// performance counters).
fn is_clock(register: &str) -> bool {
    ["%clock", "%globaltimer", "%pm"]
        .iter()
        .any(|clock| register.starts_with(clock))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    fn loops_of(body: &str) -> Vec<Option<u32>> {
        let text = format!(
            ".version 7.0\n.target sm_70\n.address_size 64\n.file 1 \"k.cu\"\n\
             .visible .entry k(\n.param .u64 p\n)\n{{\n{body}\tret;\n}}\n"
        );
        let module = parse(&text).unwrap();
        blind_loops(&module)
            .into_iter()
            .map(|l| l.source.map(|s| s.line))
            .collect()
    }

    /// Regression (a handoff whose consumer spins on a plain `int *flag`): NVRTC read the flag
    /// once and compiled the spin to `$L: bra.uni $L;`, so every run hung, and harden said "not a
    /// memory-ordering bug (e.g. warp-synchronous code, a logic race)" without naming the loop.
    #[test]
    fn a_spin_the_compiler_left_without_its_load_is_blind() {
        let body = "\t.loc 1 11 9\n\tld.global.u32 %r3, [%rd2];\n\tsetp.eq.s32 %p4, %r3, 0;\n\
                    \t@%p4 bra $L__BB0_5;\n\tbra.uni $L__BB0_7;\n$L__BB0_5:\n\t.loc 1 11 9\n\
                    \tbra.uni $L__BB0_5;\n$L__BB0_7:\n";
        assert_eq!(loops_of(body), [Some(11)]);
        // Its guard computed before the loop, re-tested inside: still blind.
        let invariant = "\t.loc 1 5 3\n$L__BB0_1:\n\tsetp.eq.s32 %p1, %r3, 0;\n\
                         \t@%p1 bra $L__BB0_1;\n";
        assert_eq!(loops_of(invariant), [Some(5)]);
    }

    /// Regression (a sense-reversing grid barrier): NVRTC laid the kernel's `ret` block out
    /// before the code, and the early exit `@%p2 bra $L__BB0_24;` branches back to it. The
    /// statements between the label and that branch (the `ret`, a `mov`, a `setp` on a
    /// parameter) were taken for a loop that never leaves, and every timeout of the barrier's
    /// lost arrival was reported as `hang: kernel.cu:24 spins without reading memory`.
    #[test]
    fn a_return_block_laid_out_before_the_branch_to_it_is_no_loop() {
        let body = "	bra.uni $L__BB0_1;
$L__BB0_24:
	.loc 1 35 1
	ret;
$L__BB0_1:
                    	.loc 1 24 5
	mov.u32 %r1, %nctaid.x;
	setp.lt.s32 %p2, %r28, 1;
                    	@%p2 bra $L__BB0_24;
";
        assert_eq!(loops_of(body), []);
        // A return inside a loop that a branch goes round is still part of a loop.
        let around = "	.loc 1 7 3
$L__BB0_1:
	setp.eq.s32 %p1, %r3, 0;
                      	@%p1 bra $L__BB0_2;
	ret;
$L__BB0_2:
	bra.uni $L__BB0_1;
";
        assert_eq!(loops_of(around), [Some(7)]);
    }

    fn wait_lines_of(body: &str) -> Vec<usize> {
        let text = format!(
            ".version 7.0\n.target sm_70\n.address_size 64\n\
             .visible .entry k(\n.param .u64 p\n)\n{{\n{body}\tret;\n}}\n"
        );
        let module = parse(&text).unwrap();
        wait_loads(&module).into_iter().collect()
    }

    /// Peterson's lock: `while (flag[other] == 1 && *turn == other) {}` reads the flag, leaves
    /// when it is not 1, then reads `turn` and goes round while it names the other thread. Both
    /// loads decide the loop (lines 9 and 12 of the module).
    #[test]
    fn the_loads_a_spin_leaves_or_goes_round_on_are_wait_loads() {
        let body = "$L__BB0_1:\n\
                    \tld.volatile.global.u32 %r1, [%rd1];\n\
                    \tsetp.ne.s32 %p1, %r1, 1;\n\
                    \t@%p1 bra $L__BB0_3;\n\
                    \tld.volatile.global.u32 %r2, [%rd2+8];\n\
                    \tsetp.eq.s32 %p2, %r2, %r3;\n\
                    \t@%p2 bra $L__BB0_1;\n\
                    $L__BB0_3:\n";
        assert_eq!(wait_lines_of(body), [9, 12]);
    }

    /// A loop that writes memory is no wait, even where a load decides it (a counter raised
    /// until it reaches a bound: a lost update between two such threads is a race to report);
    /// a load whose value decides nothing (a payload copied in a counted loop) is no wait
    /// either.
    #[test]
    fn loads_of_a_loop_that_writes_or_that_decide_nothing_are_not_wait_loads() {
        let raising = "$L__BB0_1:\n\
                       \tld.volatile.global.u32 %r1, [%rd1];\n\
                       \tadd.s32 %r2, %r1, 1;\n\
                       \tst.volatile.global.u32 [%rd1], %r2;\n\
                       \tsetp.lt.s32 %p1, %r2, 10;\n\
                       \t@%p1 bra $L__BB0_1;\n";
        let copying = "$L__BB0_1:\n\
                       \tld.volatile.global.u32 %r1, [%rd1];\n\
                       \tadd.s32 %r4, %r4, %r1;\n\
                       \tadd.s32 %r3, %r3, 1;\n\
                       \tsetp.lt.s32 %p1, %r3, 10;\n\
                       \t@%p1 bra $L__BB0_1;\n";
        for body in [raising, copying] {
            assert!(wait_lines_of(body).is_empty(), "{body}");
        }
    }

    /// A spin that reads memory, a loop that counts, and one that waits on the clock can all
    /// leave: none is reported.
    #[test]
    fn loops_that_read_memory_count_or_wait_on_the_clock_are_not_blind() {
        let spin = "\t.loc 1 5 3\n$L__BB0_1:\n\tld.volatile.global.u32 %r1, [%rd1];\n\
                    \tsetp.eq.s32 %p1, %r1, 0;\n\t@%p1 bra $L__BB0_1;\n";
        let counting = "\t.loc 1 5 3\n$L__BB0_1:\n\tadd.s32 %r1, %r1, 1;\n\
                        \tsetp.lt.s32 %p1, %r1, %r2;\n\t@%p1 bra $L__BB0_1;\n";
        let clock = "\t.loc 1 5 3\n$L__BB0_1:\n\tmov.u32 %r1, %clock;\n\
                     \tsub.s32 %r3, %r1, %r2;\n\tsetp.lt.s32 %p1, %r3, 1000;\n\
                     \t@%p1 bra $L__BB0_1;\n";
        let forward = "\t.loc 1 5 3\n\t@%p1 bra $L__BB0_1;\n\tmov.u32 %r1, 1;\n$L__BB0_1:\n";
        for body in [spin, counting, clock, forward] {
            assert!(loops_of(body).is_empty(), "{body}");
        }
    }
}
