//! What the harness code computes, checked without a GPU by a tiny interpreter for the few
//! instructions the pass generates: application threads get the virtual ids that
//! `ControlBlock::virtual_ids` predicts, and stressing threads touch exactly the scratchpad
//! words their strategy says, as often as it says.

use gpuwmm::control::{layout, ControlBlock, ControlParams};
use gpuwmm::ptx::passes::harness::{harness, HarnessOptions};
use gpuwmm::ptx::passes::stress::{parse_sequence, StressStrategy};
use gpuwmm::ptx::{parse, Instruction, Operand, Statement};
use std::collections::HashMap;

const CTRL: u64 = 0x1000_0000;
const SCRATCH: u64 = 0x2000_0000;
const END_OF_PROLOGUE: &str = "// gpuwmm harness: end of prologue";

/// One thread's state while it runs generated code.
struct Thread<'a> {
    regs: HashMap<String, u64>,
    params: HashMap<String, u64>,
    ctrl: &'a [u8],
    scratch: &'a mut [u32],
    /// (is_store, word index) of every scratchpad access, volatile or not.
    accesses: Vec<(bool, u64)>,
}

/// Where a run stopped.
#[derive(Debug, PartialEq)]
enum Stop {
    Returned,
    EndOfPrologue,
}

fn bits(opcode: &Instruction) -> u32 {
    let wide = opcode
        .opcode
        .modifiers
        .iter()
        .any(|m| m.ends_with("64") || m == "wide");
    if wide {
        64
    } else {
        32
    }
}

impl Thread<'_> {
    fn value(&self, operand: &Operand) -> u64 {
        match operand {
            Operand::Register(r) => *self.regs.get(r).unwrap_or_else(|| panic!("unset {r}")),
            Operand::Immediate(i) => i.parse::<i64>().unwrap() as u64,
            Operand::Symbol(s) => self.params[s],
            Operand::Address { base, offset } => self.regs[base].wrapping_add(*offset as u64),
            other => panic!("unexpected operand {other}"),
        }
    }

    fn load(&mut self, address: u64, width: u32) -> u64 {
        if (SCRATCH..SCRATCH + 4 * self.scratch.len() as u64).contains(&address) {
            let word = (address - SCRATCH) / 4;
            self.accesses.push((false, word));
            return self.scratch[word as usize] as u64;
        }
        let at = (address - CTRL) as usize;
        let mut value = 0u64;
        for i in (0..width as usize / 8).rev() {
            value = value << 8 | self.ctrl[at + i] as u64;
        }
        value
    }

    fn store(&mut self, address: u64, value: u64) {
        assert!(
            address >= SCRATCH,
            "store outside the scratchpad: {address:#x}"
        );
        let word = (address - SCRATCH) / 4;
        self.accesses.push((true, word));
        self.scratch[word as usize] = value as u32;
    }

    /// Executes one instruction; `Some(label)` for a taken branch.
    fn step(&mut self, i: &Instruction) -> Option<Result<String, Stop>> {
        if let Some(guard) = &i.guard {
            if (self.regs[&guard.predicate] != 0) == guard.negated {
                return None;
            }
        }
        let op = i.opcode.base.as_str();
        let arg = |n: usize| self.value(&i.operands[n]);
        let mask = |v: u64| if bits(i) == 32 { v & 0xffff_ffff } else { v };
        let result = match op {
            "bra" => return Some(Ok(i.operands[0].to_string())),
            "ret" => return Some(Err(Stop::Returned)),
            "st" => {
                let (address, value) = (arg(0), arg(1));
                self.store(address, value);
                return None;
            }
            "ld" if i.opcode.has("param") => match &i.operands[1] {
                Operand::Address { base, .. } => self.params[base],
                other => panic!("parameter operand {other}"),
            },
            "ld" => self.load(arg(1), bits(i)),
            "mov" | "cvta" => arg(1),
            "add" => mask(arg(1).wrapping_add(arg(2))),
            "sub" => mask(arg(1).wrapping_sub(arg(2))),
            "mul" => mask(arg(1).wrapping_mul(arg(2))),
            "div" => arg(1) / arg(2),
            "rem" => arg(1) % arg(2),
            "and" => arg(1) & arg(2),
            "or" => arg(1) | arg(2),
            "xor" => arg(1) ^ arg(2),
            "shl" => mask(arg(1) << arg(2)),
            "shr" => arg(1) >> arg(2),
            "setp" => compare(i, arg(1), arg(2)) as u64,
            other => panic!("the interpreter does not know {other}"),
        };
        let Operand::Register(dst) = &i.operands[0] else {
            panic!("destination of {op}")
        };
        self.regs.insert(dst.clone(), result);
        None
    }

    /// Runs `body` from its first statement to a `ret` or the end of the prologue.
    fn run(&mut self, body: &[Statement]) -> Stop {
        let labels: HashMap<&str, usize> = body
            .iter()
            .enumerate()
            .filter_map(|(n, s)| match s {
                Statement::Label(l) => Some((l.as_str(), n)),
                _ => None,
            })
            .collect();
        let mut pc = 0;
        for _ in 0..1_000_000 {
            match &body[pc] {
                Statement::Comment(c) if c == END_OF_PROLOGUE => return Stop::EndOfPrologue,
                Statement::Instruction(i) => match self.step(i) {
                    Some(Ok(label)) => pc = labels[label.as_str()],
                    Some(Err(stop)) => return stop,
                    None => {}
                },
                _ => {}
            }
            pc += 1;
        }
        panic!("no end after a million statements")
    }
}

