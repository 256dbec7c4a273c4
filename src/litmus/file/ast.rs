//! What a litmus file says, as data: the threads and where they run, their instructions with the
//! line each came from, the initial state and the final condition.
//!
//! The parser fills it and the translator reads it; nothing here knows about PTX text or the
//! backends. The condition is evaluated here too, over a final state laid out as
//! [`LitmusFile::observed`] says, so that the runner and the tests agree on what a state means.

use std::fmt;
use std::path::PathBuf;

/// A scope qualifier; litmus files use `.cta`, `.gpu` and `.sys` (the parser refuses
/// `.cluster`).
pub use crate::ptx::Scope;

/// The semantics of a load or a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessSem {
    Weak,
    /// `.volatile`: relaxed at system scope in the PTX memory model.
    Volatile,
    Relaxed(Scope),
    /// `.acquire` on a load, `.release` on a store.
    Ordered(Scope),
}

impl AccessSem {
    /// The PTX qualifiers (`.relaxed.gpu`; empty for a weak access), `ordered` naming the
    /// ordering one (`acquire` for a load, `release` for a store).
    pub fn qualifiers(self, ordered: &str) -> String {
        match self {
            AccessSem::Weak => String::new(),
            AccessSem::Volatile => ".volatile".into(),
            AccessSem::Relaxed(s) => format!(".relaxed.{}", s.name()),
            AccessSem::Ordered(s) => format!(".{ordered}.{}", s.name()),
        }
    }
}

/// The semantics of an `atom` or `red`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RmwSem {
    Relaxed,
    Acquire,
    Release,
    AcqRel,
}

impl RmwSem {
    pub fn from_word(word: &str) -> Option<RmwSem> {
        match word {
            "relaxed" => Some(RmwSem::Relaxed),
            "acquire" => Some(RmwSem::Acquire),
            "release" => Some(RmwSem::Release),
            "acq_rel" => Some(RmwSem::AcqRel),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            RmwSem::Relaxed => "relaxed",
            RmwSem::Acquire => "acquire",
            RmwSem::Release => "release",
            RmwSem::AcqRel => "acq_rel",
        }
    }
}

/// The operation of an `atom` or `red`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RmwOp {
    Add,
    Sub,
    Exch,
    Cas,
    Inc,
    Dec,
    And,
    Or,
    Xor,
    Min,
    Max,
}

impl RmwOp {
    /// The operation a word names; `plus` and `minus` are the spellings of older files of
    /// Dat3M's suite (`atom.acquire.gpu.plus r1, in, 1`).
    pub fn from_word(word: &str) -> Option<RmwOp> {
        Some(match word {
            "add" | "plus" => RmwOp::Add,
            "sub" | "minus" => RmwOp::Sub,
            "exch" => RmwOp::Exch,
            "cas" => RmwOp::Cas,
            "inc" => RmwOp::Inc,
            "dec" => RmwOp::Dec,
            "and" => RmwOp::And,
            "or" => RmwOp::Or,
            "xor" => RmwOp::Xor,
            "min" => RmwOp::Min,
            "max" => RmwOp::Max,
            _ => return None,
        })
    }

    /// Operands after the location: two for `cas` (compare, new value), one otherwise.
    pub fn operand_count(self) -> usize {
        if self == RmwOp::Cas {
            2
        } else {
            1
        }
    }
}

/// A fence instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fence {
    Sc(Scope),
    AcqRel(Scope),
    /// `membar.cta`, `membar.gl` (gpu scope) or `membar.sys`: `fence.sc` at that scope.
    Membar(Scope),
}

/// The comparison of a conditional branch: PTX's `setp` operator (a litmus file's `beq`, `bne`,
/// `blt`, `ble`, `bgt` and `bge` use `eq` to `ge`, on signed 32-bit values).
pub use crate::backend::sim::Cmp;

/// Register arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arith {
    Add,
    Sub,
    Mul,
    Div,
}

/// A register or an integer constant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Reg(String),
    Imm(i64),
}

