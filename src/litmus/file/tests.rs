//! Unit tests of the litmus-file parser, condition evaluation, translation and verdicts.

use super::ast::*;
use super::deadlock::{finishing, Finishing};
use super::expect::{Expectation, Expected, Finding, ScReachable, Table, Verdict};
use super::kernel::{reg_name, translate};
use super::parse::parse;
use super::LitmusFileError;
use std::path::Path;

fn parse_ok(text: &str) -> LitmusFile {
    parse(Path::new("t.litmus"), text).unwrap_or_else(|e| panic!("{e}"))
}

fn parse_err(text: &str) -> String {
    match parse(Path::new("t.litmus"), text) {
        Ok(f) => panic!("parsed: {f:?}"),
        Err(e) => e.to_string(),
    }
}

/// Each `(text, want)`: `text` does not parse, and its error starts with `want`.
fn assert_parse_errors(cases: &[(&str, &str)]) {
    for (text, want) in cases {
        let e = parse_err(text);
        assert!(e.starts_with(want), "{text:?}\n got: {e}\nwant: {want}");
    }
}

/// A one-thread test whose single row is `cell`.
fn one(cell: &str) -> Instr {
    let f = parse_ok(&format!(
        "PTX t\n{{ x=0; }}\n P0@cta 0,gpu 0 ;\n {cell} ;\nexists (x == 0)\n"
    ));
    f.threads[0].code[0].instr.clone()
}

const MP: &str = "PTX MP-gpu
\"Message passing,
 over two lines\"
{
x=0;
y = 0; P1:r1=0;
P1:r2 = 0
}
 P0@cta 0,gpu 0         | P1@cta 1, gpu 0        ;
 st.weak x, 1           | ld.acquire.gpu r1, y   ;
 st.release.gpu y, 1    | ld.weak r2, x          ;
~exists
(P1:r1 == 1 /\\ P1:r2 != 1)";

#[test]
fn header_comment_init_threads_and_condition() {
    let f = parse_ok(MP);
    assert_eq!(f.name, "MP-gpu");
    assert_eq!(
        f.comment.as_deref(),
        Some("Message passing,\n over two lines")
    );
    let init: Vec<(Option<usize>, &str, usize)> = f
        .init
        .iter()
        .map(|i| (i.thread, i.name.as_str(), i.line))
        .collect();
    assert_eq!(
        init,
        [
            (None, "x", 5),
            (None, "y", 6),
            (Some(1), "r1", 6),
            (Some(1), "r2", 7)
        ]
    );
    assert_eq!(f.header_line, 9);
    assert_eq!((f.threads[1].cta, f.threads[1].gpu), (Some(1), 0));
    assert_eq!(f.threads[0].code[1].line, 11);
    assert_eq!(f.condition.quantifier, Quantifier::NotExists);
    assert_eq!(f.condition.line, 12);
    assert_eq!(
        f.condition.to_string(),
        "~exists (P1:r1 == 1 /\\ P1:r2 != 1)"
    );
    assert_eq!(f.locations(), ["x", "y"]);
}

#[test]
fn loads_stores_and_moves() {
    let load = |sem, dst: &str, loc: &str| Instr::Load {
        sem,
        dst: dst.into(),
        loc: loc.into(),
    };
    assert_eq!(one("ld.weak r1, x"), load(AccessSem::Weak, "r1", "x"));
    assert_eq!(one("ld r1, x"), load(AccessSem::Weak, "r1", "x"));
    assert_eq!(
        one("ld.volatile r1, x"),
        load(AccessSem::Volatile, "r1", "x")
    );
    assert_eq!(
        one("ld.relaxed.cta r1, x"),
        load(AccessSem::Relaxed(Scope::Cta), "r1", "x")
    );
    assert_eq!(
        one("ld.acquire.sys r1, x"),
        load(AccessSem::Ordered(Scope::Sys), "r1", "x")
    );
    assert_eq!(
        one("ld r0, -2"),
        Instr::Move {
            dst: "r0".into(),
            value: -2
        }
    );
    // Regression (Dat3M's Memalloy tests `RWC_uniproc`, `IRWIW_gl_cta`): the weak spelling
    // of a constant's load was refused, "`2` is not a location".
    assert_eq!(
        one("ld.weak r0, 2"),
        Instr::Move {
            dst: "r0".into(),
            value: 2
        }
    );
    let store = |sem, value| Instr::Store {
        sem,
        loc: "x".into(),
        value,
    };
    assert_eq!(one("st.weak x, 1"), store(AccessSem::Weak, Value::Imm(1)));
    assert_eq!(
        one("st.volatile x, r2"),
        store(AccessSem::Volatile, Value::Reg("r2".into()))
    );
    assert_eq!(
        one("st.relaxed.gpu x, 0x10"),
        store(AccessSem::Relaxed(Scope::Gpu), Value::Imm(16))
    );
    assert_eq!(
        one("st.release.cta x, 1"),
        store(AccessSem::Ordered(Scope::Cta), Value::Imm(1))
    );
}

