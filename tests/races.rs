//! `check --races` on kernels of our own (`tests/fixtures/apps/races-*`), each naming the bug it
//! guards, and on the built-in fence-less apps. Simulator only: the races come from its PTX
//! model. Source lines are found by their `// RACE <name>` markers in each kernel.

mod common;
use common::fixture_app;

use serde_json::Value;
use std::path::Path;

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// The line of the fixture's kernel marked `// RACE <marker>`.
fn marked_line(app: &str, marker: &str) -> u64 {
    marked_line_in(app, "kernel.cu", marker)
}

/// The line of the fixture's `file` marked `// RACE <marker>`.
fn marked_line_in(app: &str, file: &str, marker: &str) -> u64 {
    let text = std::fs::read_to_string(fixture_app(app).join(file)).unwrap();
    let tag = format!("// RACE {marker}");
    let index = text
        .lines()
        .position(|l| l.trim_end().ends_with(&tag))
        .unwrap_or_else(|| panic!("no line marked {tag:?} in {app}"));
    index as u64 + 1
}

/// `check APP --races [mode] --json` on the simulator for `runs` runs (the app a fixture when
/// `fixture`), in a temporary folder: the JSON document, or `None` without the CUDA tools.
fn check_races(app: &str, is_fixture: bool, runs: u32, extra: &[&str]) -> Option<Value> {
    let dir = common::temp_dir_with_tools()?;
    Some(check_races_in(dir.path(), app, is_fixture, runs, extra))
}

