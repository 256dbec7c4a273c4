//! The simulator's decoded instruction set.
//!
//! PTX text is decoded once, at `load_module`, into these small `Copy` values: registers are dense
//! slot numbers, labels are instruction indices, symbols are folded into constant addresses and
//! opcode words into enums. The step loop in `exec.rs` therefore never looks at a string, never
//! hashes and never allocates.

/// A register slot in a thread's register file (one `u64` per slot).
pub type Reg = u32;

/// Marks an instruction without a predicate guard.
pub const NO_GUARD: Reg = Reg::MAX;

/// Set in `Inst::guard` for a negated guard (`@!%p`).
pub const GUARD_NEGATED: Reg = 1 << 31;

/// A source operand (8 bytes, to keep instructions small).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Src {
    Reg(Reg),
    /// A constant that fits in 32 bits (zero-extended), already in the bit pattern of the
    /// instruction's type.
    Imm(u32),
    /// A wider constant (64-bit values, symbol addresses): index into `Kernel::consts`.
    Const(u32),
    Special(Special),
}

/// A special (read-only, per-thread) register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Special {
    Tid(u8),
    Ntid(u8),
    Ctaid(u8),
    Nctaid(u8),
    LaneId,
    WarpId,
    NWarpId,
    SmId,
    NSmId,
    GridId,
    /// `%clock`, `%clock64`, `%globaltimer`: the launch's executed-instruction counter.
    Clock,
    LanemaskEq,
    LanemaskLt,
    LanemaskLe,
    LanemaskGt,
    LanemaskGe,
    /// `%envreg0`..`%envreg31`: the driver's environment registers. All 0 but in a cooperative
    /// launch, where `%envreg1` (high half) and `%envreg2` (low half) hold the address of the
    /// grid workspace that `cooperative_groups::this_grid()` reads (null otherwise, as in a
    /// launch that is not cooperative).
    EnvReg(u8),
}

/// The class of a PTX fundamental type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `.u*`
    U,
    /// `.s*`
    S,
    /// `.b*`
    B,
    /// `.f32`, `.f64`
    F,
    Pred,
}

/// A PTX fundamental type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ty {
    pub kind: Kind,
    pub bits: u8,
}

impl Ty {
    pub const PRED: Ty = Ty {
        kind: Kind::Pred,
        bits: 1,
    };

    pub fn signed(self) -> bool {
        self.kind == Kind::S
    }

    pub fn is_float(self) -> bool {
        self.kind == Kind::F
    }

    /// Size in memory, in bytes.
    pub fn bytes(self) -> u8 {
        (self.bits / 8).max(1)
    }
}

/// A state space as the simulator resolves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Space {
    Global,
    Shared,
    Local,
    Param,
    /// `.const` variables live in (read-only by convention) global memory.
    Const,
    Generic,
}

/// `[base + offset]`, with symbols already folded into `offset`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Addr {
    pub base: Option<Reg>,
    pub offset: i64,
}

/// Where a load, store or atomic goes and how it is ordered (what `Ld`, `St` and `Atom` share).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemRef {
    pub space: Space,
    pub ty: Ty,
    /// Elements of a vector access: 1, 2 or 4 (always 1 for atomics).
    pub n: u8,
    pub addr: Addr,
    pub order: Order,
}

impl MemRef {
    /// Bytes of one element.
    pub fn size(self) -> u64 {
        u64::from(self.ty.bytes())
    }
}

/// Two-operand integer operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntOp {
    Add,
    Sub,
    AddSat,
    SubSat,
    MulLo,
    MulHi,
    Div,
    Rem,
    Min,
    Max,
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

/// Two-operand floating-point operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloatOp {
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
    CopySign,
}

/// One-operand operations (integer, predicate or float by the instruction's type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnOp {
    Not,
    CNot,
    Neg,
    Abs,
    Popc,
    Clz,
    Brev,
    Sqrt,
    Rcp,
    Rsqrt,
    Ex2,
    Lg2,
    Sin,
    Cos,
}

/// `mad` and `mul` result selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MadMode {
    Lo,
    Hi,
    Wide,
}

/// Comparison operators of `setp`/`set`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Lo,
    Ls,
    Hi,
    Hs,
    Equ,
    Neu,
    Ltu,
    Leu,
    Gtu,
    Geu,
    Num,
    Nan,
}