#[test]
fn fences_and_membars() {
    assert_eq!(one("fence.sc.cta"), Instr::Fence(Fence::Sc(Scope::Cta)));
    assert_eq!(
        one("fence.acq_rel.sys"),
        Instr::Fence(Fence::AcqRel(Scope::Sys))
    );
    assert_eq!(one("membar.gl"), Instr::Fence(Fence::Membar(Scope::Gpu)));
    assert_eq!(one("membar.cta"), Instr::Fence(Fence::Membar(Scope::Cta)));
    assert_eq!(one("membar.sys"), Instr::Fence(Fence::Membar(Scope::Sys)));
    assert_eq!(
        one("fence.proxy.alias"),
        Instr::Unknown("fence.proxy.alias".into())
    );
}

#[test]
fn atomics_and_reductions() {
    assert_eq!(
        one("atom.relaxed.gpu.cas r1, m, 0, r2"),
        Instr::Atom {
            sem: RmwSem::Relaxed,
            scope: Scope::Gpu,
            op: RmwOp::Cas,
            dst: "r1".into(),
            loc: "m".into(),
            operands: vec![Value::Imm(0), Value::Reg("r2".into())],
        }
    );
    assert_eq!(
        one("atom.acq_rel.sys.sub r0, x, 1"),
        Instr::Atom {
            sem: RmwSem::AcqRel,
            scope: Scope::Sys,
            op: RmwOp::Sub,
            dst: "r0".into(),
            loc: "x".into(),
            operands: vec![Value::Imm(1)],
        }
    );
    assert!(matches!(
        one("atom.exch r0, x, 1"),
        Instr::Atom {
            sem: RmwSem::Relaxed,
            scope: Scope::Gpu,
            op: RmwOp::Exch,
            ..
        }
    ));
    assert!(matches!(
        one("atom.acquire.cta.inc r0, x, 5"),
        Instr::Atom { op: RmwOp::Inc, .. }
    ));
    assert_eq!(
        one("red.release.gpu.add x, r1"),
        Instr::Red {
            sem: RmwSem::Release,
            scope: Scope::Gpu,
            op: RmwOp::Add,
            loc: "x".into(),
            value: Value::Reg("r1".into()),
        }
    );
    assert_eq!(
        one("atom.relaxed.gpu.nand r0, x, 1"),
        Instr::Unknown("atom.relaxed.gpu.nand r0, x, 1".into())
    );
    assert_eq!(
        one("red.relaxed.gpu.cas x, 1"),
        Instr::Unknown("red.relaxed.gpu.cas x, 1".into())
    );
    let e = parse_err(
        "PTX t\n{ }\n P0@cta 0,gpu 0 ;\n atom.relaxed.gpu.cas r1, m, 0 ;\nexists (x == 0)\n",
    );
    assert!(
        e.starts_with("t.litmus:4: `atom.relaxed.gpu.cas r1, m, 0`: expected 4 operands, found 3"),
        "{e}"
    );
}

#[test]
fn barriers_branches_labels_and_arithmetic() {
    let bar = |arrive, ops: Vec<Value>| Instr::Barrier {
        arrive,
        operands: ops,
    };
    assert_eq!(one("bar.cta.sync 0"), bar(false, vec![Value::Imm(0)]));
    assert_eq!(
        one("bar.cta.sync 1, 1, 3"),
        bar(false, vec![Value::Imm(1), Value::Imm(1), Value::Imm(3)])
    );
    assert_eq!(
        one("bar.cta.sync 1, r2"),
        bar(false, vec![Value::Imm(1), Value::Reg("r2".into())])
    );
    assert_eq!(
        one("bar.cta.arrive 1, 64"),
        bar(true, vec![Value::Imm(1), Value::Imm(64)])
    );
    let f = parse_ok(
        "PTX t\n{ }\n P0@cta 0,gpu 0 ;\n LC00: ;\n ld.relaxed.gpu r2, f ;\n bne r2, 0, LC01 ;\n \
         blt r2, r3, LC00 ;\n goto LC00 ;\n LC01: add r4, r2, 1 ;\n div r5, r4, r2 ;\nforall (true)\n",
    );
    let code: Vec<&Instr> = f.threads[0].code.iter().map(|s| &s.instr).collect();
    assert_eq!(code[0], &Instr::Label("LC00".into()));
    assert_eq!(
        code[2],
        &Instr::Branch {
            cmp: Cmp::Ne,
            a: Value::Reg("r2".into()),
            b: Value::Imm(0),
            target: "LC01".into()
        }
    );
    assert!(matches!(code[3], Instr::Branch { cmp: Cmp::Lt, .. }));
    assert_eq!(code[4], &Instr::Goto("LC00".into()));
    assert_eq!(code[5], &Instr::Label("LC01".into()));
    assert_eq!(
        code[6],
        &Instr::Arith {
            op: Arith::Add,
            dst: "r4".into(),
            a: Value::Reg("r2".into()),
            b: Value::Imm(1)
        }
    );
    assert!(matches!(code[7], Instr::Arith { op: Arith::Div, .. }));
    assert_eq!(f.threads[0].code[5].line, 9);
    assert_eq!(f.threads[0].code[6].text, "add r4, r2, 1");
}