fn compare(i: &Instruction, a: u64, b: u64) -> bool {
    let signed = i.opcode.has("s32");
    let (a, b) = if signed {
        (a as u32 as i32 as i64, b as u32 as i32 as i64)
    } else {
        (a as i64, b as i64)
    };
    match i.opcode.modifiers[0].as_str() {
        "eq" => a == b,
        "ne" => a != b,
        "lt" => a < b,
        "ge" => a >= b,
        other => panic!("comparison {other}"),
    }
}

fn params() -> ControlParams {
    ControlParams {
        app_grid: (3, 2, 1),
        app_block: (10, 4, 2),
        stress_blocks: 3,
        randomise: true,
        seed: 7,
        stress_iterations: 5,
        scratch_words: 16 * 8,
        spread: 3,
        patch_words: 16,
        scratch_address: SCRATCH,
    }
}

/// The instrumented `small` kernel's body.
fn body(stress: StressStrategy) -> Vec<Statement> {
    let path = format!(
        "{}/tests/fixtures/ptx/harness_small.ptx",
        env!("CARGO_MANIFEST_DIR")
    );
    let module = parse(&std::fs::read_to_string(path).unwrap()).unwrap();
    let out = harness(&module, "small", &HarnessOptions { stress }).unwrap();
    let kernel = out.function("small").unwrap();
    kernel.body.clone().unwrap()
}

/// Runs real thread (`block`, `thread`) of the 1-D launch; returns it for inspection.
fn run_thread<'a>(
    body: &[Statement],
    control: &'a ControlBlock,
    ctrl: &'a [u8],
    scratch: &'a mut [u32],
    block: u32,
    thread: u32,
) -> (Stop, Thread<'a>) {
    let ((_, _, _), (threads, _, _)) = control.launch_grid();
    let mut t = Thread {
        regs: HashMap::from([
            ("%ctaid.x".to_string(), block as u64),
            ("%tid.x".to_string(), thread as u64),
            ("%ntid.x".to_string(), threads as u64),
        ]),
        params: HashMap::from([("small_gpuwmm_ctrl".to_string(), CTRL)]),
        ctrl,
        scratch,
        accesses: Vec::new(),
    };
    let stop = t.run(body);
    (stop, t)
}

fn dims(t: &Thread, family: &str) -> (u32, u32, u32) {
    let get = |c: &str| t.regs[&format!("%gwmm_{family}_{c}")] as u32;
    (get("x"), get("y"), get("z"))
}