/// One instruction of one thread.
#[derive(Debug, Clone, PartialEq)]
pub enum Instr {
    Load {
        sem: AccessSem,
        dst: String,
        loc: String,
    },
    /// `ld r, 5`: a constant into a register.
    Move {
        dst: String,
        value: i64,
    },
    Store {
        sem: AccessSem,
        loc: String,
        value: Value,
    },
    Fence(Fence),
    Atom {
        sem: RmwSem,
        scope: Scope,
        op: RmwOp,
        dst: String,
        loc: String,
        operands: Vec<Value>,
    },
    Red {
        sem: RmwSem,
        scope: Scope,
        op: RmwOp,
        loc: String,
        value: Value,
    },
    /// `bar.cta.sync a{, b...}` or `bar.cta.arrive a, b`, operands as written.
    Barrier {
        arrive: bool,
        operands: Vec<Value>,
    },
    Branch {
        cmp: Cmp,
        a: Value,
        b: Value,
        target: String,
    },
    Goto(String),
    Label(String),
    Arith {
        op: Arith,
        dst: String,
        a: Value,
        b: Value,
    },
    /// Something the dialect may have but this runner does not know (proxy operations, other
    /// opcodes): kept, as written, so the translator can refuse the test naming it.
    Unknown(String),
}

/// An instruction and the line of the file it is on.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub line: usize,
    /// The instruction as written in its cell.
    pub text: String,
    pub instr: Instr,
}

/// Where a thread runs: `P1@cta 1,gpu 0`.
#[derive(Debug, Clone, PartialEq)]
pub struct Thread {
    /// The `n` of `Pn`, equal to its column.
    pub id: usize,
    /// `None` when the header gives no placement (`P0` alone).
    pub cta: Option<u32>,
    pub gpu: u32,
    pub code: Vec<Step>,
}

/// A CTA of a test. CTA numbers count per GPU: `cta 0,gpu 0` and `cta 0,gpu 1` are two CTAs.
/// Ordered by GPU, then number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CtaId {
    pub gpu: u32,
    pub cta: u32,
}

impl Thread {
    /// The CTA the thread runs in (CTA 0 of its GPU when the header gives none).
    pub fn cta_id(&self) -> CtaId {
        CtaId {
            gpu: self.gpu,
            cta: self.cta.unwrap_or_default(),
        }
    }
}

/// An initial value: an integer, or (herd style) the address of a location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitValue {
    Int(i64),
    Address(String),
    /// `x @ texture aliases y`: `x` is location `y` seen through another proxy (texture,
    /// surface, constant).
    Alias {
        proxy: String,
        target: String,
    },
}

/// One entry of the init block.
#[derive(Debug, Clone, PartialEq)]
pub struct Init {
    pub line: usize,
    /// `Some(n)` for `Pn:r = v`, `None` for a location.
    pub thread: Option<usize>,
    pub name: String,
    pub value: InitValue,
}

/// A term of the final condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Term {
    Reg { thread: usize, reg: String },
    Loc(String),
    Const(i64),
}

/// The proposition of the final condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    True,
    False,
    /// `a == b` (`equal`) or `a != b`.
    Compare {
        equal: bool,
        a: Term,
        b: Term,
    },
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
}

/// `exists`, `~exists` or `forall`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantifier {
    Exists,
    NotExists,
    Forall,
}

impl Quantifier {
    pub fn keyword(self) -> &'static str {
        match self {
            Quantifier::Exists => "exists",
            Quantifier::NotExists => "~exists",
            Quantifier::Forall => "forall",
        }
    }

    /// The kind herd's `Test` line gives a test of this quantifier.
    pub fn herd_kind(self) -> &'static str {
        match self {
            Quantifier::Exists => "Allowed",
            Quantifier::NotExists => "Forbidden",
            Quantifier::Forall => "Required",
        }
    }
}

/// The final condition and its line.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub line: usize,
    pub quantifier: Quantifier,
    pub expr: Expr,
}

impl Condition {
    /// Whether executions ending in a state count as reaching "the" state of the test: the one
    /// `expected.csv` rules on. For `exists` and `~exists` that is a state satisfying the
    /// proposition, for `forall` one violating it.
    pub fn targets(&self, satisfied: bool) -> bool {
        match self.quantifier {
            Quantifier::Exists | Quantifier::NotExists => satisfied,
            Quantifier::Forall => !satisfied,
        }
    }

    /// Whether the proposition holds of `state`, whose values are those of `observed` in order
    /// (anything not observed reads as 0).
    pub fn holds(&self, observed: &[Observed], state: &[u32]) -> bool {
        self.expr.eval(&|term| match term {
            Term::Const(c) => *c as u32,
            Term::Reg { thread, reg } => lookup(
                observed,
                state,
                &Observed::Reg {
                    thread: *thread,
                    reg: reg.clone(),
                },
            ),
            Term::Loc(name) => lookup(observed, state, &Observed::Loc(name.clone())),
        })
    }

