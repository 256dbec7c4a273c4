//! Stress code: the PTX that stressing blocks run instead of the application.
//!
//! The harness (see [`super::harness`]) launches extra blocks next to the application's; they
//! hammer a scratchpad that the application never touches, to provoke weak behaviours in the
//! application without changing its possible behaviours (section 3 of the core paper,
//! `seeds/004_…`). This module generates that code for one [`StressStrategy`], as IR statements,
//! from PTX text that it formats and parses. It is a pure function of the strategy: every run-time
//! parameter (iterations, scratchpad address and size, spread, locations, seed) is read from the
//! control block (layout in [`super::harness::layout`]), so one instrumented module serves every
//! run of a campaign.
//!
//! All stress accesses are `ld.volatile.global` / `st.volatile.global` (ptxas may neither fold
//! nor remove them) and every loop head carries `.pragma "nounroll";`, so the SASS performs
//! exactly the accesses written here, in this order.

use super::harness::layout;
use crate::ir::Statement;
use crate::parse::{parse, ParseError};
use std::fmt;
use std::str::FromStr;
use thiserror::Error;

/// One access of a `sys` access sequence σ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StressOp {
    Load,
    Store,
}

/// What stressing blocks do (the paper's `sys-str`, `rand-str`, `cache-str`, `no-str`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum StressStrategy {
    /// Stressing blocks return at once.
    #[default]
    None,
    /// Thread `t` repeats σ (`sequence`, in `(ld|st)+`) on location `L[t % spread]`.
    Sys { sequence: Vec<StressOp> },
    /// Every thread repeatedly loads or stores (at random) a random scratchpad word.
    Rand,
    /// Every stressing block repeatedly loads and stores every scratchpad word.
    Cache,
}

/// A malformed stress specification.
#[derive(Debug, Error, PartialEq)]
pub enum StressError {
    #[error("unknown stress access '{0}': expected 'ld' or 'st', optionally with a count ('ld3')")]
    UnknownOp(String),
    #[error("the sys access sequence is empty: it must match (ld|st)+")]
    EmptySequence,
    #[error("internal error: generated stress code does not parse: {0}")]
    Generated(#[from] ParseError),
}

impl FromStr for StressOp {
    type Err = StressError;

    fn from_str(s: &str) -> Result<StressOp, StressError> {
        match s.trim() {
            "ld" => Ok(StressOp::Load),
            "st" => Ok(StressOp::Store),
            other => Err(StressError::UnknownOp(other.to_string())),
        }
    }
}

impl fmt::Display for StressOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StressOp::Load => "ld",
            StressOp::Store => "st",
        })
    }
}

/// Parses σ: accesses separated by spaces or commas (`"ld st st"`, `"ld,st"`); the paper's
/// shorthand with a repetition count (`"ld3 st"` = `"ld ld ld st"`) is accepted too.
pub fn parse_sequence(text: &str) -> Result<Vec<StressOp>, StressError> {
    let mut sequence = Vec::new();
    for word in text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|w| !w.is_empty())
    {
        let split = word
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(word.len());
        let op: StressOp = word[..split].parse()?;
        let count = match &word[split..] {
            "" => 1,
            digits => digits
                .parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| StressError::UnknownOp(word.to_string()))?,
        };
        sequence.extend(std::iter::repeat_n(op, count));
    }
    if sequence.is_empty() {
        return Err(StressError::EmptySequence);
    }
    Ok(sequence)
}

/// Spells σ with single spaces: `"ld st st"`.
pub fn sequence_to_string(sequence: &[StressOp]) -> String {
    let words: Vec<String> = sequence.iter().map(StressOp::to_string).collect();
    words.join(" ")
}

impl StressStrategy {
    /// The strategy's short name as in the environment names (`sys` for `sys-str`).
    pub fn name(&self) -> &'static str {
        match self {
            StressStrategy::None => "no",
            StressStrategy::Sys { .. } => "sys",
            StressStrategy::Rand => "rand",
            StressStrategy::Cache => "cache",
        }
    }
}

impl fmt::Display for StressStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StressStrategy::Sys { sequence } => {
                write!(f, "sys-str ({})", sequence_to_string(sequence))
            }
            other => write!(f, "{}-str", other.name()),
        }
    }
}

/// Generated stress code: register declarations (to go at the top of the kernel body) and the
/// code itself, which starts with the control block's global address in the register passed to
/// [`stress_code`] and ends with `ret`.
#[derive(Debug, Clone, PartialEq)]
pub struct StressCode {
    pub declarations: Vec<Statement>,
    pub body: Vec<Statement>,
}

/// Registers and labels of the stress code all start with this prefix.
pub const STRESS_PREFIX: &str = "gwmm_s_";