#[test]
fn empty_cells_and_unknown_instructions() {
    let f = parse_ok(
        "PTX t\n{ }\n P0@cta 0,gpu 0 | P1@cta 0,gpu 0 ;\n | ld.weak r0, x ;\n st.weak x, 1 | ;\n \
         ld.sc.gpu r1, x | ;\nexists (P1:r0 == 1)\n",
    );
    assert_eq!(f.threads[0].code.len(), 2);
    assert_eq!(f.threads[1].code.len(), 1);
    assert_eq!(
        f.threads[0].code[1].instr,
        Instr::Unknown("ld.sc.gpu r1, x".into())
    );
    assert_eq!(f.threads[0].code[1].line, 6);
}

#[test]
fn conditions_of_every_form() {
    let cond = |text: &str| {
        parse_ok(&format!(
            "PTX t\n{{ x=0; y=0; z=0; P0:r0=0; P1:r1=0; }}\n P0@cta 0,gpu 0 | P1@cta 0,gpu 0 ;\n{text}\n"
        ))
        .condition
    };
    let c = cond("exists (0:r0 = 1 /\\ P1: r1 == P0:r0 \\/ ~(x != -1))");
    assert_eq!(c.quantifier, Quantifier::Exists);
    assert_eq!(
        c.to_string(),
        "exists ((P0:r0 == 1 /\\ P1:r1 == P0:r0) \\/ ~(x != -1))"
    );
    assert_eq!(cond("forall\n (x == 2)").quantifier, Quantifier::Forall);
    assert_eq!(cond("~ exists (x == 2)").quantifier, Quantifier::NotExists);
    let nested = cond("exists ((x == 1 \\/ y == 1) /\\ z == 0)");
    assert_eq!(nested.expr.to_string(), "(x == 1 \\/ y == 1) /\\ z == 0");
}

#[test]
fn condition_evaluation() {
    let f = parse_ok(
        "PTX t\n{ }\n P0@cta 0,gpu 0 | P1@cta 0,gpu 0 ;\n ld.weak r0, x | ld.weak r1, y ;\n\
         exists (P0:r0 == P1:r1 /\\ ~(x == -1) \\/ y == 3)\n",
    );
    let observed = f.observed();
    let names: Vec<String> = observed.iter().map(ToString::to_string).collect();
    assert_eq!(names, ["P0:r0", "P1:r1", "x", "y"]);
    assert!(f.satisfies(&observed, &[1, 1, 0, 0]));
    assert!(!f.satisfies(&observed, &[1, 2, 0, 0]));
    assert!(
        !f.satisfies(&observed, &[1, 1, u32::MAX, 0]),
        "-1 is 0xffffffff"
    );
    assert!(f.satisfies(&observed, &[1, 2, u32::MAX, 3]));
    let c = &f.condition;
    assert!(c.validated(1, 0) && !c.validated(0, 5));
    let forall = Condition {
        quantifier: Quantifier::Forall,
        ..c.clone()
    };
    assert!(forall.validated(5, 0) && !forall.validated(5, 1));
    assert!(forall.targets(false) && !forall.targets(true));
    let not_exists = Condition {
        quantifier: Quantifier::NotExists,
        ..c.clone()
    };
    assert!(not_exists.validated(0, 5) && not_exists.targets(true));
}

/// QA: `~exists` tests were labelled `Allowed` on their `Test` line; herd says `Forbidden`.
#[test]
fn the_test_line_names_each_quantifier_as_herd_does() {
    let kinds = [
        Quantifier::Exists,
        Quantifier::NotExists,
        Quantifier::Forall,
    ]
    .map(|q| q.herd_kind());
    assert_eq!(kinds, ["Allowed", "Forbidden", "Required"]);
}

/// Regression: a comment that quotes text (Dat3M's `Manual/MICRO24-Fig4b-correct`, whose
/// comment says `means "No, but loops where not fully unrolled"`) ended at its inner quote, and
/// the file was refused: "expected the init block". Dat3M skips all text before the init block.
#[test]
fn a_comment_with_quotes_inside_runs_to_the_init_block() {
    let f = parse_ok(
        "PTX t\n\"\nA test.\n> run it\nUNKNOWN // means \"No, but loops\"\n\"\n{\nx=0;\n}\n \
         P0@cta 0,gpu 0 ;\n st.weak x, 1 ;\nexists (x == 1)\n",
    );
    let comment = f.comment.unwrap();
    assert!(comment.starts_with("A test."), "{comment}");
    assert!(comment.ends_with("means \"No, but loops\""), "{comment}");
    assert_eq!(f.init.len(), 1);
}

/// QA: a herd `(* … *)` comment after the condition was "in the condition: unexpected *".
/// herd allows them anywhere; they are blanks now, lines keeping their numbers.
#[test]
fn herd_comments_are_blanks_anywhere_and_lines_keep_their_numbers() {
    let f = parse_ok(
        "PTX t\n(* before *)\n{ x=0; (* in init *) }\n P0@cta 0,gpu 0 ;\n \
         st.weak x, 1 (* a store *) ;\n(* two\nlines *)\nexists (x == 1) (* after *)\n",
    );
    assert_eq!(f.init.len(), 1);
    assert_eq!(f.condition.line, 8);
    let err = parse(
        Path::new("t.litmus"),
        "PTX t\n{ x=0; }\n P0@cta 0,gpu 0 ;\n(* a\ncomment *) st.weak x, ;\nexists (x == 1)\n",
    )
    .unwrap_err();
    assert!(err.to_string().contains("t.litmus:5"), "{err}");
}

