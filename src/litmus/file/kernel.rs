//! A litmus file as one PTX kernel that runs many instances of the test side by side, or a
//! [`Refusal`] naming the line and construct this translation cannot express.
//!
//! Layout of a launch of `n` instances: instance `k` uses blocks `k * ctas .. (k + 1) * ctas`,
//! one per CTA of the test (CTAs are taken in increasing order of GPU, then CTA number; a
//! test across GPUs asks the backend to run each block on its CTA's GPU,
//! [`Device::place_on_gpus`](crate::backend::Device::place_on_gpus)); each block has a warp
//! for each thread of the test's busiest CTA (32 threads each, but the last, which needs only
//! its lane 0), and thread `Pi` is lane 0 of the warp whose index is its rank among the test's
//! threads of its CTA; the other threads exit at once.
//! One litmus thread per warp keeps a warp from ever diverging at a barrier (threads of one warp
//! waiting at different barriers is not something PTX defines), and makes a barrier's thread
//! count mean litmus threads: a warp arrives for 32 threads, so `k` litmus threads are `32 * k`. Location `j` of instance
//! `k` is the 32-bit word `k * locations * distance + j * distance` of the memory buffer. At the
//! end each thread stores the registers the condition names into the instance's output words
//! ([`Layout::out_regs`] order). Litmus registers become `.u32` PTX registers `%P<i>_<name>`,
//! set to their initial values first (PTX registers start undefined).
//!
//! Spellings are the ones `ptxas` and the simulator's decoder both accept: qualifiers in PTX
//! order (`ld.relaxed.gpu.global.u32`), immediates moved into registers before stores and
//! atomics, `red` with acquire semantics (which PTX lacks) as an `atom` whose result is dropped,
//! `atom.sub` as an add of the negated value. Barriers are `barrier.sync`/`barrier.arrive` (not
//! `.aligned`, since the litmus threads of a block run different code); the dialect's operands
//! are Dat3M's: `bar.cta.sync a` is barrier `a`; with more operands the first is an instance
//! label PTX has no counterpart for (dropped), the second the barrier id (an immediate 0–15 or a
//! register) and a third the number of litmus threads that complete it (`32 *` that many PTX
//! threads). Without a count `sync` waits for the whole CTA, as PTX's `barrier.sync a` does, and
//! `arrive` (which PTX requires a count of) counts the litmus threads of its CTA.

use super::ast::*;
use std::collections::BTreeMap;
use std::fmt::{self, Write};
use std::path::PathBuf;
use thiserror::Error;

/// The entry point of every generated kernel.
pub const KERNEL: &str = "litmus_file";

/// A construct the runner does not support, where it is.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{}:{line}: `{construct}` is not supported: {reason}", file.display())]
pub struct Refusal {
    pub file: PathBuf,
    pub line: usize,
    pub construct: String,
    pub reason: String,
}

/// Where everything of one instance is.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// Blocks per instance: the test's CTAs.
    pub ctas: u32,
    /// The GPU of each of an instance's blocks (in block order).
    pub gpus: Vec<u32>,
    /// Threads per block: a warp for each thread of the test's busiest CTA (the last one
    /// partial, lane 0 alone).
    pub block_threads: u32,
    /// Words between two locations.
    pub distance: u32,
    /// The locations, in memory order.
    pub locations: Vec<String>,
    /// The initial value of each location.
    pub initial: Vec<u32>,
    /// The registers written to the output words, in order: `(thread, register)`.
    pub out_regs: Vec<(usize, String)>,
}

impl Layout {
    /// Words of memory one instance occupies.
    pub fn instance_words(&self) -> usize {
        self.locations.len() * self.distance as usize
    }

    /// Output words one instance writes.
    pub fn out_words(&self) -> usize {
        self.out_regs.len()
    }

    /// The word of `location` in instance `instance`.
    pub fn location_word(&self, instance: usize, location: usize) -> usize {
        instance * self.instance_words() + location * self.distance as usize
    }

    /// The memory of `instances` instances before a launch: initial values at the locations,
    /// zeros elsewhere.
    pub fn initial_memory(&self, instances: usize) -> Vec<u32> {
        let mut words = vec![0; instances * self.instance_words()];
        for k in 0..instances {
            for (j, v) in self.initial.iter().enumerate() {
                words[self.location_word(k, j)] = *v;
            }
        }
        words
    }
}