fn check_races_in(dir: &Path, app: &str, is_fixture: bool, runs: u32, extra: &[&str]) -> Value {
    std::fs::create_dir_all(dir).unwrap();
    let runs = runs.to_string();
    let app_dir = fixture_app(app);
    let journal = dir.join("j.csv");
    let mut args = vec![
        "check",
        app,
        "--backend",
        "sim",
        "--runs",
        &runs,
        "--json",
        "--journal",
        journal.to_str().unwrap(),
    ];
    if is_fixture {
        args.extend(["--app-dir", app_dir.to_str().unwrap()]);
    }
    args.extend(extra);
    let out = common::cli::gpuwmm(&args, dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn races(document: &Value) -> &Vec<Value> {
    document["races"].as_array().expect("a races array")
}

fn class(race: &Value) -> &str {
    race["class"].as_str().unwrap()
}

fn lines(race: &Value) -> (u64, u64) {
    (
        race["first"]["line"].as_u64().unwrap_or(0),
        race["second"]["line"].as_u64().unwrap_or(0),
    )
}

/// Every race reported has class `expected`, and one of them is between the two lines.
fn assert_only_class_between(document: &Value, expected: &str, a: u64, b: u64) {
    let races = races(document);
    assert!(!races.is_empty(), "no race reported");
    for race in races {
        assert_eq!(class(race), expected, "{race:#}");
    }
    let found = races.iter().any(|r| {
        let (x, y) = lines(r);
        (x, y) == (a, b) || (x, y) == (b, a)
    });
    assert!(found, "no race between lines {a} and {b}: {races:#?}");
}

/// [`assert_only_class_between`] the lines of the fixture `app` marked `first` and `second`.
fn assert_only_class_between_markers(
    document: &Value,
    app: &str,
    expected: &str,
    [first, second]: [&str; 2],
) {
    let (a, b) = (marked_line(app, first), marked_line(app, second));
    assert_only_class_between(document, expected, a, b);
}

/// `check --races --json` for 300 runs of a copy of the fixture `app` in `dir`, its kernel
/// edited by `edits` (text, replacement).
fn check_races_of_edited_copy(dir: &Path, app: &str, edits: &[(&str, &str)]) -> Value {
    let copy = common::copy_fixture_app(app, &dir.join("edited"));
    let mut text = std::fs::read_to_string(copy.join("kernel.cu")).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "{from:?} not in {app}");
        text = text.replace(from, to);
    }
    std::fs::write(copy.join("kernel.cu"), text).unwrap();
    let journal = dir.join("edited.csv");
    let args = [
        "check",
        "--app-dir",
        copy.to_str().unwrap(),
        "--backend",
        "sim",
        "--runs",
        "300",
        "--races",
        "--json",
        "--journal",
        journal.to_str().unwrap(),
    ];
    let out = common::cli::gpuwmm(&args, dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A copy of the fixture `app` in `dir`, its kernel edited by `edits` (text, replacement):
/// 300 runs with `--races` pass with no race recorded (the report's advice, followed).
fn assert_edited_copy_passes_without_races(dir: &Path, app: &str, edits: &[(&str, &str)]) {
    let document = check_races_of_edited_copy(dir, app, edits);
    assert_eq!(document["outcomes"]["fail"], 0, "{document:#}");
    assert_eq!(races(&document), &Vec::<Value>::new());
}

fn assert_nothing_reported(app: &str) {
    let document = common::or_skip!(check_races(app, true, 100, &["--races"]));
    assert_eq!(races(&document), &Vec::<Value>::new());
}

#[test]
fn volatile_message_passing_without_fences_is_a_race_a_fence_can_order_with_both_sides_named() {
    let app = "races-volatile-mp";
    let document = common::or_skip!(check_races(app, true, 100, &["--races"]));
    assert_only_class_between_markers(&document, app, "fence-can-order", ["writer", "reader"]);
    let (writer, reader) = (marked_line(app, "writer"), marked_line(app, "reader"));
    let race = &races(&document)[0];
    // Direction matters here: the writer releases, the reader acquires.
    assert_eq!(lines(race), (writer, reader));
    let missing = race["missing"].as_str().unwrap();
    assert!(
        missing.contains("no release pattern on the signalling side"),
        "{missing}"
    );
    assert!(
        missing.contains("no acquire pattern on the waiting side"),
        "{missing}"
    );
    assert!(
        missing.contains(".gpu"),
        "two CTAs need gpu scope: {missing}"
    );
    assert_eq!(race["same_cta"], Value::Bool(false));
    assert!(race["first"]["source"]
        .as_str()
        .unwrap()
        .contains("data[0] = 42"));
}

#[test]
fn strict_races_leave_out_unsynchronised_strong_accesses() {
    let document = common::or_skip!(check_races(
        "races-volatile-mp",
        true,
        50,
        &["--races", "strict"]
    ));
    assert_eq!(races(&document), &Vec::<Value>::new());
}

#[test]
fn a_locked_volatile_write_against_an_unlocked_write_in_another_block_is_a_race_no_fence_can_order()
{
    let app = "races-unlocked-write";
    let document = common::or_skip!(check_races(app, true, 100, &["--races"]));
    let markers = ["locked", "unlocked"];
    assert_only_class_between_markers(&document, app, "no-fence-can-order", markers);
}

#[test]
fn a_read_after_the_unlock_is_a_race_no_fence_can_order_and_the_advice_is_to_move_it_inside() {
    let app = "races-read-after-unlock";
    let document = common::or_skip!(check_races(app, true, 100, &["--races"]));
    let markers = ["locked", "after"];
    assert_only_class_between_markers(&document, app, "no-fence-can-order", markers);
    let after = marked_line(app, "after");
    let missing = races(&document)[0]["missing"].as_str().unwrap();
    assert!(missing.contains("move it inside"), "{missing}");
    assert!(missing.contains(&format!(":{after}")), "{missing}");
}

/// Regression: the recorder kept accesses by their start address, so a byte written inside a
/// word and a read of the whole word were never compared: a race PTX has (the two overlap)
/// went unreported.
#[test]
fn a_byte_written_inside_a_word_another_cta_reads_whole_is_a_data_race() {
    let app = "races-byte-in-word";
    let document = common::or_skip!(check_races(app, true, 20, &["--races"]));
    assert_only_class_between_markers(&document, app, "data-race", ["byte", "word"]);
}

/// An access in code inlined from a header is named at the kernel's call line, as fence sites
/// are, and at its own line in the header (`inner`), with both lines' text.
#[test]
fn a_race_in_inlined_header_functions_names_the_call_lines_and_the_header_lines() {
    let app = "races-inlined-header";
    let document = common::or_skip!(check_races(app, true, 20, &["--races"]));
    let markers = ["fill-call", "read-call"];
    assert_only_class_between_markers(&document, app, "data-race", markers);
    let race = &races(&document)[0];
    let ends = [(&race["first"], "fill"), (&race["second"], "read")];
    for (end, marker) in ends {
        let inner = &end["inner"];
        assert!(
            inner["file"].as_str().unwrap().ends_with("cells.cuh"),
            "{end:#}"
        );
        let line = marked_line_in(app, "cells.cuh", marker);
        assert_eq!(inner["line"].as_u64(), Some(line), "{end:#}");
        let text = end["inner_source"].as_str().unwrap();
        assert!(text.ends_with(&format!("// RACE {marker}")), "{text}");
    }
}

/// Shared memory is recorded too: the plain payload of a handoff between two warps through
/// shared memory, with no fence, is a data race between threads of one CTA.
#[test]
fn an_unfenced_shared_memory_handoff_between_warps_is_a_data_race_in_one_cta() {
    let document = common::or_skip!(check_races("shared-handoff", true, 20, &["--races"]));
    let races = races(&document);
    assert_eq!(races.len(), 1, "{races:#?}");
    assert_eq!(class(&races[0]), "data-race");
    assert_eq!(races[0]["same_cta"], true);
    for end in ["first", "second"] {
        let ptx = races[0][end]["ptx"].as_str().unwrap();
        assert!(ptx.contains(".shared"), "{ptx}");
    }
    let fenced = check_races("shared-handoff-fenced", true, 100, &["--races"]).unwrap();
    assert_eq!(fenced["races"], serde_json::json!([]));
}

#[test]
fn cta_scoped_atomics_on_one_word_from_two_ctas_are_a_data_race() {
    let app = "races-cta-atomics";
    let document = common::or_skip!(check_races(app, true, 50, &["--races", "strict"]));
    assert_only_class_between_markers(&document, app, "data-race", ["add", "add"]);
    let missing = races(&document)[0]["missing"].as_str().unwrap();
    assert!(missing.contains("leaves out the other CTA"), "{missing}");
}

#[test]
fn a_lock_taken_with_cta_scoped_atomics_by_two_ctas_is_a_data_race_on_the_lock_word() {
    let app = "races-cta-lock";
    let document = common::or_skip!(check_races(app, true, 100, &["--races"]));
    let (take, give) = (marked_line(app, "take"), marked_line(app, "give"));
    let races = races(&document);
    let on_lock_word = |r: &&Value| {
        let (a, b) = lines(r);
        [a, b].iter().all(|l| *l == take || *l == give)
    };
    let lock_races: Vec<&Value> = races.iter().filter(on_lock_word).collect();
    assert!(!lock_races.is_empty(), "{races:#?}");
    assert!(lock_races.iter().all(|r| class(r) == "data-race"));
}

/// A payload published through a `.cta` flag between CTAs was told "make both strong, or order
/// them": nothing named the flag, whose scope is the bug. Now the payload names the flag's two
/// lines and their scope, the flag pair offers no fence, and the advice followed (the flag at
/// device scope) passes with no race.
#[test]
fn a_payload_behind_a_cta_scoped_flag_between_ctas_names_the_flag_scope_to_widen() {
    let app = "races-cta-flag";
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let document = check_races_in(dir.path(), app, true, 100, &["--races"]);
    let (release, acquire) = (marked_line(app, "release"), marked_line(app, "acquire"));
    let races = races(&document);
    let payload = (marked_line(app, "payload"), marked_line(app, "read"));
    let payload = (races.iter().find(|r| lines(r) == payload))
        .unwrap_or_else(|| panic!("no payload pair: {races:#?}"));
    let missing = payload["missing"].as_str().unwrap();
    let named = format!(
        "only through kernel.cu:{release} and kernel.cu:{acquire}, whose .cta scope leaves out \
         the other CTA: no fence widens it"
    );
    assert!(missing.contains(&named), "{missing}");
    let flag = (races.iter().find(|r| lines(r) == (release, acquire)))
        .unwrap_or_else(|| panic!("no flag pair: {races:#?}"));
    assert_eq!(class(flag), "data-race");
    let missing = flag["missing"].as_str().unwrap();
    assert!(
        missing.contains("no fence makes them morally strong"),
        "{missing}"
    );
    let widened = [("thread_scope_block", "thread_scope_device")];
    assert_edited_copy_passes_without_races(dir.path(), app, &widened);
}

/// Write-to-read causality through a thread without fences: the payload's advice was the
/// generic "make both strong, or order them", naming none of the three threads. It now names
/// the forwarding thread's read and write and the fence between them; followed, the app passes
/// with no race.
#[test]
fn a_payload_forwarded_by_a_thread_without_fences_names_the_fence_that_thread_lacks() {
    let app = "races-forwarded";
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let document = check_races_in(dir.path(), app, true, 100, &["--races"]);
    assert_only_class_between_markers(&document, app, "data-race", ["payload", "read"]);
    let (read, write) = (
        marked_line(app, "forward-read"),
        marked_line(app, "forward-write"),
    );
    let missing = races(&document)[0]["missing"].as_str().unwrap();
    let named = format!(
        "that thread reads at kernel.cu:{read}, then writes kernel.cu:{write}, which the next \
         thread reads; a fence.acq_rel.gpu in that thread after kernel.cu:{read} and before \
         kernel.cu:{write}"
    );
    assert!(missing.contains(&named), "{missing}");
    assert!(!missing.contains("signalling side"), "{missing}");
    let fence = "cuda::atomic_thread_fence(cuda::memory_order_acq_rel, \
                 cuda::thread_scope_device);";
    let fenced = format!("}}\n        {fence}\n        f[1] = 1;");
    let edits = [("}\n        f[1] = 1;", fenced.as_str())];
    assert_edited_copy_passes_without_races(dir.path(), app, &edits);
}

/// Regression: a payload raised to another warp of its CTA without a fence, then passed on to
/// another CTA with gpu fences, was said to need a `fence.acq_rel.gpu` after it. The thread
/// that reads its flag is of the writer's CTA, and PTX's causality order is transitive, so the
/// advice names a `.cta` release; followed, the app passes with no race left.
#[test]
fn a_payload_forwarded_inside_its_cta_first_names_a_cta_release() {
    let app = "races-forwarded-in-cta";
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let document = check_races_in(dir.path(), app, true, 100, &["--races"]);
    assert_only_class_between_markers(&document, app, "data-race", ["payload", "read"]);
    let payload = marked_line(app, "payload");
    let missing = races(&document)[0]["missing"].as_str().unwrap();
    let named = format!(
        "no release pattern on the signalling side: a fence.acq_rel.cta after \
         kernel.cu:{payload}"
    );
    assert!(missing.contains(&named), "{missing}");
    assert!(!missing.contains("fence.acq_rel.gpu"), "{missing}");
    let fence = "cuda::atomic_thread_fence(cuda::memory_order_acq_rel, \
                 cuda::thread_scope_block);";
    let fenced = format!("// RACE payload\n            {fence}");
    let edits = [("// RACE payload", fenced.as_str())];
    assert_edited_copy_passes_without_races(dir.path(), app, &edits);
}

/// QA bug (Peterson's lock as harden's patch fences it: a `fence.sc` after each of its two
/// stores, an acquire after the spin and a release before the unlock): `check --races` listed
/// `*turn = other` against the other thread's write of `turn`, and against its spin's read of
/// it, as races no fence can order with advice to take a lock, in 5 of 1,000 runs: those in
/// which no thread read `turn` twice in its spin, then the only sign of a spin. A load that
/// decides whether a loop that writes no memory goes round again is a spin's read now.
#[test]
fn a_peterson_locks_turn_read_once_by_its_spin_is_still_the_synchronisation() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let release_acquire = "cuda::atomic_thread_fence(cuda::memory_order_acq_rel, \
                           cuda::thread_scope_device);";
    let spin = "while (flag[other] == 1 && *turn == other) {\n        }";
    let acquired = format!(
        "while (flag[other] == 1 && *turn == other) {{\n            {release_acquire}\n        \
         }}\n        {release_acquire}"
    );
    let released = format!("out[me * 4 + i] = c;\n        {release_acquire}");
    let edits = [
        (
            "extern \"C\" __global__ void app(",
            "#include <cuda/atomic>\nextern \"C\" __global__ void app(",
        ),
        ("flag[me] = 1;", "flag[me] = 1;\n        __threadfence();"),
        ("*turn = other;", "*turn = other;\n        __threadfence();"),
        (spin, acquired.as_str()),
        ("out[me * 4 + i] = c;", released.as_str()),
    ];
    assert_edited_copy_passes_without_races(dir.path(), "peterson-lock", &edits);
}

/// Regression (a bounded queue with the consumer's release missing failed about one run in 12
/// by load buffering and reported no race): the consumer reads its slot lap after lap, so the
/// slot passed for a flag spun on and its pairs for the synchronisation itself; and a slot read
/// deferred past the hand-back was compared with what the producer had heard last, or with the
/// consumer's clock when it was performed, not when it was issued. The pair is reported with
/// the release the consumer lacks, and with that fence the queue passes with no race left.
#[test]
fn a_queue_slot_emptied_without_a_release_before_its_hand_back_is_a_race_a_fence_can_order() {
    let app = "races-queue-slot";
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let document = check_races_in(dir.path(), app, true, 300, &["--races"]);
    assert_only_class_between_markers(&document, app, "fence-can-order", ["empty", "fill"]);
    let (empty, hand_back) = (marked_line(app, "empty"), marked_line(app, "hand-back"));
    let race = &races(&document)[0];
    assert_eq!(lines(race), (empty, marked_line(app, "fill")));
    let missing = race["missing"].as_str().unwrap();
    let named = format!(
        "no release pattern on the signalling side: a fence.acq_rel.gpu after \
         kernel.cu:{empty}, before kernel.cu:{hand_back}"
    );
    assert!(missing.contains(&named), "{missing}");
    assert!(!missing.contains("waiting side"), "{missing}");
    let read = "int v = slot[s]; // RACE empty";
    let fenced = format!("{read}\n            acq_rel();");
    assert_edited_copy_passes_without_races(dir.path(), app, &[(read, fenced.as_str())]);
}

#[test]
fn a_critical_section_behind_a_lock_without_fences_is_a_data_race_on_the_counter() {
    let app = "races-lock-no-fences";
    let document = common::or_skip!(check_races(app, true, 100, &["--races"]));
    assert_only_class_between_markers(&document, app, "data-race", ["counter", "counter"]);
}

/// Double-checked initialisation without fences: a block that takes the lock may read `ready`
/// stale, though the lock passed to it from the block that raised `ready`, and fill the table
/// again while others read it. `ready` is read twice without a write between and carries the
/// fast path's communication, so its pairs passed for the synchronisation itself and nothing
/// named the missing release. A stale read that its thread acts on (reads nowhere there again,
/// as a spin would) is not that: the pair is reported with the side that lacks its fence.
#[test]
fn a_stale_recheck_of_a_ready_flag_after_taking_the_lock_is_a_race_a_fence_can_order() {
    let app = "races-double-checked-init";
    let document = common::or_skip!(check_races(app, true, 300, &["--races"]));
    let (write, recheck) = (
        marked_line(app, "ready-write"),
        marked_line(app, "ready-recheck"),
    );
    let races = races(&document);
    let race = (races.iter().find(|r| lines(r) == (write, recheck)))
        .unwrap_or_else(|| panic!("no race from {write} to {recheck}: {races:#?}"));
    assert_eq!(class(race), "fence-can-order");
    let missing = race["missing"].as_str().unwrap();
    let release = format!(
        "no release pattern on the signalling side: a fence.acq_rel.gpu after kernel.cu:{write}"
    );
    assert!(missing.contains(&release), "{missing}");
}

/// Message passing through relaxed RMWs with a fence on the writer's side only: the reader's
/// `atomicAdd(p, 0)` of the payload may read the value before the payload write. The recorder
/// took every RMW to read the newest write, so that stale read passed for an observation and
/// `check --races` reported nothing on an app failing half its runs. Now the payload pair is
/// reported, with the reader's missing acquire; with that fence too, nothing is.
#[test]
fn a_stale_payload_read_by_a_relaxed_rmw_names_the_acquire_the_reader_lacks() {
    let Some(dir) = common::temp_dir_with_tools() else {
        return;
    };
    let app = "rmw-message-passing";
    let writer = ("// FENCE writer", "__threadfence();");
    let document = check_races_of_edited_copy(&dir.path().join("writer"), app, &[writer]);
    assert!(
        document["outcomes"]["fail"].as_u64().unwrap() > 0,
        "{document:#}"
    );
    let (write, read) = (
        common::fixture_kernel_line(app, "// FENCE writer") as u64,
        common::fixture_kernel_line(app, "atomicAdd(&data[0], 0)") as u64,
    );
    assert_only_class_between(&document, "fence-can-order", write, read);
    let race = &races(&document)[0];
    let missing = race["missing"].as_str().unwrap();
    assert!(
        missing.contains("no acquire pattern on the waiting side"),
        "{missing}"
    );
    assert!(!missing.contains("no release pattern"), "{missing}");
    let reader = (
        "out[0] = atomicAdd",
        "__threadfence();\n        out[0] = atomicAdd",
    );
    let both = dir.path().join("both");
    assert_edited_copy_passes_without_races(&both, app, &[writer, reader]);
}

#[test]
fn a_correct_gpu_scope_lock_with_fences_reports_no_race() {
    assert_nothing_reported("races-gpu-lock");
}

#[test]
fn a_release_acquire_handoff_with_a_plain_payload_reports_no_race() {
    assert_nothing_reported("races-release-acquire");
}

#[test]
fn a_bare_flag_spin_is_synchronisation_not_a_race() {
    assert_nothing_reported("races-bare-flag");
}

/// The recorder once ignored `bar.arrive`: a producer warp that arrives at a named barrier
/// without waiting and a consumer warp that waits there were reported as a data race, though
/// PTX orders the producers' writes before the consumers' reads.
#[test]
fn a_counted_producer_consumer_barrier_is_not_reported_as_a_race() {
    assert_nothing_reported("races-counted-barrier");
}

/// Regression (advice across a barrier): threads 0 and 1 store, `__syncthreads()`, then thread
/// 0 raises the flag. The advice put the release after the data store, where thread 1's fence
/// orders nothing for the reader (followed, such an app failed 1,070 of 2,000 runs). The word
/// reaches the reader through thread 0, so the release belongs after the barrier, before the
/// flag; followed, the app passes with no race left.
#[test]
fn data_passed_on_at_a_barrier_gets_its_release_after_the_barrier_in_the_thread_that_raises_the_flag(
) {
    let app = "races-barrier-relay";
    let Some(dir) = common::temp_dir_with_tools() else {
        return;
    };
    let document = check_races_in(&dir.path().join("as-is"), app, true, 100, &["--races"]);
    assert_only_class_between_markers(&document, app, "data-race", ["writer", "reader"]);
    let line = |marker| marked_line(app, marker);
    let missing = races(&document)[0]["missing"].as_str().unwrap();
    for expected in [
        format!("it reaches that thread at kernel.cu:{}", line("barrier")),
        format!(
            "a fence.acq_rel.gpu in that thread after kernel.cu:{} and before kernel.cu:{}",
            line("barrier"),
            line("flag")
        ),
        format!(
            "the other thread's write, before kernel.cu:{}",
            line("reader")
        ),
    ] {
        assert!(missing.contains(&expected), "{expected:?} in {missing}");
    }
    let edits = [
        ("*flag = 1;", "__threadfence(); *flag = 1;"),
        ("int sum =", "__threadfence(); int sum ="),
    ];
    assert_edited_copy_passes_without_races(dir.path(), app, &edits);
}

/// A last-block-done reduction whose every last-block thread reads a partial sum: the ticket
/// is read by thread 0 alone, and `__syncthreads()` passes it on. The report named the pair
/// but only said "make both strong, or order them": the threads communicate through thread 0,
/// whose acquire, after the ticket and before the barrier, is what is missing. Followed, the
/// app passes with no race left.
#[test]
fn a_ticket_passed_on_at_a_barrier_gets_its_acquire_in_the_thread_that_took_it() {
    let app = "races-last-block";
    let Some(dir) = common::temp_dir_with_tools() else {
        return;
    };
    let document = check_races_in(&dir.path().join("as-is"), app, true, 300, &["--races"]);
    assert_only_class_between_markers(&document, app, "data-race", ["writer", "reader"]);
    let (ticket, barrier) = (marked_line(app, "ticket"), marked_line(app, "barrier"));
    let missing = races(&document)[0]["missing"].as_str().unwrap();
    let expected = format!(
        "a fence.acq_rel.gpu in that thread after kernel.cu:{ticket} and before kernel.cu:{barrier}"
    );
    assert!(missing.contains(&expected), "{expected:?} in {missing}");
    assert!(!missing.contains("no release pattern"), "{missing}");
    let edits = [(
        "last = (ticket == gridDim.x - 1);",
        "__threadfence(); last = (ticket == gridDim.x - 1);",
    )];
    assert_edited_copy_passes_without_races(dir.path(), app, &edits);
}

/// Regression guard for the journal: the summary of a check resumed half-way is the summary
/// of the same check run in one go (runs and occurrences per pair).
#[test]
fn the_races_summary_survives_a_resume() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let app = "races-unlocked-write";
    let whole = check_races_in(&dir.path().join("whole"), app, true, 60, &["--races"]);
    let halves = dir.path().join("halves");
    check_races_in(&halves, app, true, 30, &["--races"]);
    let resumed = check_races_in(&halves, app, true, 60, &["--resume"]);
    assert_eq!(races(&whole), races(&resumed));
    assert_eq!(whole["runs"], resumed["runs"]);
}