impl Cmp {
    pub const ALL: [Cmp; 18] = [
        Cmp::Eq,
        Cmp::Ne,
        Cmp::Lt,
        Cmp::Le,
        Cmp::Gt,
        Cmp::Ge,
        Cmp::Lo,
        Cmp::Ls,
        Cmp::Hi,
        Cmp::Hs,
        Cmp::Equ,
        Cmp::Neu,
        Cmp::Ltu,
        Cmp::Leu,
        Cmp::Gtu,
        Cmp::Geu,
        Cmp::Num,
        Cmp::Nan,
    ];

    /// The operator as PTX spells it (`setp.lt.s32`: `lt`).
    pub fn name(self) -> &'static str {
        match self {
            Cmp::Eq => "eq",
            Cmp::Ne => "ne",
            Cmp::Lt => "lt",
            Cmp::Le => "le",
            Cmp::Gt => "gt",
            Cmp::Ge => "ge",
            Cmp::Lo => "lo",
            Cmp::Ls => "ls",
            Cmp::Hi => "hi",
            Cmp::Hs => "hs",
            Cmp::Equ => "equ",
            Cmp::Neu => "neu",
            Cmp::Ltu => "ltu",
            Cmp::Leu => "leu",
            Cmp::Gtu => "gtu",
            Cmp::Geu => "geu",
            Cmp::Num => "num",
            Cmp::Nan => "nan",
        }
    }
}

parse_by_name!(Cmp, name, (), |_| ());

/// Boolean combining operator of `setp`/`set`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoolOp {
    And,
    Or,
    Xor,
}

/// `setp.cmp.bop`: the optional `bop [!]c` part.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Combine {
    pub op: BoolOp,
    pub c: Src,
    pub negate: bool,
}

/// Float rounding of an arithmetic result (`.rn`, `.rz`, `.rm`, `.rp`); computed exactly by
/// `rounding.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FloatRound {
    /// `.rn` (and no modifier): to nearest, ties to even.
    #[default]
    Nearest,
    /// `.rz`: towards zero.
    Zero,
    /// `.rm`: towards minus infinity.
    Down,
    /// `.rp`: towards plus infinity.
    Up,
}

/// How a float instruction rounds its result and whether it flushes subnormals (`.ftz`: inputs
/// and results that are subnormal become zeros of the same sign).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FloatMode {
    pub round: FloatRound,
    pub ftz: bool,
}

/// Integer rounding of float-to-integer and float-to-float `cvt` (`.rni`, `.rzi`, `.rmi`,
/// `.rpi`); a float result's own rounding is the `cvt`'s [`FloatMode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Round {
    Default,
    /// `.rni`
    Nearest,
    /// `.rzi`
    Zero,
    /// `.rmi`
    Down,
    /// `.rpi`
    Up,
}

/// Which of a CTA's 16 barriers an instruction uses, and how many threads complete it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BarrierRef {
    /// Barrier id (0 to 15 at run time).
    pub id: Src,
    /// Expected threads; `None`: every thread of the CTA (the live ones).
    pub count: Option<Src>,
}

/// Atomic read-modify-write operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomOp {
    Add,
    Exch,
    Cas,
    Min,
    Max,
    Inc,
    Dec,
    And,
    Or,
    Xor,
    /// `atom.add.noftz` on `.f16`, `.f16x2`, `.bf16` or `.bf16x2` (round to nearest even).
    HalfAdd(HalfTy),
}

/// A 16-bit float format: IEEE 754 binary16 (`.f16`) or bfloat16 (`.bf16`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HalfFormat {
    F16,
    Bf16,
}

/// A 16-bit float type: one value in the low 16 bits of a register, or a pair (`.f16x2`,
/// `.bf16x2`) in 32 bits, the first element in the low half.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HalfTy {
    pub format: HalfFormat,
    pub pair: bool,
}

/// Arithmetic on 16-bit floats (each element of a pair on its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HalfOp {
    Add,
    Sub,
    Mul,
    Fma,
    /// `min`/`max`: a NaN operand is ignored (the other is the result).
    Min,
    Max,
    /// `min.NaN`/`max.NaN`: a NaN operand makes the result the canonical NaN.
    MinNan,
    MaxNan,
    Neg,
    Abs,
}

/// What a `cvt` with a 16-bit float on one side converts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HalfConv {
    /// A 16-bit float to an integer or a wider float.
    From(HalfFormat, Ty),
    /// An integer or a wider float to a 16-bit float.
    To(Ty, HalfFormat),
    /// Two `f32` to a pair: the first source in the upper half (`cvt.rn.f16x2.f32 d, a, b`).
    PairOf(HalfFormat),
    /// One 16-bit float to another (or the same format, rounded to an integer).
    Between(HalfFormat, HalfFormat),
}

