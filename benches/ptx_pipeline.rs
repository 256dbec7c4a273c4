//! Benchmark: parse + instrument + print of a PTX module of more than 5,000 lines.
//!
//! The module is the corpus kernel `tests/fixtures/ptx/dot_inlined.ptx` with its kernel copied
//! under new names until it passes 5,000 lines. Instrumentation = every fence site gets a
//! `fence.sc.gpu`, then every kernel gets the stress harness (sys stress, σ = ld st). Prints the median and the spread over repeated runs.

use gpuwmm::ptx::passes::fences::{fence_sites, insert_fences, FenceKind, Granularity};
use gpuwmm::ptx::passes::harness::{harness_kernels, HarnessOptions};
use gpuwmm::ptx::passes::stress::{parse_sequence, StressStrategy};
use gpuwmm::ptx::{parse, print, Item};
use std::time::{Duration, Instant};

const MIN_LINES: usize = 5_000;
const REPETITIONS: usize = 30;

fn big_module_text() -> String {
    let base =
        parse(include_str!("../tests/fixtures/ptx/dot_inlined.ptx")).expect("fixture parses");
    let kernel = base.kernels().next().expect("fixture has a kernel").clone();
    let mut module = base.clone();
    let mut copy = 0;
    while print(&module).lines().count() < MIN_LINES {
        let mut k = kernel.clone();
        k.name = format!("{}_copy{copy}", kernel.name);
        for p in &mut k.params {
            p.decl = p.decl.replace(&kernel.name, &k.name);
            p.name = p.name.replace(&kernel.name, &k.name);
        }
        let text = print(&gpuwmm::ptx::Module {
            items: vec![Item::Function(k)],
        })
        .replace(
            &format!("{}_param", kernel.name),
            &format!("{}_copy{copy}_param", kernel.name),
        );
        let renamed = parse(&text).expect("copy parses");
        module.items.extend(renamed.items);
        copy += 1;
    }
    print(&module)
}

/// Parse, fence every site, harness the first `kernels` kernels, print.
fn pipeline(text: &str, kernels: usize) -> usize {
    let module = parse(text).expect("module parses");
    let sites = fence_sites(&module, Granularity::Instruction);
    let all: Vec<_> = sites.iter().collect();
    let module = insert_fences(&module, &all, FenceKind::ScGpu);
    let kernels: Vec<String> = module
        .kernels()
        .take(kernels)
        .map(|k| k.name.clone())
        .collect();
    let options = HarnessOptions {
        stress: StressStrategy::Sys {
            sequence: parse_sequence("ld st").expect("valid sequence"),
        },
    };
    let names: Vec<&str> = kernels.iter().map(String::as_str).collect();
    let module = harness_kernels(&module, &names, &options).expect("harness applies");
    print(&module).len()
}

fn time_pipeline(text: &str, kernels: usize) {
    let lines = text.lines().count();
    let mut times: Vec<Duration> = (0..REPETITIONS)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(pipeline(std::hint::black_box(text), kernels));
            start.elapsed()
        })
        .collect();
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "ptx pipeline, {lines} lines (parse + fence every site + harness {kernels} kernel(s) + print): \
         median {:.2} ms, min {:.2} ms, max {:.2} ms over {REPETITIONS} runs",
        ms(times[REPETITIONS / 2]),
        ms(times[0]),
        ms(times[REPETITIONS - 1])
    );
}

fn main() {
    let text = big_module_text();
    let kernels = parse(&text).expect("module parses").kernels().count();
    time_pipeline(&text, 1);
    time_pipeline(&text, kernels);
}