    /// herd's `Ok`: the condition holds of the set of observed final states, given how many
    /// executions satisfy the proposition (`positive`) and how many do not (`negative`).
    pub fn validated(&self, positive: u64, negative: u64) -> bool {
        match self.quantifier {
            Quantifier::Exists => positive > 0,
            Quantifier::NotExists => positive == 0,
            Quantifier::Forall => negative == 0,
        }
    }
}

/// Something a final state holds: a thread's register or a location's value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Observed {
    Reg { thread: usize, reg: String },
    Loc(String),
}

impl fmt::Display for Observed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Observed::Reg { thread, reg } => write!(f, "P{thread}:{reg}"),
            Observed::Loc(name) => f.write_str(name),
        }
    }
}

/// One final state as `P1:r0=1; x=2;`: the value of each of `observed`, as a signed 32-bit
/// integer.
pub fn state_text(observed: &[Observed], state: &[u32]) -> String {
    observed
        .iter()
        .zip(state)
        .map(|(o, v)| format!("{o}={}; ", *v as i32))
        .collect::<String>()
        .trim_end()
        .to_string()
}

/// A parsed litmus file.
#[derive(Debug, Clone, PartialEq)]
pub struct LitmusFile {
    /// The file, as named to the parser (for messages).
    pub path: PathBuf,
    /// The name after `PTX`.
    pub name: String,
    /// The quoted comments, joined by newlines.
    pub comment: Option<String>,
    pub init: Vec<Init>,
    pub threads: Vec<Thread>,
    /// The line of the thread header (`P0@cta 0,gpu 0 | ...`).
    pub header_line: usize,
    pub condition: Condition,
}

impl LitmusFile {
    /// Whether a thread waits at or arrives on a barrier.
    pub fn has_barriers(&self) -> bool {
        (self.threads.iter())
            .flat_map(|t| &t.code)
            .any(|step| matches!(step.instr, Instr::Barrier { .. }))
    }

    /// Every location: in the init block, the code, then the condition, in order of first use.
    pub fn locations(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut add = |name: &str| {
            if !out.iter().any(|l| l == name) {
                out.push(name.to_string());
            }
        };
        for i in self.init.iter().filter(|i| i.thread.is_none()) {
            add(&i.name);
        }
        for step in self.threads.iter().flat_map(|t| &t.code) {
            if let Some(loc) = step.instr.location() {
                add(loc);
            }
        }
        for term in self.condition.expr.terms() {
            if let Term::Loc(name) = term {
                add(name);
            }
        }
        out
    }

    /// What a final state holds, in order: the registers the condition names (by thread, then
    /// register name), then the locations it names (herd's default set of observed values).
    pub fn observed(&self) -> Vec<Observed> {
        let mut regs = Vec::new();
        let mut locs = Vec::new();
        for term in self.condition.expr.terms() {
            match term {
                Term::Reg { thread, reg } => regs.push(Observed::Reg {
                    thread: *thread,
                    reg: reg.clone(),
                }),
                Term::Loc(name) => locs.push(Observed::Loc(name.clone())),
                Term::Const(_) => {}
            }
        }
        regs.sort();
        regs.dedup();
        locs.sort();
        locs.dedup();
        regs.extend(locs);
        regs
    }

    /// The initial value of a location (0 unless the init block says otherwise).
    pub fn initial(&self, loc: &str) -> Option<&InitValue> {
        self.init
            .iter()
            .rev()
            .find(|i| i.thread.is_none() && i.name == loc)
            .map(|i| &i.value)
    }

    /// Whether the proposition holds of a final state laid out as [`Self::observed`].
    pub fn satisfies(&self, observed: &[Observed], state: &[u32]) -> bool {
        self.condition.holds(observed, state)
    }
}

fn lookup(observed: &[Observed], state: &[u32], key: &Observed) -> u32 {
    observed
        .iter()
        .position(|o| o == key)
        .and_then(|i| state.get(i).copied())
        .unwrap_or(0)
}

/// An `atom` or a `red` as one read-modify-write: a `red` is an `atom` whose old value no
/// register receives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rmw<'a> {
    pub sem: RmwSem,
    pub scope: Scope,
    pub op: RmwOp,
    /// The register that receives the old value (`None` for `red`).
    pub dst: Option<&'a str>,
    pub loc: &'a str,
    pub operands: &'a [Value],
}