/// QA: `st.relaxed.gpu x, 4294967297` stored 1 (the value wrapped) and its state counted as
/// reached. A value that fits no 32-bit word is an error naming its line, wherever it stands.
#[test]
fn a_value_that_fits_no_32_bit_word_is_an_error_naming_its_line() {
    let file = |init: &str, code: &str, cond: &str| {
        format!("PTX t\n{{ x={init}; }}\n P0@cta 0,gpu 0 ;\n {code} ;\nexists ({cond})\n")
    };
    for (text, line) in [
        (file("0", "st.relaxed.gpu x, 4294967297", "x == 1"), 4),
        (file("-2147483649", "st.weak x, 1", "x == 1"), 2),
        (file("0", "ld.weak r0, 0x100000000", "x == 0"), 4),
        (file("0", "st.weak x, 1", "x == 4294967296"), 5),
    ] {
        let err = parse_err(&text);
        assert!(err.contains(&format!("t.litmus:{line}")), "{err}");
        assert!(err.contains("does not fit a 32-bit word"), "{err}");
    }
    parse_ok(&file("-2147483648", "st.weak x, 4294967295", "x == -1"));
}

/// Older files of Dat3M's suite spell `add` and `sub` as `plus` and `minus`.
#[test]
fn plus_and_minus_are_add_and_sub() {
    let text = |op: &str| {
        format!(
            "PTX t\n{{ x=0; }}\n P0@cta 0,gpu 0 ;\n atom.acquire.gpu.{op} r1, x, 1 ;\n\
             exists (P0:r1 == 0)\n"
        )
    };
    for (old, new) in [("plus", "add"), ("minus", "sub")] {
        let (a, b) = (parse_ok(&text(old)), parse_ok(&text(new)));
        assert_eq!(
            a.threads[0].code[0].instr, b.threads[0].code[0].instr,
            "{old}"
        );
    }
}

#[test]
fn malformed_files_name_file_and_line() {
    let cases = [
        (
            "C t\n{ }\n",
            "t.litmus:1: expected `PTX <name>`, found `C t`",
        ),
        ("PTX t\n\"open\n{ }\n", "t.litmus:2: unterminated comment"),
        (
            "PTX t\n{ x=0;\n y:=1 }\n",
            "t.litmus:3: `y` is not a thread",
        ),
        (
            "PTX t\n{ x=0;\n y = ?; }\n",
            "t.litmus:3: `?` is not an initial value",
        ),
        (
            "PTX t\n{ }\n P0@cta 0,gpu 0 | P2@cta 0,gpu 0 ;\n",
            "t.litmus:3: thread P2 is in column 1",
        ),
        (
            "PTX t\n{ }\n P0@cta 0,gpu 0\n",
            "t.litmus:3: the thread header row must end with `;`",
        ),
        (
            "PTX t\n{ }\n P0@warp 0 ;\n",
            "t.litmus:3: bad placement `warp 0`",
        ),
        (
            "PTX t\n{ }\n P0@cta 0,gpu 0 ;\n st.weak x, 1 | ld.weak r0, x ;\n",
            "t.litmus:4: this row has 2 cells, the header has 1 threads",
        ),
        (
            "PTX t\n{ }\n P0@cta 0,gpu 0 ;\n st.weak x, 1\nexists (x == 1)\n",
            "t.litmus:4: an instruction row must end with `;`",
        ),
        (
            "PTX t\n{ }\n P0@cta 0,gpu 0 ;\n st.weak x ;\nexists (x == 1)\n",
            "t.litmus:4: `st.weak x`: expected 2 operands, found 1",
        ),
        (
            "PTX t\n{ }\n P0@cta 0,gpu 0 ;\n ld.weak 3, x ;\nexists (x == 1)\n",
            "t.litmus:4: `ld.weak 3, x`: `3` is not a register",
        ),
        (
            "PTX t\n{ }\n P0@cta 0,gpu 0 ;\n goto L9 ;\nexists (x == 1)\n",
            "t.litmus:4: P0 jumps to L9, which it does not define",
        ),
        (
            "PTX t\n{ }\n P0@cta 0,gpu 0 ;\n L: ;\n L: ;\nexists (x == 1)\n",
            "t.litmus:5: label L is defined twice in P0",
        ),
        (
            "PTX t\n{ }\n P0@cta 0,gpu 0 ;\n st.weak x, 1 ;\n",
            "t.litmus:4: expected a final condition",
        ),
        (
            "PTX t\n{ }\n P0@cta 0,gpu 0 ;\nexists\n (x == 1\n",
            "t.litmus:5: in the condition: expected `)`, found the end",
        ),
        (
            "PTX t\n{ }\n P0@cta 0,gpu 0 ;\nexists (x < 1)\n",
            "t.litmus:4: in the condition: unexpected `<`",
        ),
        (
            "PTX t\n{ }\n P0@cta 0,gpu 0 ;\nexists (P3:r0 == 1)\n",
            "t.litmus:4: the condition names P3, but the test has 1 threads",
        ),
        (
            "PTX t\n{ P4:r0=1; }\n P0@cta 0,gpu 0 ;\nexists (x == 1)\n",
            "t.litmus:2: P4 is not a thread of this test",
        ),
    ];
    assert_parse_errors(&cases);
    let LitmusFileError::Syntax { line, .. } = parse(Path::new("x"), "PTX\n").unwrap_err() else {
        panic!()
    };
    assert_eq!(line, 1);
}

