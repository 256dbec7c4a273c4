//! Every harness output assembles with ptxas for sm_70, sm_80 and sm_90, and the stress loops
//! keep exactly their accesses in SASS.
//!
//! Needs ptxas and cuobjdump (scripts/setup-cuda-tools.sh), found like every other tool.

mod common;

use common::{assemble_or_panic, ptx_fixture, sass_of, ARCHS, PTX_FIXTURES, SASS_ARCHS};
use gpuwmm::ptx::passes::harness::{harness, HarnessOptions};
use gpuwmm::ptx::passes::stress::{parse_sequence, sequence_to_string, StressStrategy};
use gpuwmm::ptx::print;
use gpuwmm::toolchain::{assemble, tools_for_tests, CudaTools};

fn sys(sigma: &str) -> StressStrategy {
    StressStrategy::Sys {
        sequence: parse_sequence(sigma).unwrap(),
    }
}

#[test]
fn every_harness_output_assembles_for_every_arch() {
    let tools = common::or_skip!(tools_for_tests());
    let mut failures = Vec::new();
    for (file, kernel) in PTX_FIXTURES {
        let module = ptx_fixture(file);
        for stress in [
            StressStrategy::None,
            sys("ld st"),
            sys("st2 ld3"),
            StressStrategy::Rand,
            StressStrategy::Cache,
        ] {
            let ptx = print(
                &harness(
                    &module,
                    kernel,
                    &HarnessOptions {
                        stress: stress.clone(),
                    },
                )
                .unwrap(),
            );
            for arch in ARCHS {
                if let Err(log) = assemble(&tools, &ptx, arch) {
                    failures.push(format!("{file} {stress} {arch}:\n{log}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The volatile (`.STRONG.SYS`) global accesses in the SASS of the harnessed `shapes` kernel
/// (which has none of its own), in program order, as `ld`/`st`.
fn strong_accesses(tools: &CudaTools, stress: StressStrategy, arch: &str) -> String {
    let module = harness(
        &ptx_fixture("shapes.ptx"),
        "shapes",
        &HarnessOptions { stress },
    )
    .unwrap();
    assemble_or_panic(tools, &module, arch, "shapes");
    let sass = sass_of(tools, &module, arch, "shapes");
    let ops: Vec<&str> = sass
        .instructions
        .iter()
        .filter(|i| i.is_strong_sys())
        .filter_map(|i| match (i.is_global_load(), i.is_global_store()) {
            (true, false) => Some("ld"),
            (false, true) => Some("st"),
            _ => None,
        })
        .collect();
    ops.join(" ")
}

#[test]
fn stress_accesses_survive_in_sass() {
    let tools = common::or_skip!(tools_for_tests());
    for arch in SASS_ARCHS {
        for sigma in [
            "ld st",
            "st",
            "ld",
            "ld3 st ld",
            "st2 ld2",
            "ld st2 ld st",
            "ld5",
        ] {
            let expected = sequence_to_string(&parse_sequence(sigma).unwrap());
            assert_eq!(
                strong_accesses(&tools, sys(sigma), arch),
                expected,
                "{arch} σ = {sigma}"
            );
        }
        for (stress, expected) in [
            (StressStrategy::Rand, "ld st"),
            (StressStrategy::Cache, "ld st"),
            (StressStrategy::None, ""),
        ] {
            assert_eq!(
                strong_accesses(&tools, stress.clone(), arch),
                expected,
                "{arch} {stress}"
            );
        }
    }
}