#[test]
fn application_threads_get_the_predicted_virtual_ids() {
    for randomise in [false, true] {
        let control = ControlBlock::new(&ControlParams {
            randomise,
            ..params()
        })
        .unwrap();
        let bytes = control.to_bytes();
        let body = body(StressStrategy::None);
        let mut scratch = vec![0u32; 128];
        let ((blocks, _, _), (threads, _, _)) = control.launch_grid();
        let identity = ControlBlock::new(&ControlParams {
            randomise: false,
            ..params()
        })
        .unwrap();
        let mut moved = 0;
        for block in 0..blocks {
            for thread in 0..threads {
                let (stop, t) = run_thread(&body, &control, &bytes, &mut scratch, block, thread);
                let Some((vblock, vthread)) = control.virtual_ids(block, thread) else {
                    assert_eq!(stop, Stop::Returned, "stressing block {block}");
                    continue;
                };
                moved += (identity.virtual_ids(block, thread) != Some((vblock, vthread))) as u32;
                assert_eq!(stop, Stop::EndOfPrologue);
                assert_eq!(dims(&t, "ctaid"), vblock, "block {block} thread {thread}");
                assert_eq!(dims(&t, "tid"), vthread, "block {block} thread {thread}");
                assert_eq!(dims(&t, "nctaid"), (3, 2, 1));
                assert_eq!(dims(&t, "ntid"), (10, 4, 2));
            }
        }
        assert_eq!(moved > 0, randomise, "{moved} threads moved");
    }
}

/// Runs every stressing thread; returns the accesses of each, by stress-thread index.
fn stress_accesses(stress: StressStrategy, control: &ControlBlock) -> Vec<Vec<(bool, u64)>> {
    let bytes = control.to_bytes();
    let body = body(stress);
    let mut scratch = vec![0u32; control.params.scratch_words as usize];
    let ((blocks, _, _), (threads, _, _)) = control.launch_grid();
    let mut all = Vec::new();
    for block in control.app_blocks()..blocks {
        for thread in 0..threads {
            let (stop, t) = run_thread(&body, control, &bytes, &mut scratch, block, thread);
            assert_eq!(stop, Stop::Returned);
            all.push(t.accesses);
        }
    }
    all
}

#[test]
fn sys_threads_repeat_sigma_on_their_location() {
    let control = ControlBlock::new(&params()).unwrap();
    let sequence = parse_sequence("ld st2 ld").unwrap();
    let all = stress_accesses(StressStrategy::Sys { sequence }, &control);
    assert_eq!(all.len(), 3 * 80);
    let sigma = [false, true, true, false];
    for (t, accesses) in all.iter().enumerate() {
        let location = control.locations[t % 3] as u64;
        let (looped, sink) = accesses.split_at(accesses.len() - 1);
        assert_eq!(sink, [(true, location)], "the sink store");
        let expected: Vec<_> = (0..5).flat_map(|_| sigma.map(|s| (s, location))).collect();
        assert_eq!(looped, expected, "stress thread {t}");
    }
}

#[test]
fn rand_threads_make_random_accesses_in_the_scratchpad() {
    let control = ControlBlock::new(&params()).unwrap();
    let all = stress_accesses(StressStrategy::Rand, &control);
    let mut stores = 0;
    for accesses in &all {
        assert_eq!(accesses.len(), 5 + 1, "iterations plus the sink");
        assert!(accesses.iter().all(|&(_, w)| w < 128));
        stores += accesses[..5].iter().filter(|a| a.0).count();
    }
    let total = all.len() * 5;
    assert!(
        stores > total / 4 && stores < total * 3 / 4,
        "{stores} of {total}"
    );
    assert_ne!(all[0], all[1], "threads draw different numbers");
}

#[test]
fn cache_blocks_load_and_store_every_word_each_iteration() {
    let control = ControlBlock::new(&params()).unwrap();
    let all = stress_accesses(StressStrategy::Cache, &control);
    for block in all.chunks(80) {
        let mut count = vec![(0, 0); 128];
        for accesses in block {
            for &(store, word) in accesses {
                let c = &mut count[word as usize];
                if store {
                    c.1 += 1
                } else {
                    c.0 += 1
                }
            }
        }
        assert!(count.iter().all(|&c| c == (5, 5)), "{count:?}");
    }
}

#[test]
fn no_stress_returns_at_once_and_zero_iterations_do_nothing() {
    let control = ControlBlock::new(&params()).unwrap();
    assert!(stress_accesses(StressStrategy::None, &control)
        .iter()
        .all(Vec::is_empty));
    let idle = ControlBlock::new(&ControlParams {
        stress_iterations: 0,
        ..params()
    })
    .unwrap();
    for stress in [StressStrategy::Rand, StressStrategy::Cache] {
        assert!(stress_accesses(stress, &idle).iter().all(Vec::is_empty));
    }
    let word = |w: u32| layout::byte_offset(w);
    assert_eq!(word(layout::SCRATCH_ADDRESS) % 8, 0);
}