#[test]
fn a_condition_naming_an_undeclared_register_or_location_is_an_error() {
    let cases = [
        (
            "PTX t\n{ x=0; }\n P0@cta 0,gpu 0 ;\n ld.weak r0, x ;\nexists (P0:r9 == 1)\n",
            "t.litmus:5: the condition names P0:r9, which P0 neither initialises nor uses",
        ),
        (
            "PTX t\n{ x=0; }\n P0@cta 0,gpu 0 ;\n ld.weak r0, x ;\nexists (P0:r0 == 1 /\\ z == 0)\n",
            "t.litmus:5: the condition names location z, which the test neither initialises nor accesses",
        ),
    ];
    assert_parse_errors(&cases);
    // Initialised but not used is declared: registers and locations alike.
    parse_ok("PTX t\n{ y=2; P0:r5=1; }\n P0@cta 0,gpu 0 ;\n st.weak x, 1 ;\nexists (P0:r5 == 1 /\\ y == 2)\n");
}

#[test]
fn translation_places_threads_and_locations() {
    let f = parse_ok(
        "PTX place\n{ y=7; P2:r0=3; }\n P0@cta 5,gpu 0 | P1@cta 2,gpu 0 | P2@cta 5,gpu 0 ;\n \
         st.weak x, 1 | ld.weak r0, y | ld.weak r1, x ;\nexists (P2:r1 == 0 /\\ P1:r0 == 7 /\\ x == 1)\n",
    );
    let k = translate(&f, 16).unwrap();
    assert_eq!((k.layout.ctas, k.layout.block_threads), (2, 33));
    assert_eq!(k.layout.locations, ["y", "x"]);
    assert_eq!(k.layout.initial, [7, 0]);
    assert_eq!(
        k.layout.out_regs,
        [(1, "r0".to_string()), (2, "r1".to_string())]
    );
    assert_eq!(k.layout.location_word(3, 1), 3 * 32 + 16);
    assert_eq!(
        &k.layout.initial_memory(2)[..],
        &{
            let mut m = vec![0; 64];
            m[0] = 7;
            m[32] = 7;
            m
        }[..]
    );
    // CTA 2 is block 0 of an instance, CTA 5 block 1: P0 is lane 0 of warp 0 of block 1 (role
    // 33), P2 lane 0 of warp 1 (role 65), P1 lane 0 of warp 0 of block 0 (role 0).
    for (role, thread) in [(33, 0), (0, 1), (65, 2)] {
        assert!(
            k.ptx.contains(&format!(
                "setp.eq.u32 \t%pr, %h_role, {role};\n\t@%pr bra \t$P{thread};"
            )),
            "{}",
            k.ptx
        );
    }
    assert!(k
        .ptx
        .contains(&format!("mov.u32 \t{}, 3;", reg_name(2, "r0"))));
    assert!(k.ptx.contains("ld.global.u32 \t%P1_r0, [%h_mem+0];"));
    assert!(k.ptx.contains("ld.global.u32 \t%P2_r1, [%h_mem+64];"));
    crate::ptx::parse(&k.ptx).unwrap();
}

#[test]
fn translation_spells_instructions_for_ptxas_and_the_simulator() {
    let f = parse_ok(
        "PTX spell\n{ }\n P0@cta 0,gpu 0 | P1@cta 0,gpu 0 ;\n\
         ld.relaxed.gpu r0, x | st.release.sys y, 2 ;\n\
         atom.acq_rel.sys.sub r1, x, 1 | red.acquire.gpu.add y, r5 ;\n\
         atom.relaxed.cta.cas r2, x, 0, r0 | red.relaxed.gpu.sub y, r5 ;\n\
         membar.gl | bar.cta.sync 3 ;\n\
         bar.cta.sync 3 | st.volatile x, r5 ;\n\
         bgt r0, 1, L | ld.volatile r6, x ;\n\
         L: | ld r5, -1 ;\n\
         exists (P0:r0 == 1)\n",
    );
    let ptx = translate(&f, 64).unwrap().ptx;
    for want in [
        "ld.relaxed.gpu.global.u32 \t%P0_r0, [%h_mem+0];",
        "mov.u32 \t%s0, 2;\n\tst.release.sys.global.u32 \t[%h_mem+256], %s0;",
        "mov.u32 \t%s0, 4294967295;\n\tatom.acq_rel.sys.global.add.u32 \t%P0_r1, [%h_mem+0], %s0;",
        "atom.acquire.gpu.global.add.u32 \t%s2, [%h_mem+256], %P1_r5;",
        "atom.relaxed.cta.global.cas.b32 \t%P0_r2, [%h_mem+0], %s0, %P0_r0;",
        "neg.s32 \t%s0, %P1_r5;\n\tred.relaxed.gpu.global.add.u32 \t[%h_mem+256], %s0;",
        "membar.gl;",
        "barrier.sync \t3;",
        "st.volatile.global.u32 \t[%h_mem+0], %P1_r5;",
        "setp.gt.s32 \t%pb, %P0_r0, 1;\n\t@%pb bra \t$P0_L;",
        "$P0_L:",
        "ld.volatile.global.u32 \t%P1_r6, [%h_mem+0];",
        "mov.u32 \t%P1_r5, 4294967295;",
        "st.global.u32 \t[%h_out+0], %P0_r0;",
    ] {
        assert!(ptx.contains(want), "missing {want:?} in\n{ptx}");
    }
    crate::ptx::parse(&ptx).unwrap();
}