const DECLARATIONS: &str = "\
.reg .pred %gwmm_s_p, %gwmm_s_q;
.reg .b32 %gwmm_s_t, %gwmm_s_n, %gwmm_s_a, %gwmm_s_i, %gwmm_s_v, %gwmm_s_x, %gwmm_s_w;
.reg .b64 %gwmm_s_base, %gwmm_s_addr;
";

/// The stress code for `strategy`; `ctrl` names a `.b64` register holding the global address of
/// the control block.
pub fn stress_code(strategy: &StressStrategy, ctrl: &str) -> Result<StressCode, StressError> {
    let code = match strategy {
        StressStrategy::None => "ret;\n".to_string(),
        StressStrategy::Sys { sequence } if sequence.is_empty() => {
            return Err(StressError::EmptySequence)
        }
        StressStrategy::Sys { sequence } => sys_text(sequence, ctrl),
        StressStrategy::Rand => rand_text(ctrl),
        StressStrategy::Cache => cache_text(ctrl),
    };
    let text = format!("// gpuwmm stress: {strategy}\n{code}");
    let declarations = match strategy {
        StressStrategy::None => Vec::new(),
        _ => parse_snippet(DECLARATIONS)?,
    };
    Ok(StressCode {
        declarations,
        body: parse_snippet(&text)?,
    })
}

/// Byte offset of a control-block word, for an address operand.
fn at(ctrl: &str, word: u32) -> String {
    format!("[{ctrl}+{}]", layout::byte_offset(word))
}

/// Loads of the iteration count and the scratchpad base; an early exit when there is nothing to
/// do (`iterations == 0` or the register `zero_check` is zero).
fn common_setup(ctrl: &str, zero_check: &str) -> String {
    format!(
        "\
ld.global.u32 %gwmm_s_i, {iterations};
ld.global.u64 %gwmm_s_base, {scratch};
cvta.to.global.u64 %gwmm_s_base, %gwmm_s_base;
setp.eq.u32 %gwmm_s_p, %gwmm_s_i, 0;
@%gwmm_s_p bra $gwmm_s_done;
setp.eq.u32 %gwmm_s_p, {zero_check}, 0;
@%gwmm_s_p bra $gwmm_s_done;
",
        iterations = at(ctrl, layout::STRESS_ITERATIONS),
        scratch = at(ctrl, layout::SCRATCH_ADDRESS),
    )
}

/// Computes the linear stress-thread index `t` over all stressing blocks into `%gwmm_s_t`.
fn stress_thread_index(ctrl: &str) -> String {
    format!(
        "\
mov.u32 %gwmm_s_t, %ctaid.x;
ld.global.u32 %gwmm_s_n, {app_blocks};
sub.u32 %gwmm_s_t, %gwmm_s_t, %gwmm_s_n;
mov.u32 %gwmm_s_n, %ntid.x;
mul.lo.u32 %gwmm_s_t, %gwmm_s_t, %gwmm_s_n;
mov.u32 %gwmm_s_n, %tid.x;
add.u32 %gwmm_s_t, %gwmm_s_t, %gwmm_s_n;
",
        app_blocks = at(ctrl, layout::APP_BLOCKS),
    )
}

/// The loop back edge: counts `%gwmm_s_i` down and branches to `label` while it is not zero.
fn loop_tail(label: &str) -> String {
    format!(
        "\
sub.u32 %gwmm_s_i, %gwmm_s_i, 1;
setp.ne.u32 %gwmm_s_p, %gwmm_s_i, 0;
@%gwmm_s_p bra {label};
"
    )
}

const DONE: &str = "$gwmm_s_done:\nret;\n";

/// After the loop, a plain (weak) store of the sum of all loaded values: ptxas removes a volatile
/// load whose value is never used, so every stress load feeds this sum. Being weak, it is no
/// `.STRONG.SYS` access in SASS and is issued once per thread, not per iteration.
const SINK: &str = "st.global.u32 [%gwmm_s_addr], %gwmm_s_v;\n";