impl Instr {
    /// This instruction as a read-modify-write, when it is an `atom` or a `red`.
    pub fn rmw(&self) -> Option<Rmw<'_>> {
        let (sem, scope, op, dst, loc, operands) = match self {
            Instr::Atom {
                sem,
                scope,
                op,
                dst,
                loc,
                operands,
            } => (sem, scope, op, Some(dst.as_str()), loc, operands.as_slice()),
            Instr::Red {
                sem,
                scope,
                op,
                loc,
                value,
            } => (sem, scope, op, None, loc, std::slice::from_ref(value)),
            _ => return None,
        };
        Some(Rmw {
            sem: *sem,
            scope: *scope,
            op: *op,
            dst,
            loc,
            operands,
        })
    }

    /// The location this instruction accesses, if any.
    pub fn location(&self) -> Option<&str> {
        match self {
            Instr::Load { loc, .. }
            | Instr::Store { loc, .. }
            | Instr::Atom { loc, .. }
            | Instr::Red { loc, .. } => Some(loc),
            _ => None,
        }
    }

    /// The registers this instruction reads or writes.
    pub fn registers(&self) -> Vec<&str> {
        fn value(v: &Value) -> Option<&str> {
            match v {
                Value::Reg(r) => Some(r.as_str()),
                Value::Imm(_) => None,
            }
        }
        let mut out = Vec::new();
        match self {
            Instr::Load { dst, .. } | Instr::Move { dst, .. } => out.push(dst.as_str()),
            Instr::Store { value: v, .. } | Instr::Red { value: v, .. } => out.extend(value(v)),
            Instr::Atom { dst, operands, .. } => {
                out.push(dst.as_str());
                out.extend(operands.iter().filter_map(value));
            }
            Instr::Barrier { operands, .. } => out.extend(operands.iter().filter_map(value)),
            Instr::Branch { a, b, .. } => out.extend([a, b].into_iter().filter_map(value)),
            Instr::Arith { dst, a, b, .. } => {
                out.push(dst.as_str());
                out.extend([a, b].into_iter().filter_map(value));
            }
            Instr::Fence(_) | Instr::Goto(_) | Instr::Label(_) | Instr::Unknown(_) => {}
        }
        out
    }
}

impl Expr {
    /// Every term, left to right.
    pub fn terms(&self) -> Vec<&Term> {
        match self {
            Expr::True | Expr::False => Vec::new(),
            Expr::Compare { a, b, .. } => vec![a, b],
            Expr::Not(e) => e.terms(),
            Expr::And(a, b) | Expr::Or(a, b) => {
                let mut out = a.terms();
                out.extend(b.terms());
                out
            }
        }
    }

    /// Evaluates with `value` giving each term's 32-bit value (constants wrap to 32 bits, so
    /// `-1` equals a register holding `0xffffffff`).
    pub fn eval(&self, value: &dyn Fn(&Term) -> u32) -> bool {
        match self {
            Expr::True => true,
            Expr::False => false,
            Expr::Compare { equal, a, b } => (value(a) == value(b)) == *equal,
            Expr::Not(e) => !e.eval(value),
            Expr::And(a, b) => a.eval(value) && b.eval(value),
            Expr::Or(a, b) => a.eval(value) || b.eval(value),
        }
    }
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Term::Reg { thread, reg } => write!(f, "P{thread}:{reg}"),
            Term::Loc(name) => f.write_str(name),
            Term::Const(c) => write!(f, "{c}"),
        }
    }
}

impl fmt::Display for Expr {
    /// With the dialect's operators; a chain of one connective has no parentheses, a
    /// connective inside the other one has them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::True => f.write_str("true"),
            Expr::False => f.write_str("false"),
            Expr::Compare { equal, a, b } => {
                write!(f, "{a} {} {b}", if *equal { "==" } else { "!=" })
            }
            Expr::Not(e) => write!(f, "~({e})"),
            Expr::And(a, b) => write!(f, "{} /\\ {}", nested(a, true), nested(b, true)),
            Expr::Or(a, b) => write!(f, "{} \\/ {}", nested(a, false), nested(b, false)),
        }
    }
}

/// An operand of `/\` (`in_and`) or `\/`: parenthesised when it is the other connective.
fn nested(e: &Expr, in_and: bool) -> String {
    match (e, in_and) {
        (Expr::Or(..), true) | (Expr::And(..), false) => format!("({e})"),
        _ => e.to_string(),
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.quantifier.keyword(), self.expr)
    }
}