#[test]
fn unsupported_constructs_are_refused_with_line() {
    let refusal = |cells: &str| {
        let f = parse_ok(&format!("PTX r\n{{ }}\n P0@cta 0,gpu 0 | P1@cta 0,gpu 0 ;\n st.weak x, 1 | ;\n{cells} ;\nexists (x == 1)\n"));
        let r = translate(&f, 64).unwrap_err();
        (r.line, r.construct, r.reason)
    };
    // Dat3M's operands: instance, id, count; the id is the second.
    let (line, construct, reason) = refusal(" bar.cta.arrive 1, 64 | bar.cta.sync 1, 1");
    assert_eq!((line, construct.as_str()), (5, "bar.cta.arrive 1, 64"));
    assert!(reason.contains("0 to 15"), "{reason}");
    assert!(refusal(" | bar.cta.sync 1, 2, 0")
        .2
        .contains("thread count"));
    assert!(refusal(" | bar.cta.sync 1, 2, 3, 4")
        .2
        .contains("three operands"));
    assert!(refusal(" bar.cta.sync 16 |").2.contains("0 to 15"));
    assert_eq!(refusal(" fence.proxy.alias |").2, "proxy operations");
    assert_eq!(refusal(" | ld.sc.gpu r0, x").1, "ld.sc.gpu r0, x");
    let f = parse_ok("PTX r\n{ P0:r0=x; }\n P0@cta 0,gpu 0 ;\n ld.weak r1, x ;\nexists (x == 1)\n");
    assert_eq!(translate(&f, 64).unwrap_err().line, 2);
    let f = parse_ok("PTX r\n{ }\n P0 ;\n ld.weak r1, x ;\nexists (x == 1)\n");
    assert!(translate(&f, 64)
        .unwrap_err()
        .reason
        .contains("without placement"));
    let refused = translate(&f, 64).unwrap_err().to_string();
    assert!(
        refused.starts_with("t.litmus:3: `P0` is not supported"),
        "{refused}"
    );
}

/// The PTX barrier of each of Dat3M's operand forms: `id`; `instance, id` (the instance
/// label dropped); `instance, id, count` with the count in warps, one per litmus thread; ids
/// and counts in registers; `arrive` without a count counts the litmus threads of its CTA.
#[test]
fn barriers_keep_their_ids_and_count_a_warp_per_litmus_thread() {
    let f = parse_ok(
        "PTX b\n{ x=0; P1:r2=3; P2:r3=2; }\n P0@cta 0,gpu 0 | P1@cta 1,gpu 0 | P2@cta 1,gpu 0 ;\n \
         bar.cta.sync 4 | bar.cta.sync 7, 9 | bar.cta.arrive 2 ;\n \
         bar.cta.arrive 5, 1, 3 | bar.cta.sync 1, r2 | bar.cta.sync 1, 1, r3 ;\nexists (x == 1)\n",
    );
    let ptx = translate(&f, 64).unwrap().ptx;
    let code = |t: usize| {
        let from = ptx.find(&format!("$P{t}:")).unwrap();
        let to = ptx[from..].find("\tret;").unwrap() + from;
        ptx[from..to].to_string()
    };
    let (p0, p1, p2) = (code(0), code(1), code(2));
    assert!(p0.contains("barrier.sync \t4;"), "{p0}");
    assert!(p0.contains("barrier.arrive \t1, 96;"), "{p0}");
    assert!(p1.contains("barrier.sync \t9;"), "{p1}");
    assert!(p1.contains("barrier.sync \t%P1_r2;"), "{p1}");
    assert!(p2.contains("barrier.arrive \t2, 64;"), "{p2}");
    assert!(
        p2.contains("mul.lo.u32 \t%s1, %P2_r3, 32;\n\tbarrier.sync \t1, %s1;"),
        "{p2}"
    );
    crate::ptx::parse(&ptx).unwrap();
}

#[test]
fn mp_kernel_snapshot() {
    insta::assert_snapshot!(translate(&parse_ok(MP), 64).unwrap().ptx);
}