/// `sys`: thread `t` repeats σ on word `L[t % spread]` of the scratchpad. Each load adds its value
/// to `v` (initially `t`) and each store writes `v`, so stored values depend on loaded ones and
/// no load is dead.
fn sys_text(sequence: &[StressOp], ctrl: &str) -> String {
    let mut text = stress_thread_index(ctrl);
    text += &format!("ld.global.u32 %gwmm_s_n, {};\n", at(ctrl, layout::SPREAD));
    text += &common_setup(ctrl, "%gwmm_s_n");
    text += &format!(
        "\
rem.u32 %gwmm_s_n, %gwmm_s_t, %gwmm_s_n;
ld.global.u32 %gwmm_s_a, {locations};
add.u32 %gwmm_s_n, %gwmm_s_n, %gwmm_s_a;
mul.wide.u32 %gwmm_s_addr, %gwmm_s_n, 4;
add.s64 %gwmm_s_addr, {ctrl}, %gwmm_s_addr;
ld.global.u32 %gwmm_s_n, [%gwmm_s_addr];
mul.wide.u32 %gwmm_s_addr, %gwmm_s_n, 4;
add.s64 %gwmm_s_addr, %gwmm_s_base, %gwmm_s_addr;
mov.u32 %gwmm_s_v, %gwmm_s_t;
$gwmm_s_loop:
.pragma \"nounroll\";
",
        locations = at(ctrl, layout::LOCATIONS_OFFSET),
    );
    for op in sequence {
        text += match op {
            StressOp::Load => {
                "ld.volatile.global.u32 %gwmm_s_x, [%gwmm_s_addr];\nadd.u32 %gwmm_s_v, %gwmm_s_v, %gwmm_s_x;\n"
            }
            StressOp::Store => "st.volatile.global.u32 [%gwmm_s_addr], %gwmm_s_v;\n",
        };
    }
    text + &loop_tail("$gwmm_s_loop") + SINK + DONE
}

/// `rand`: each iteration advances a per-thread xorshift32 state `x` (seeded from the control
/// block's seed and `t`, forced odd so it is never zero), picks word `x % scratch_words`, and
/// loads it (adding the value to `v`) if the top bit of `x` is set, or stores `x` to it otherwise.
fn rand_text(ctrl: &str) -> String {
    let mut text = stress_thread_index(ctrl);
    text += &format!(
        "ld.global.u32 %gwmm_s_n, {};\n",
        at(ctrl, layout::SCRATCH_WORDS)
    );
    text += &common_setup(ctrl, "%gwmm_s_n");
    text += &format!(
        "\
ld.global.u32 %gwmm_s_x, {seed_lo};
ld.global.u32 %gwmm_s_a, {seed_hi};
xor.b32 %gwmm_s_x, %gwmm_s_x, %gwmm_s_a;
mul.lo.s32 %gwmm_s_a, %gwmm_s_t, -1640531527;
xor.b32 %gwmm_s_x, %gwmm_s_x, %gwmm_s_a;
or.b32 %gwmm_s_x, %gwmm_s_x, 1;
mov.u32 %gwmm_s_v, %gwmm_s_t;
$gwmm_s_loop:
.pragma \"nounroll\";
shl.b32 %gwmm_s_a, %gwmm_s_x, 13;
xor.b32 %gwmm_s_x, %gwmm_s_x, %gwmm_s_a;
shr.u32 %gwmm_s_a, %gwmm_s_x, 17;
xor.b32 %gwmm_s_x, %gwmm_s_x, %gwmm_s_a;
shl.b32 %gwmm_s_a, %gwmm_s_x, 5;
xor.b32 %gwmm_s_x, %gwmm_s_x, %gwmm_s_a;
rem.u32 %gwmm_s_w, %gwmm_s_x, %gwmm_s_n;
mul.wide.u32 %gwmm_s_addr, %gwmm_s_w, 4;
add.s64 %gwmm_s_addr, %gwmm_s_base, %gwmm_s_addr;
setp.lt.s32 %gwmm_s_q, %gwmm_s_x, 0;
@%gwmm_s_q ld.volatile.global.u32 %gwmm_s_a, [%gwmm_s_addr];
@%gwmm_s_q add.u32 %gwmm_s_v, %gwmm_s_v, %gwmm_s_a;
@!%gwmm_s_q st.volatile.global.u32 [%gwmm_s_addr], %gwmm_s_x;
",
        seed_lo = at(ctrl, layout::SEED_LO),
        seed_hi = at(ctrl, layout::SEED_HI),
    );
    text + &loop_tail("$gwmm_s_loop") + SINK + DONE
}

/// `cache`: in each iteration, thread `j` of every stressing block loads and stores back words
/// `j`, `j + blockDim`, … of the whole (L2-sized) scratchpad.
fn cache_text(ctrl: &str) -> String {
    let mut text = format!(
        "ld.global.u32 %gwmm_s_n, {};\n",
        at(ctrl, layout::SCRATCH_WORDS)
    );
    text += &common_setup(ctrl, "%gwmm_s_n");
    text += "\
mov.u32 %gwmm_s_t, %tid.x;
mov.u32 %gwmm_s_a, %ntid.x;
$gwmm_s_loop:
.pragma \"nounroll\";
mov.u32 %gwmm_s_w, %gwmm_s_t;
setp.ge.u32 %gwmm_s_q, %gwmm_s_w, %gwmm_s_n;
@%gwmm_s_q bra $gwmm_s_next;
$gwmm_s_word:
.pragma \"nounroll\";
mul.wide.u32 %gwmm_s_addr, %gwmm_s_w, 4;
add.s64 %gwmm_s_addr, %gwmm_s_base, %gwmm_s_addr;
ld.volatile.global.u32 %gwmm_s_v, [%gwmm_s_addr];
st.volatile.global.u32 [%gwmm_s_addr], %gwmm_s_v;
add.u32 %gwmm_s_w, %gwmm_s_w, %gwmm_s_a;
setp.lt.u32 %gwmm_s_q, %gwmm_s_w, %gwmm_s_n;
@%gwmm_s_q bra $gwmm_s_word;
$gwmm_s_next:
";
    text + &loop_tail("$gwmm_s_loop") + DONE
}