/// A translated test.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    pub ptx: String,
    pub layout: Layout,
}

/// Translates `test` with its locations `distance` words apart (at least 1).
pub fn translate(test: &LitmusFile, distance: u32) -> Result<Kernel, Refusal> {
    let placement = Placement::of(test)?;
    let initial = location_values(test)?;
    let observed = test.observed();
    let out_regs: Vec<(usize, String)> = observed
        .iter()
        .filter_map(|o| match o {
            Observed::Reg { thread, reg } => Some((*thread, reg.clone())),
            Observed::Loc(_) => None,
        })
        .collect();
    let layout = Layout {
        ctas: placement.ctas,
        gpus: placement.per_cta.keys().map(|cta| cta.gpu).collect(),
        block_threads: placement.block_threads,
        distance: distance.max(1),
        locations: initial.iter().map(|(l, _)| l.clone()).collect(),
        initial: initial.iter().map(|(_, v)| *v).collect(),
        out_regs,
    };
    let mut w = Writer {
        test,
        layout: &layout,
        text: String::new(),
    };
    w.module(&placement)?;
    Ok(Kernel {
        ptx: w.text,
        layout,
    })
}

/// Refuses `construct` of `test`, at `line`, for `reason`.
pub(crate) fn refuse(
    test: &LitmusFile,
    line: usize,
    construct: impl Into<String>,
    reason: impl Into<String>,
) -> Refusal {
    Refusal {
        file: test.path.clone(),
        line,
        construct: construct.into(),
        reason: reason.into(),
    }
}

/// Threads of a warp: each litmus thread is lane 0 of a warp of its own.
pub const WARP: u32 = 32;

/// Which block-local CTA index and warp each litmus thread gets.
struct Placement {
    ctas: u32,
    block_threads: u32,
    /// Per thread: (CTA index within the instance, warp index within the block).
    slots: Vec<(u32, u32)>,
    /// Litmus threads of each CTA, in block order.
    per_cta: BTreeMap<CtaId, u32>,
}

impl Placement {
    fn of(test: &LitmusFile) -> Result<Placement, Refusal> {
        let mut ctas: BTreeMap<CtaId, u32> = BTreeMap::new();
        for t in &test.threads {
            if t.cta.is_none() {
                return Err(refuse(
                    test,
                    test.header_line,
                    format!("P{}", t.id),
                    "a thread without placement (`P0@cta 0,gpu 0`)",
                ));
            }
            *ctas.entry(t.cta_id()).or_default() += 1;
        }
        let index: BTreeMap<CtaId, u32> = ctas
            .keys()
            .enumerate()
            .map(|(i, c)| (*c, i as u32))
            .collect();
        let mut rank: BTreeMap<CtaId, u32> = BTreeMap::new();
        let slots = test
            .threads
            .iter()
            .map(|t| {
                let cta = t.cta_id();
                let r = rank.entry(cta).or_default();
                *r += 1;
                (index[&cta], *r - 1)
            })
            .collect();
        Ok(Placement {
            ctas: ctas.len() as u32,
            block_threads: WARP * (ctas.values().copied().max().unwrap_or(1) - 1) + 1,
            slots,
            per_cta: ctas,
        })
    }
}

fn init_line(test: &LitmusFile, name: &str) -> usize {
    test.init
        .iter()
        .find(|i| i.name == name)
        .map_or(1, |i| i.line)
}

/// Every location with its initial value.
fn location_values(test: &LitmusFile) -> Result<Vec<(String, u32)>, Refusal> {
    test.locations()
        .into_iter()
        .map(|loc| match test.initial(&loc) {
            None => Ok((loc, 0)),
            Some(InitValue::Int(v)) => Ok((loc, *v as u32)),
            Some(InitValue::Address(a)) => {
                let line = test
                    .init
                    .iter()
                    .find(|i| i.name == loc)
                    .map_or(1, |i| i.line);
                Err(refuse(
                    test,
                    line,
                    format!("{loc}={a}"),
                    "initial values that are addresses",
                ))
            }
            Some(InitValue::Alias { proxy, target }) => Err(refuse(
                test,
                init_line(test, &loc),
                format!("{loc} @ {proxy} aliases {target}"),
                "proxy aliases (a location seen through another proxy)",
            )),
        })
        .collect()
}