fn expectation(expected: Expected, sc: ScReachable) -> Expectation {
    Expectation {
        test: "tests/X.litmus".into(),
        family: String::new(),
        tier: "A-ld/st/fence".into(),
        expected,
        sc_reachable: sc,
    }
}

#[test]
fn verdicts() {
    let ran = |reached| Finding::Ran {
        executions: 100,
        not_finished: 0,
        reached,
    };
    let forbidden = expectation(Expected::Forbidden, ScReachable::No);
    let weak = expectation(Expected::Allowed, ScReachable::No);
    let sc = expectation(Expected::Allowed, ScReachable::Yes);
    assert_eq!(Verdict::of(Some(&forbidden), &ran(0)), Verdict::Ok);
    assert_eq!(Verdict::of(Some(&forbidden), &ran(3)), Verdict::Unsound);
    assert_eq!(Verdict::of(Some(&weak), &ran(3)), Verdict::Ok);
    assert_eq!(Verdict::of(Some(&weak), &ran(0)), Verdict::NotSeen);
    assert_eq!(
        Verdict::of(Some(&sc), &ran(0)),
        Verdict::OkSc { reached: false }
    );
    assert_eq!(Verdict::of(None, &ran(0)), Verdict::NoExpectation);
    let hung = Finding::Ran {
        executions: 0,
        not_finished: 8,
        reached: 0,
    };
    assert!(
        matches!(Verdict::of(Some(&forbidden), &hung), Verdict::NotComparable(why) if why.contains("cannot finish"))
    );
    let refused = Finding::NotRun("refused (line 3): `x`: y".into());
    assert_eq!(
        Verdict::of(Some(&weak), &refused).reason(),
        Some("refused (line 3): `x`: y")
    );
}

/// Regression (issue 26: deadlock-expected tests were "not comparable: cannot finish"): a
/// proved deadlock compares as ok against a `no-final-state` row, and only there.
#[test]
fn a_proved_deadlock_is_ok_only_against_a_no_final_state_row() {
    let deadlocked = Finding::Deadlocked { not_finished: 8 };
    let nfs = ScReachable::NoFinalState("no-final-state(deadlock under rendezvous barrier)".into());
    let hang = expectation(Expected::Forbidden, nfs.clone());
    let dat3m_allowed = expectation(Expected::Allowed, nfs);
    let forbidden = expectation(Expected::Forbidden, ScReachable::No);
    assert_eq!(
        Verdict::of(Some(&hang), &deadlocked),
        Verdict::OkNoFinalState
    );
    assert_eq!(
        Verdict::of(Some(&dat3m_allowed), &deadlocked),
        Verdict::OkNoFinalState
    );
    assert!(matches!(
        Verdict::of(Some(&forbidden), &deadlocked),
        Verdict::NotComparable(why) if why.contains("proved")
    ));
    assert_eq!(Verdict::of(None, &deadlocked), Verdict::NoExpectation);
    // Executions that ended where the row expects none: the allowed state is Dat3M's.
    let ended = Finding::Ran {
        executions: 5,
        not_finished: 3,
        reached: 0,
    };
    assert!(matches!(
        Verdict::of(Some(&dat3m_allowed), &ended),
        Verdict::NotComparable(why) if why.contains("5 ended")
    ));
    assert_eq!(Verdict::of(Some(&hang), &ended), Verdict::Ok);
}

fn finishing_of(text: &str) -> Finishing {
    finishing(&parse_ok(text))
}

/// Three same-CTA threads with the given cells, one row each.
fn three(rows: &[&str]) -> String {
    format!(
        "PTX d\n{{ x=0; P0:r2=1; }}\n P0@cta 0,gpu 0 | P1@cta 0,gpu 0 | P2@cta 0,gpu 0 ;\n{}\nexists (x == 1)\n",
        rows.join("\n")
    )
}

#[test]
fn the_barrier_analysis_decides_whether_a_test_can_end() {
    let quorum = |n| {
        three(&[&format!(" st.weak x, 1 | bar.cta.sync 1, 1, {n} | bar.cta.sync 1, 1, {n} ;\n bar.cta.sync 1, 1, {n} | ld.weak r0, x | ;")])
    };
    assert_eq!(finishing_of(&quorum(3)), Finishing::Possible);
    // Two of three complete a phase each time; the third waits for ever. Four never come.
    assert_eq!(finishing_of(&quorum(2)), Finishing::Never);
    assert_eq!(finishing_of(&quorum(4)), Finishing::Never);
    // Whole-CTA barriers: different ids deadlock; a thread that never arrives but exits does not.
    let ids = |a, b| {
        three(&[&format!(
            " bar.cta.sync {a} | bar.cta.sync {b} | st.weak x, 1 ;"
        )])
    };
    assert_eq!(finishing_of(&ids(0, 0)), Finishing::Possible);
    assert_eq!(finishing_of(&ids(0, 1)), Finishing::Never);
    // Opposite orders of two barriers deadlock; an arrive does not wait.
    let orders = |second| {
        three(&[
            &format!(" bar.cta.sync 0 | {second} 1, 1, 2 | ;"),
            " bar.cta.sync 1, 1, 2 | bar.cta.sync 0 | ;",
        ])
    };
    assert_eq!(finishing_of(&orders("bar.cta.sync")), Finishing::Never);
    assert_eq!(finishing_of(&orders("bar.cta.arrive")), Finishing::Possible);
    // Ids from registers: fixed values are followed, values read from memory are not.
    let reg = three(&[" bar.cta.sync 0, r2 | bar.cta.sync 0, 2 | ;"]);
    assert_eq!(finishing_of(&reg), Finishing::Never);
    let moved = three(&[" ld r2, 2 | | ;\n bar.cta.sync 0, r2 | bar.cta.sync 0, 2 | ;"]);
    assert_eq!(finishing_of(&moved), Finishing::Possible);
    let loaded = three(&[" ld.weak r2, x | bar.cta.sync 0, 1 | ;\n bar.cta.sync 0, r2 | | ;"]);
    assert!(matches!(finishing_of(&loaded), Finishing::Unproved(why) if why.contains("memory")));
    let branch = three(&[" bar.cta.sync 0 | bne r2, 0, LC00 | ;\n | LC00: | ;"]);
    assert!(matches!(finishing_of(&branch), Finishing::Unproved(why) if why.contains("branch")));
}

