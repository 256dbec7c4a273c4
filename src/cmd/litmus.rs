//! `gpuwmm litmus`: one litmus test on either backend, reported herd-style.

use super::{open, CmdResult, Failure};
use crate::cli::LitmusArgs;
use gpuwmm::backend::select::provenance;
use gpuwmm::litmus::run::{run_litmus, LitmusRun};
use gpuwmm::litmus::LitmusTest;
use indicatif::ProgressBar;

pub fn run(args: &LitmusArgs) -> CmdResult {
    let shape = args
        .test
        .ok_or_else(|| Failure::bad_input(anyhow::anyhow!("name a test: mp, sb, lb or corr")))?;
    let mut opened = open(&args.backend)?;
    let mut test = LitmusTest::new(shape, args.distance);
    test.fences = [args.fence_t0, args.fence_t1];
    test.access = args.access;
    let run = LitmusRun {
        iterations: args.iterations,
        instances: args.instances,
        block_threads: args.block_threads,
        ..LitmusRun::default()
    };
    let bar = progress_bar(args.iterations);
    let histogram = run_litmus(
        opened.backend.as_mut(),
        &test,
        &run,
        args.backend.seed,
        |h| {
            bar.set_message(format!("weak {}", h.weak(test.shape)));
            bar.inc(1);
        },
    )?;
    bar.finish_and_clear();
    outln!("{}", provenance(opened.backend.as_ref()))?;
    outln!(
        "distance {} words, fences t0 {} / t1 {}, {} access, {} launches x {} instances, seed {}",
        test.distance,
        fence_name(test.fences[0]),
        fence_name(test.fences[1]),
        args.access.name(),
        args.iterations,
        args.instances,
        args.backend.seed
    )?;
    out!("{}", histogram.report(test.shape))?;
    let total = histogram.total().max(1);
    outln!(
        "weak rate {:.4}% ({} of {})",
        100.0 * histogram.weak(test.shape) as f64 / total as f64,
        histogram.weak(test.shape),
        histogram.total()
    )?;
    Ok(())
}

fn fence_name(kind: Option<gpuwmm::ptx::passes::fences::FenceKind>) -> String {
    kind.map_or_else(|| "none".to_string(), |k| k.to_string())
}

fn progress_bar(len: u64) -> ProgressBar {
    super::progress::bar(len, "{pos}/{len} launches")
}