/// Recording is opt-in and draws no random numbers: in an app without atomics (recording
/// defers no read-modify-write, so an app with them may schedule differently) the same seed
/// gives the same outcomes with and without `--races`, and twice the same races with it.
#[test]
fn recording_races_changes_no_outcome_and_repeats_for_a_seed() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let app = "handoff-grid";
    let with =
        |sub: &str, extra: &[&str]| check_races_in(&dir.path().join(sub), app, true, 60, extra);
    let plain = with("plain", &[]);
    let first = with("first", &["--races"]);
    let second = with("second", &["--races"]);
    assert_eq!(plain["outcomes"], first["outcomes"]);
    assert_eq!(plain["first_error"]["run"], first["first_error"]["run"]);
    assert!(plain.get("races").is_none());
    assert_eq!(races(&first), races(&second));
}

/// A built-in fence-less app names racing source lines (pairs whose both ends have a line),
/// and with a fence after every access site it has no race that fences can order left.
fn assert_built_in_races_named_and_fenced_away(app: &str, runs: u32) {
    let nf = common::or_skip!(check_races(app, false, runs, &["--races"]));
    let named = races(&nf).iter().any(|r| {
        let (a, b) = lines(r);
        a > 0 && b > 0
    });
    assert!(named, "{:#?}", races(&nf));
    let fenced = common::or_skip!(check_races(
        app,
        false,
        runs,
        &["--races", "--fences", "all"]
    ));
    let orderable: Vec<&Value> = races(&fenced)
        .iter()
        .filter(|r| class(r) != "no-fence-can-order")
        .collect();
    assert!(orderable.is_empty(), "{orderable:#?}");
}