/// Parses a fragment of a function body (declarations, labels, instructions) into statements
/// marked as made by a pass (`ptx_line` 0).
pub(crate) fn parse_snippet(text: &str) -> Result<Vec<Statement>, ParseError> {
    let module = parse(&format!(".entry gwmm_snippet()\n{{\n{text}}}\n"))?;
    let mut body = module
        .functions()
        .next()
        .and_then(|f| f.body.clone())
        .unwrap_or_default();
    for statement in &mut body {
        if let Statement::Instruction(i) = statement {
            i.ptx_line = 0;
        }
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::print::print_statement;

    fn text(statements: &[Statement]) -> String {
        let mut out = String::new();
        for s in statements {
            print_statement(&mut out, s);
        }
        out
    }

    fn snapshot_text(strategy: &StressStrategy) -> String {
        let code = stress_code(strategy, "%gwmm_ctrl").unwrap();
        format!("{}{}", text(&code.declarations), text(&code.body))
    }

    fn count(strategy: &StressStrategy, opcode: &str) -> usize {
        let code = stress_code(strategy, "%gwmm_ctrl").unwrap();
        code.body
            .iter()
            .filter(|s| matches!(s, Statement::Instruction(i) if i.opcode.to_string() == opcode))
            .count()
    }

    #[test]
    fn parses_sequences() {
        use StressOp::*;
        assert_eq!(
            parse_sequence("ld st st").unwrap(),
            vec![Load, Store, Store]
        );
        assert_eq!(parse_sequence("ld,st").unwrap(), vec![Load, Store]);
        assert_eq!(
            parse_sequence(" ld3 st, ld ").unwrap(),
            vec![Load, Load, Load, Store, Load]
        );
        assert_eq!(parse_sequence(""), Err(StressError::EmptySequence));
        assert_eq!(
            parse_sequence("ld x"),
            Err(StressError::UnknownOp("x".into()))
        );
        assert_eq!(
            parse_sequence("ld0"),
            Err(StressError::UnknownOp("ld0".into()))
        );
        assert_eq!(
            sequence_to_string(&parse_sequence("st2,ld").unwrap()),
            "st st ld"
        );
        assert_eq!("st".parse::<StressOp>().unwrap().to_string(), "st");
    }

    #[test]
    fn strategy_names() {
        let sys = StressStrategy::Sys {
            sequence: vec![StressOp::Load, StressOp::Store],
        };
        assert_eq!(sys.to_string(), "sys-str (ld st)");
        assert_eq!(StressStrategy::None.to_string(), "no-str");
        assert_eq!(StressStrategy::Cache.name(), "cache");
    }

    #[test]
    fn empty_sys_sequence_is_an_error() {
        let strategy = StressStrategy::Sys { sequence: vec![] };
        assert_eq!(
            stress_code(&strategy, "%c"),
            Err(StressError::EmptySequence)
        );
    }

    #[test]
    fn sys_issues_sigma_once_per_iteration() {
        let strategy = StressStrategy::Sys {
            sequence: parse_sequence("ld st st ld ld").unwrap(),
        };
        assert_eq!(count(&strategy, "ld.volatile.global.u32"), 3);
        assert_eq!(count(&strategy, "st.volatile.global.u32"), 2);
    }

    #[test]
    fn generated_instructions_are_marked_synthetic() {
        let code = stress_code(&StressStrategy::Rand, "%gwmm_ctrl").unwrap();
        assert!(code.body.iter().all(|s| match s {
            Statement::Instruction(i) => i.ptx_line == 0,
            _ => true,
        }));
    }

    #[test]
    fn snapshot_none() {
        insta::assert_snapshot!(snapshot_text(&StressStrategy::None));
    }

    #[test]
    fn snapshot_sys_ld_st() {
        let strategy = StressStrategy::Sys {
            sequence: parse_sequence("ld st").unwrap(),
        };
        insta::assert_snapshot!(snapshot_text(&strategy));
    }

    #[test]
    fn snapshot_rand() {
        insta::assert_snapshot!(snapshot_text(&StressStrategy::Rand));
    }

    #[test]
    fn snapshot_cache() {
        insta::assert_snapshot!(snapshot_text(&StressStrategy::Cache));
    }
}