/// How far a strong operation reaches (PTX scopes; `.cluster` counts as `.gpu`). `.sys`
/// reaches every GPU of the system: the simulator runs a launch on one GPU unless told to
/// place its blocks on several ([`Device::place_on_gpus`](crate::device::Device::place_on_gpus),
/// for litmus tests across GPUs), and on one GPU `.sys` and `.gpu` reach the same threads (the
/// host only touches memory between launches).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Reach {
    /// A weak access: not strong at any scope.
    #[default]
    Weak,
    Cta,
    Gpu,
    Sys,
}

/// What a global access means for the memory models (decoded from semantics and scope).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Order {
    /// The scope of a strong access (`volatile` is relaxed at sys scope), or `Weak`.
    pub reach: Reach,
    /// Release or acq_rel at any scope.
    pub releases: bool,
    /// Acquire or acq_rel at any scope.
    pub acquires: bool,
    /// A reduction (`red`), whose read never forms an acquire pattern.
    pub reduction: bool,
}

impl Order {
    /// Store-buffer model: a release at gpu/sys scope (drain the own buffer first).
    pub fn release(self) -> bool {
        self.releases && self.reach >= Reach::Gpu
    }

    /// Store-buffer model: an acquire at gpu/sys scope (never read the stale cache).
    pub fn acquire(self) -> bool {
        self.acquires && self.reach >= Reach::Gpu
    }

    /// Store-buffer model: a weak load, which may be served from the block's stale cache.
    pub fn may_be_stale(self) -> bool {
        self.reach == Reach::Weak
    }
}

/// Extended-precision operations that read and/or write the carry flag `CC.CF`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CarryOp {
    Add,
    Sub,
    MadLo,
    MadHi,
}

/// `bar.red` reductions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BarRedOp {
    Popc,
    And,
    Or,
}

/// `shfl.sync` modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShflMode {
    Up,
    Down,
    Bfly,
    Idx,
}

/// `vote.sync` modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VoteMode {
    All,
    Any,
    Uni,
    Ballot,
}

/// The element operations of the SIMD video instructions (`vadd4`, `vabsdiff2`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimdOp {
    Add,
    Sub,
    /// `(a + b + 1) >> 1`
    Avrg,
    Absdiff,
    Min,
    Max,
}

/// `redux.sync` operations (sm_80): integer reductions over a warp's member lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduxOp {
    Add,
    /// `min`/`max` on `.u32` (`signed` false) or `.s32`.
    Min {
        signed: bool,
    },
    Max {
        signed: bool,
    },
    And,
    Or,
    Xor,
}