/// The fence-less reduction: its racing lines are the partial sum's plain store and the last
/// block's read of it.
#[test]
fn sdk_red_without_fences_names_the_partial_sums_and_fenced_leaves_no_orderable_race() {
    let nf = common::or_skip!(check_races("sdk-red-nf", false, 60, &["--races"]));
    let kernel = std::fs::read_to_string(Path::new(REPO).join("apps/sdk-red/kernel.cu")).unwrap();
    let text = |line: u64| kernel.lines().nth(line as usize - 1).unwrap().to_string();
    let publish = races(&nf).iter().any(|r| {
        let (a, b) = lines(r);
        class(r) == "data-race" && text(a).contains("partial[") && text(b).contains("partial[")
    });
    assert!(publish, "{:#?}", races(&nf));
    assert_built_in_races_named_and_fenced_away("sdk-red-nf", 60);
}

#[test]
fn ls_bh_without_fences_names_racing_lines_and_fenced_leaves_no_orderable_race() {
    assert_built_in_races_named_and_fenced_away("ls-bh-nf", 10);
}

#[test]
fn cub_scan_without_fences_names_racing_lines_and_fenced_leaves_no_orderable_race() {
    assert_built_in_races_named_and_fenced_away("cub-scan-nf", 10);
}

#[test]
fn cccl_scan_without_fences_names_racing_lines_and_fenced_leaves_no_orderable_race() {
    assert_built_in_races_named_and_fenced_away("cccl-scan-nf", 10);
}

/// Bug: `replay` ran a `--races` check's run without recording races, and recording changes
/// how the simulator defers read-modify-writes, so in an app with atomics the replayed run was
/// another run ("differs: recorded pass, replayed fail"). Every pass of a recording check of
/// sdk-red-nf (most of its runs fail, and fewer pass without recording) replays as a pass.
#[test]
fn replay_of_a_races_check_records_races_as_the_run_did() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let document = check_races_in(dir.path(), "sdk-red-nf", false, 60, &["--races"]);
    let journal = std::fs::read_to_string(dir.path().join("j.csv")).unwrap();
    let mut rows = journal.lines();
    let header: Vec<&str> = rows.next().unwrap().split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (run, outcome) = (column("run"), column("outcome"));
    let passes: Vec<String> = rows
        .map(|row| row.split(',').collect::<Vec<_>>())
        .filter(|fields| fields[outcome] == "pass")
        .map(|fields| fields[run].to_string())
        .collect();
    assert!(
        !passes.is_empty(),
        "no run passed: {}",
        document["outcomes"]
    );
    for run in &passes {
        let out = common::cli::gpuwmm(&["replay", "j.csv", run], dir.path());
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("reproduced: pass"), "run {run}: {stdout}");
    }
}