#[test]
fn the_table_summarises_verdicts() {
    use super::expect::Row;
    let weak = expectation(Expected::Allowed, ScReachable::No);
    let forbidden = expectation(Expected::Forbidden, ScReachable::No);
    let ran = |reached| Finding::Ran {
        executions: 10,
        not_finished: 2,
        reached,
    };
    let table = Table {
        rows: vec![
            Row::new("a", Some(&weak), &ran(1)),
            Row::new("b", Some(&weak), &ran(0)),
            Row::new("c", Some(&forbidden), &ran(4)),
            Row::new("d", Some(&forbidden), &Finding::NotRun("refused".into())),
        ],
    };
    let s = table.summary();
    assert_eq!(
        (s.ok, s.unsound, s.not_seen, s.not_comparable),
        (1, 1, 1, 1)
    );
    assert_eq!((s.weak_reached, s.weak_tests), (1, 2));
    assert_eq!(
        s.to_string(),
        "4 tests: ok 1, UNSOUND 1, not seen 1, not comparable 1; weak-only allowed states reached in 1 of 2 comparable tests of tiers A–C"
    );
    let text = table.render();
    assert!(text.contains("10 (+2 not finished)"), "{text}");
    assert!(
        text.lines()
            .nth(4)
            .unwrap()
            .ends_with("not comparable: refused"),
        "{text}"
    );
}

/// Bug: with `--expect`, the results tables named a test the CSV had no row for by its path as
/// given (`/tmp/suite/Manual/x.litmus`) beside rows named relative to the CSV's folder
/// (`Manual/y.litmus`). Every row is named relative to that folder now.
#[test]
fn a_test_without_a_row_is_named_relative_to_the_csv_folder_as_the_rows_are() {
    use super::expect::{test_name, Expectations};
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("expected.csv");
    std::fs::write(
        &csv,
        "test,expected,sc_reachable\nManual/y.litmus,allowed,yes\n",
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("Manual")).unwrap();
    let file = dir.path().join("Manual").join("x.litmus");
    std::fs::write(&file, "").unwrap();
    let expectations = Expectations::load(&csv).unwrap();
    assert!(expectations.find(&file).is_none());
    assert_eq!(test_name(Some(&expectations), &file), "Manual/x.litmus");
    assert_eq!(test_name(None, &file), file.display().to_string());
}

/// QA: a row `t.litmus` matched both `a/t.litmus` and `b/t.litmus` of its folder (by file
/// name), so one table named two files alike, one UNSOUND and one ok; and a file named twice
/// ran and counted twice. A file inside the CSV's folder matches only its own path's row, and
/// files come once.
#[test]
fn a_row_matches_only_its_own_path_in_the_csv_folder_and_a_file_named_twice_runs_once() {
    use super::expect::Expectations;
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("expected.csv");
    std::fs::write(&csv, "test,expected,sc_reachable\nt.litmus,allowed,yes\n").unwrap();
    for sub in ["a", "b"] {
        std::fs::create_dir(dir.path().join(sub)).unwrap();
        std::fs::write(dir.path().join(sub).join("t.litmus"), "").unwrap();
    }
    std::fs::write(dir.path().join("t.litmus"), "").unwrap();
    let expectations = Expectations::load(&csv).unwrap();
    assert!(expectations.find(&dir.path().join("a/t.litmus")).is_none());
    assert!(expectations.find(&dir.path().join("t.litmus")).is_some());
    let elsewhere = tempfile::tempdir().unwrap();
    let copy = elsewhere.path().join("t.litmus");
    std::fs::write(&copy, "").unwrap();
    assert!(
        expectations.find(&copy).is_some(),
        "a copy outside matches by name"
    );
    let a = dir.path().join("a/t.litmus");
    let files = super::collect_files(&[a.clone(), dir.path().join("a"), a]).unwrap();
    assert_eq!(files.len(), 1, "{files:?}");
}