/// A decoded operation. Destinations are `Reg`s, sources `Src`s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    Mov {
        ty: Ty,
        d: Reg,
        a: Src,
    },
    Int {
        op: IntOp,
        ty: Ty,
        d: Reg,
        a: Src,
        b: Src,
    },
    /// `mul.wide`: `bits` is the width of the sources.
    MulWide {
        signed: bool,
        bits: u8,
        d: Reg,
        a: Src,
        b: Src,
    },
    Mad {
        mode: MadMode,
        ty: Ty,
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
    Float {
        op: FloatOp,
        ty: Ty,
        mode: FloatMode,
        sat: bool,
        d: Reg,
        a: Src,
        b: Src,
    },
    Fma {
        ty: Ty,
        sat: bool,
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
        mode: FloatMode,
    },
    Unary {
        op: UnOp,
        ty: Ty,
        mode: FloatMode,
        d: Reg,
        a: Src,
    },
    Setp {
        cmp: Cmp,
        ty: Ty,
        ftz: bool,
        p: Reg,
        q: Option<Reg>,
        a: Src,
        b: Src,
        combine: Option<Combine>,
    },
    /// `set`: `dty` is the destination type (all-ones / 1.0 for true).
    Set {
        cmp: Cmp,
        ty: Ty,
        ftz: bool,
        dty: Ty,
        d: Reg,
        a: Src,
        b: Src,
        combine: Option<Combine>,
    },
    Selp {
        ty: Ty,
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
    Cvt {
        dst: Ty,
        src: Ty,
        round: Round,
        mode: FloatMode,
        sat: bool,
        d: Reg,
        a: Src,
    },
    /// `cvta` (to generic when `to_generic`) for shared and local; global and const are identity.
    Cvta {
        space: Space,
        to_generic: bool,
        d: Reg,
        a: Src,
    },
    Bfe {
        ty: Ty,
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
    Bfi {
        ty: Ty,
        d: Reg,
        f: Src,
        b: Src,
        c: Src,
        len: Src,
    },
    /// `add.cc`, `addc`, `sub.cc`, `subc`, `mad.lo.cc`, `madc.hi`, ...: `cc` is the slot of the
    /// carry flag.
    Carry {
        op: CarryOp,
        ty: Ty,
        use_cf: bool,
        set_cf: bool,
        d: Reg,
        cc: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
    /// `sad`: `c + |a - b|`.
    Sad {
        ty: Ty,
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
    /// `bfind{.shiftamt}`.
    Bfind {
        ty: Ty,
        shiftamt: bool,
        d: Reg,
        a: Src,
    },
    /// `bar.red.{popc,and,or}`: a barrier (as [`Op::Bar`], waiting) that also reduces a
    /// predicate over the threads it releases.
    BarRed {
        op: BarRedOp,
        d: Reg,
        p: Src,
        negate: bool,
        bar: BarrierRef,
    },
    Prmt {
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
    /// `mov.b64 d, {a, b}`: `n` parts of `bits` each, least significant first.
    Pack {
        bits: u8,
        n: u8,
        d: Reg,
        parts: [Src; 4],
    },
    /// `mov.b64 {a, b}, s`.
    Unpack {
        bits: u8,
        n: u8,
        d: [Reg; 4],
        a: Src,
    },
    Ld {
        d: [Reg; 4],
        mem: MemRef,
    },
    St {
        s: [Src; 4],
        mem: MemRef,
    },
    /// `atom` (and `red`, whose destination is the sink register).
    Atom {
        op: AtomOp,
        d: Reg,
        b: Src,
        c: Src,
        mem: MemRef,
    },
    Bra {
        target: u32,
    },
    /// Calls a device function: `site` indexes `Kernel::calls`.
    Call {
        site: u32,
    },
    /// Returns from a device function.
    Return,
    Exit,
    /// `bar.sync`/`barrier.sync` (`wait`) or `bar.arrive`/`barrier.arrive` on a CTA barrier.
    Bar {
        bar: BarrierRef,
        wait: bool,
    },
    /// `bar.warp.sync mask`: the threads of the mask meet, and order memory among them.
    WarpSync {
        mask: Src,
    },
    /// A memory fence: `fence.sc`/`membar` (`sc`) or `fence.acq_rel`, at a scope (`Cta` or
    /// `Gpu`; sys and cluster count as gpu).
    Fence {
        reach: Reach,
        sc: bool,
    },
    /// Does nothing in the simulator (cta-scope fences, `prefetch`, `nanosleep`, ...).
    Nop,
    Trap,
    /// A failed device-side `assert` (`call __assertfail`): the thread faults, as on a GPU.
    AssertFail,
    /// `call vprintf` (`printf`): formats the string whose generic address is in the `format`
    /// slot with the argument buffer whose address is in the `args` slot (slots are offsets in
    /// the thread's local memory, where call parameters live) and writes the return value to the
    /// `ret` slot.
    Printf {
        format: u32,
        args: u32,
        ret: Option<u32>,
    },
    Shfl {
        mode: ShflMode,
        d: Reg,
        p: Option<Reg>,
        a: Src,
        b: Src,
        c: Src,
        mask: Src,
    },
    Vote {
        mode: VoteMode,
        d: Reg,
        a: Src,
        negate: bool,
        mask: Src,
    },
    /// `redux.sync.op.type d, a, mask`: every member lane gets the reduction of the members'
    /// `a` (32 bits, wrapping for `add`).
    Redux {
        op: ReduxOp,
        d: Reg,
        a: Src,
        mask: Src,
    },
    /// `activemask.b32`
    ActiveMask {
        d: Reg,
    },
    /// 16-bit float arithmetic (`add.f16`, `fma.rn.bf16x2`, ...); `relu` clamps negative
    /// results to +0 (`.relu`).
    Half {
        op: HalfOp,
        ty: HalfTy,
        mode: FloatMode,
        sat: bool,
        relu: bool,
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
    /// `setp` on 16-bit floats: for a pair, `p` gets the low elements' result, `q` the high.
    HalfSetp {
        cmp: Cmp,
        ty: HalfTy,
        ftz: bool,
        p: Reg,
        q: Option<Reg>,
        a: Src,
        b: Src,
        combine: Option<Combine>,
    },
    /// `set` on 16-bit floats: `d` gets `truth` where the comparison (combined) holds and 0
    /// where not, per element for a pair (`truth` is then one element's pattern).
    HalfSet {
        cmp: Cmp,
        ty: HalfTy,
        ftz: bool,
        truth: u32,
        d: Reg,
        a: Src,
        b: Src,
        combine: Option<Combine>,
    },
    /// `cvt` with a 16-bit float on either side; `b` is the second source of
    /// [`HalfConv::PairOf`].
    HalfCvt {
        conv: HalfConv,
        round: Round,
        mode: FloatMode,
        sat: bool,
        relu: bool,
        d: Reg,
        a: Src,
        b: Src,
    },
    /// `shf.{l,r}.{wrap,clamp}.b32`: the funnel shift of the 64-bit `b:a` by `c`.
    Shf {
        left: bool,
        clamp: bool,
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
    /// `dp4a` (four byte products) and `dp2a.{lo,hi}` (two 16-bit by byte products, `hi`
    /// taking bytes 2 and 3 of `b`), each element signed as its type says, added to `c`.
    Dot {
        pairs: bool,
        hi: bool,
        a_signed: bool,
        b_signed: bool,
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
    /// `lop3.b32`: the bitwise function of `a`, `b` and `c` whose truth table is `lut` (bit
    /// `4a + 2b + c` of `lut` is the result for those input bits).
    Lop3 {
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
        lut: u8,
    },
    /// `vop4`/`vop2` (SIMD video instructions, the form without masks, selectors or
    /// accumulation): each byte (`lanes` 4) or 16-bit half (`lanes` 2) of `a` and `b`,
    /// extended as its type says, combined by `op`, saturated to the element range of `d`'s type
    /// with `sat`, truncated into `d`. `signs`: a, b, d signed.
    Simd {
        op: SimdOp,
        lanes: u8,
        signs: [bool; 3],
        sat: bool,
        d: Reg,
        a: Src,
        b: Src,
    },
    /// `fns.b32`: the position of the `c`-th set bit of `a` counting from bit `b`.
    Fns {
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
    /// `match.any.sync` (`all` false: the lanes holding the same value as this one) and
    /// `match.all.sync` (the member mask if every member holds the same value, else 0; `p`
    /// says which), on `.b32` or `.b64` values.
    Match {
        all: bool,
        d: Reg,
        p: Option<Reg>,
        a: Src,
        mask: Src,
    },
}

/// The registers an arithmetic instruction writes and the operands it reads: for arithmetic
/// the PTX model performs after a deferred load whose value it uses (`exec/held.rs`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dataflow {
    pub writes: [Option<Reg>; 2],
    pub reads: [Option<Src>; 4],
}

impl Op {
    /// The dataflow of a register-to-register instruction that touches no memory, has no
    /// effect on other threads and reads nothing that changes with time; `None` for any other.
    pub fn dataflow(&self) -> Option<Dataflow> {
        let one = |d: Reg, reads: [Option<Src>; 4]| {
            Some(Dataflow {
                writes: [Some(d), None],
                reads,
            })
        };
        let flow = match *self {
            Op::Mov { d, a, .. }
            | Op::Unary { d, a, .. }
            | Op::Cvt { d, a, .. }
            | Op::Cvta { d, a, .. } => one(d, [Some(a), None, None, None]),
            Op::Int { d, a, b, .. } | Op::Float { d, a, b, .. } | Op::MulWide { d, a, b, .. } => {
                one(d, [Some(a), Some(b), None, None])
            }
            Op::Mad { d, a, b, c, .. }
            | Op::Fma { d, a, b, c, .. }
            | Op::Selp { d, a, b, c, .. }
            | Op::Lop3 { d, a, b, c, .. }
            | Op::Shf { d, a, b, c, .. } => one(d, [Some(a), Some(b), Some(c), None]),
            Op::Setp {
                p,
                q,
                a,
                b,
                combine,
                ..
            } => Some(Dataflow {
                writes: [Some(p), q],
                reads: [Some(a), Some(b), combine.map(|c| c.c), None],
            }),
            _ => None,
        }?;
        let timed = |s: &Option<Src>| matches!(s, Some(Src::Special(Special::Clock)));
        (!flow.reads.iter().any(timed)).then_some(flow)
    }
}

/// One decoded instruction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Inst {
    pub op: Op,
    /// Predicate slot, with [`GUARD_NEGATED`] set for `@!%p`; [`NO_GUARD`] when unguarded.
    pub guard: Reg,
    /// Line of the instruction in the PTX text.
    pub line: u32,
}

impl Inst {
    /// An unguarded `nop`: a filler for arrays of instructions.
    pub const NOP: Inst = Inst {
        op: Op::Nop,
        guard: NO_GUARD,
        line: 0,
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn instructions_stay_small() {
        let size = std::mem::size_of::<super::Inst>();
        assert!(size <= 64, "Inst is {size} bytes");
        assert_eq!(std::mem::size_of::<super::Src>(), 8);
    }
}