/// The initial value of each register of `thread` (every register it uses or the condition or
/// init block names).
fn register_values(test: &LitmusFile, thread: &Thread) -> Result<BTreeMap<String, u32>, Refusal> {
    let mut regs = BTreeMap::new();
    for step in &thread.code {
        for r in step.instr.registers() {
            regs.insert(r.to_string(), 0);
        }
    }
    for o in test.observed() {
        if let Observed::Reg { thread: t, reg } = o {
            if t == thread.id {
                regs.insert(reg, 0);
            }
        }
    }
    regs.extend(initial_registers(test, thread)?);
    Ok(regs)
}

/// The registers `test` initialises in `thread`, with their values; a register initialised to
/// an address is refused.
pub(crate) fn initial_registers(
    test: &LitmusFile,
    thread: &Thread,
) -> Result<Vec<(String, u32)>, Refusal> {
    let inits = test.init.iter().filter(|i| i.thread == Some(thread.id));
    inits
        .map(|init| match &init.value {
            InitValue::Int(v) => Ok((init.name.clone(), *v as u32)),
            InitValue::Address(a) => Err(refuse(
                test,
                init.line,
                format!("P{}:{}={a}", thread.id, init.name),
                "initial values that are addresses",
            )),
            InitValue::Alias { .. } => unreachable!("aliases are locations, not registers"),
        })
        .collect()
}

/// A barrier step in PTX terms: the barrier id and how many litmus threads complete it
/// (`None`: the whole CTA).
struct BarrierStep<'v> {
    id: &'v Value,
    count: Option<&'v Value>,
}

/// The PTX barrier of a `bar.cta.sync`/`bar.cta.arrive` step (Dat3M's operands: `id`, or
/// `instance, id[, count]`), or why it has none.
fn barrier_step<'v>(
    test: &LitmusFile,
    step: &Step,
    operands: &'v [Value],
) -> Result<BarrierStep<'v>, Refusal> {
    let refused = |why: &str| Err(refuse(test, step.line, step.text.clone(), why));
    let (id, count) = match operands {
        [id] => (id, None),
        [_instance, id] => (id, None),
        [_instance, id, count] => (id, Some(count)),
        _ => return refused("a barrier with more than three operands (instance, id, count)"),
    };
    if let Value::Imm(id) = id {
        if !(0..16).contains(id) {
            return refused("barrier ids go from 0 to 15");
        }
    }
    if let Some(Value::Imm(n)) = count {
        if *n < 1 || *n > i64::from(u32::MAX / WARP) {
            return refused("a barrier's thread count must be from 1 to 2^27 litmus threads");
        }
    }
    Ok(BarrierStep { id, count })
}

/// Refuses the first barrier step of `test` that has no PTX barrier.
fn check_barriers(test: &LitmusFile) -> Result<(), Refusal> {
    for t in &test.threads {
        for step in &t.code {
            if let Instr::Barrier { operands, .. } = &step.instr {
                barrier_step(test, step, operands)?;
            }
        }
    }
    Ok(())
}

struct Writer<'a> {
    test: &'a LitmusFile,
    layout: &'a Layout,
    text: String,
}

/// Scratch registers for immediates and dropped results.
const SCRATCH: [&str; 3] = ["%s0", "%s1", "%s2"];

impl Writer<'_> {
    fn line(&mut self, args: fmt::Arguments) {
        let _ = self.text.write_fmt(args);
        self.text.push('\n');
    }

    fn module(&mut self, placement: &Placement) -> Result<(), Refusal> {
        check_barriers(self.test)?;
        let mut regs = Vec::new();
        for t in &self.test.threads {
            for step in &t.code {
                if let Instr::Unknown(text) = &step.instr {
                    let reason = if text.contains("proxy") {
                        "proxy operations"
                    } else {
                        "an instruction this runner does not know"
                    };
                    return Err(refuse(self.test, step.line, step.text.clone(), reason));
                }
            }
            regs.push(register_values(self.test, t)?);
        }
        self.preamble(&regs);
        self.prologue(placement);
        for (t, values) in self.test.threads.iter().zip(&regs) {
            let cta_threads = placement.per_cta[&t.cta_id()];
            self.thread(t, values, cta_threads);
        }
        self.text.push_str("$DONE:\n\tret;\n}\n");
        Ok(())
    }

    fn preamble(&mut self, regs: &[BTreeMap<String, u32>]) {
        let l = self.layout;
        self.line(format_args!(
            "// gpuwmm litmus file {}: {} CTA(s) of {} thread(s) per instance, {} location(s) {} words apart",
            self.test.name,
            l.ctas,
            l.block_threads,
            l.locations.len(),
            l.distance
        ));
        for (j, loc) in l.locations.iter().enumerate() {
            self.line(format_args!("// {loc}: word {}", j * l.distance as usize));
        }
        for (k, (t, r)) in l.out_regs.iter().enumerate() {
            self.line(format_args!("// out {k}: P{t}:{r}"));
        }
        self.line(format_args!(
            ".version 7.8\n.target sm_70\n.address_size 64\n\n\
             .visible .entry {KERNEL}(\n\t.param .u64 {KERNEL}_param_mem,\n\t.param .u64 {KERNEL}_param_out,\n\t.param .u32 {KERNEL}_param_instances\n)\n{{"
        ));
        self.line(format_args!("\t.reg .pred \t%pr, %pb;"));
        self.line(format_args!(
            "\t.reg .u32 \t%h_tid, %h_cta, %h_inst, %h_local, %h_role, %h_n;"
        ));
        self.line(format_args!("\t.reg .u64 \t%h_mem, %h_out, %h_off;"));
        self.line(format_args!("\t.reg .u32 \t{};", SCRATCH.join(", ")));
        for (t, values) in self.test.threads.iter().zip(regs) {
            if !values.is_empty() {
                let names: Vec<String> = values.keys().map(|r| reg_name(t.id, r)).collect();
                self.line(format_args!("\t.reg .u32 \t{};", names.join(", ")));
            }
        }
    }

    /// Finds the instance and the role of this thread, and jumps to the role's code; lanes
    /// other than 0 exit first thing.
    fn prologue(&mut self, placement: &Placement) {
        let l = self.layout;
        let instance_bytes = l.instance_words() * 4;
        let out_bytes = l.out_words() * 4;
        self.line(format_args!(
            "\tmov.u32 \t%h_tid, %tid.x;\n\
             \tand.b32 \t%h_role, %h_tid, {lane_mask};\n\
             \tsetp.ne.u32 \t%pr, %h_role, 0;\n\
             \t@%pr bra \t$DONE;\n\
             \tmov.u32 \t%h_cta, %ctaid.x;\n\
             \tdiv.u32 \t%h_inst, %h_cta, {ctas};\n\
             \trem.u32 \t%h_local, %h_cta, {ctas};\n\
             \tld.param.u32 \t%h_n, [{KERNEL}_param_instances];\n\
             \tsetp.ge.u32 \t%pr, %h_inst, %h_n;\n\
             \t@%pr bra \t$DONE;\n\
             \tld.param.u64 \t%h_mem, [{KERNEL}_param_mem];\n\
             \tcvta.to.global.u64 \t%h_mem, %h_mem;\n\
             \tmul.wide.u32 \t%h_off, %h_inst, {instance_bytes};\n\
             \tadd.s64 \t%h_mem, %h_mem, %h_off;\n\
             \tld.param.u64 \t%h_out, [{KERNEL}_param_out];\n\
             \tcvta.to.global.u64 \t%h_out, %h_out;\n\
             \tmul.wide.u32 \t%h_off, %h_inst, {out_bytes};\n\
             \tadd.s64 \t%h_out, %h_out, %h_off;\n\
             \tmul.lo.u32 \t%h_role, %h_local, {threads};\n\
             \tadd.u32 \t%h_role, %h_role, %h_tid;",
            ctas = l.ctas,
            threads = l.block_threads,
            lane_mask = WARP - 1,
        ));
        for (i, (cta, warp)) in placement.slots.iter().enumerate() {
            let role = cta * l.block_threads + warp * WARP;
            self.line(format_args!(
                "\tsetp.eq.u32 \t%pr, %h_role, {role};\n\t@%pr bra \t$P{i};"
            ));
        }
        self.line(format_args!("\tbra.uni \t$DONE;"));
    }

    /// The code of litmus thread `t`, one of the `cta_threads` of its CTA.
    fn thread(&mut self, t: &Thread, values: &BTreeMap<String, u32>, cta_threads: u32) {
        self.line(format_args!("$P{}:", t.id));
        for (r, v) in values {
            self.line(format_args!("\tmov.u32 \t{}, {v};", reg_name(t.id, r)));
        }
        for step in &t.code {
            self.line(format_args!("\t// line {}", step.line));
            self.instr(t.id, step, cta_threads);
        }
        for (k, (thread, r)) in self.layout.out_regs.iter().enumerate() {
            if *thread == t.id {
                self.line(format_args!(
                    "\tst.global.u32 \t[%h_out+{}], {};",
                    k * 4,
                    reg_name(t.id, r)
                ));
            }
        }
        self.line(format_args!("\tret;"));
    }

    fn address(&self, loc: &str) -> String {
        let j = self
            .layout
            .locations
            .iter()
            .position(|l| l == loc)
            .unwrap_or_default();
        format!("[%h_mem+{}]", j * self.layout.distance as usize * 4)
    }

    /// A register holding `v`: its own, or `scratch` after moving the immediate there.
    fn in_register(&mut self, thread: usize, v: &Value, scratch: &str) -> String {
        match v {
            Value::Reg(r) => reg_name(thread, r),
            Value::Imm(i) => {
                self.line(format_args!("\tmov.u32 \t{scratch}, {};", *i as u32));
                scratch.to_string()
            }
        }
    }

    fn operand(&self, thread: usize, v: &Value) -> String {
        match v {
            Value::Reg(r) => reg_name(thread, r),
            Value::Imm(i) => (*i as u32).to_string(),
        }
    }

    fn instr(&mut self, t: usize, step: &Step, cta_threads: u32) {
        match &step.instr {
            Instr::Load { sem, dst, loc } => {
                let q = sem.qualifiers("acquire");
                let addr = self.address(loc);
                self.line(format_args!(
                    "\tld{q}.global.u32 \t{}, {addr};",
                    reg_name(t, dst)
                ));
            }
            Instr::Move { dst, value } => self.line(format_args!(
                "\tmov.u32 \t{}, {};",
                reg_name(t, dst),
                *value as u32
            )),
            Instr::Store { sem, loc, value } => {
                let q = sem.qualifiers("release");
                let v = self.in_register(t, value, SCRATCH[0]);
                let addr = self.address(loc);
                self.line(format_args!("\tst{q}.global.u32 \t{addr}, {v};"));
            }
            Instr::Fence(f) => {
                let text = match f {
                    Fence::Sc(s) => format!("fence.sc.{}", s.name()),
                    Fence::AcqRel(s) => format!("fence.acq_rel.{}", s.name()),
                    Fence::Membar(Scope::Gpu) => "membar.gl".into(),
                    Fence::Membar(s) => format!("membar.{}", s.name()),
                };
                self.line(format_args!("\t{text};"));
            }
            instr @ (Instr::Atom { .. } | Instr::Red { .. }) => {
                let Some(rmw) = instr.rmw() else {
                    unreachable!("atom and red are read-modify-writes")
                };
                // `red` cannot acquire: an acquiring one is an `atom` into a scratch register.
                let dst = match (rmw.dst, rmw.sem) {
                    (Some(d), _) => Some(reg_name(t, d)),
                    (None, RmwSem::Acquire | RmwSem::AcqRel) => Some(SCRATCH[2].to_string()),
                    (None, RmwSem::Relaxed | RmwSem::Release) => None,
                };
                self.rmw(t, rmw, dst.as_deref());
            }
            Instr::Barrier { arrive, operands } => {
                if let Ok(bar) = barrier_step(self.test, step, operands) {
                    self.barrier(t, &bar, *arrive, cta_threads);
                }
            }
            Instr::Branch { cmp, a, b, target } => {
                let a = self.in_register(t, a, SCRATCH[0]);
                let b = self.operand(t, b);
                self.line(format_args!(
                    "\tsetp.{}.s32 \t%pb, {a}, {b};\n\t@%pb bra \t$P{t}_{target};",
                    cmp.name()
                ));
            }
            Instr::Goto(target) => self.line(format_args!("\tbra \t$P{t}_{target};")),
            Instr::Label(label) => self.line(format_args!("$P{t}_{label}:")),
            Instr::Arith { op, dst, a, b } => {
                let opcode = match op {
                    Arith::Add => "add.s32",
                    Arith::Sub => "sub.s32",
                    Arith::Mul => "mul.lo.s32",
                    Arith::Div => "div.s32",
                };
                let a = self.in_register(t, a, SCRATCH[0]);
                let b = self.operand(t, b);
                self.line(format_args!("\t{opcode} \t{}, {a}, {b};", reg_name(t, dst)));
            }
            Instr::Unknown(_) => {}
        }
    }

    /// `barrier.sync id{, count}` or `barrier.arrive id, count`, the count in PTX threads (a
    /// warp, 32 of them, per litmus thread); an arrive without a count counts the CTA's
    /// `cta_threads`.
    fn barrier(&mut self, t: usize, bar: &BarrierStep, arrive: bool, cta_threads: u32) {
        let id = self.operand(t, bar.id);
        let count = match (bar.count, arrive) {
            (Some(Value::Imm(n)), _) => Some((*n as u32 * WARP).to_string()),
            (Some(Value::Reg(r)), _) => {
                self.line(format_args!(
                    "\tmul.lo.u32 \t{}, {}, {WARP};",
                    SCRATCH[1],
                    reg_name(t, r)
                ));
                Some(SCRATCH[1].to_string())
            }
            (None, true) => Some((cta_threads * WARP).to_string()),
            (None, false) => None,
        };
        let op = if arrive { "arrive" } else { "sync" };
        match count {
            Some(n) => self.line(format_args!("\tbarrier.{op} \t{id}, {n};")),
            None => self.line(format_args!("\tbarrier.{op} \t{id};")),
        }
    }

    /// `rmw` as an `atom` into the PTX register `dst`, or a `red` without one.
    fn rmw(&mut self, t: usize, rmw: Rmw<'_>, dst: Option<&str>) {
        let base = if dst.is_some() { "atom" } else { "red" };
        let (name, ty) = match rmw.op {
            RmwOp::Add | RmwOp::Sub => ("add", "u32"),
            RmwOp::Exch => ("exch", "b32"),
            RmwOp::Cas => ("cas", "b32"),
            RmwOp::Inc => ("inc", "u32"),
            RmwOp::Dec => ("dec", "u32"),
            RmwOp::And => ("and", "b32"),
            RmwOp::Or => ("or", "b32"),
            RmwOp::Xor => ("xor", "b32"),
            RmwOp::Min => ("min", "s32"),
            RmwOp::Max => ("max", "s32"),
        };
        let mut args = Vec::new();
        for (k, v) in rmw.operands.iter().enumerate() {
            let negated = match (rmw.op, v) {
                (RmwOp::Sub, Value::Imm(i)) => Some(Value::Imm(i.wrapping_neg())),
                (RmwOp::Sub, Value::Reg(r)) => {
                    self.line(format_args!(
                        "\tneg.s32 \t{}, {};",
                        SCRATCH[k],
                        reg_name(t, r)
                    ));
                    args.push(SCRATCH[k].to_string());
                    continue;
                }
                _ => None,
            };
            let reg = self.in_register(t, negated.as_ref().unwrap_or(v), SCRATCH[k]);
            args.push(reg);
        }
        let addr = self.address(rmw.loc);
        let dst = dst.map_or_else(String::new, |d| format!("{d}, "));
        self.line(format_args!(
            "\t{base}.{}.{}.global.{name}.{ty} \t{dst}{addr}, {};",
            rmw.sem.name(),
            rmw.scope.name(),
            args.join(", ")
        ));
    }
}

/// The PTX register of litmus register `reg` of thread `thread` (`%r1` and `r1`, both legal and
/// distinct in a litmus file, get distinct registers).
pub fn reg_name(thread: usize, reg: &str) -> String {
    match reg.strip_prefix('%') {
        Some(name) => format!("%P{thread}p_{name}"),
        None => format!("%P{thread}_{reg}"),
    }
}
