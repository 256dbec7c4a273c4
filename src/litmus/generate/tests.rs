use super::*;

#[test]
fn generates_over_five_thousand_distinct_tests_the_parser_reads() {
    let tests = generate(Spread::OneGpu);
    assert!(tests.len() >= 5000, "{} tests", tests.len());
    let names: HashSet<&str> = tests.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names.len(), tests.len(), "names are unique");
    for t in tests.iter().step_by(97) {
        parse(Path::new(&t.path()), &t.text)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", t.name, t.text));
    }
}

#[test]
fn generation_is_deterministic() {
    assert_eq!(generate(Spread::OneGpu), generate(Spread::OneGpu));
}

#[test]
fn tests_across_gpus_put_thread_0_and_thread_1_on_two_gpus() {
    let tests = generate(Spread::AcrossGpus);
    assert!(tests.len() >= 3000, "{} tests", tests.len());
    for t in tests.iter().step_by(89) {
        let file = parse(Path::new(&t.path()), &t.text)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", t.name, t.text));
        assert_eq!(
            (file.threads[0].gpu, file.threads[1].gpu),
            (0, 1),
            "{}",
            t.name
        );
    }
    let one_gpu: HashSet<String> = generate(Spread::OneGpu)
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(tests.iter().all(|t| !one_gpu.contains(&t.name)));
}

/// QA: `litmus generate` into a folder of an earlier generation left that generation's tests
/// there, and a run of the folder ran them with no verdict. Only what a generation wrote (its
/// manifest) is removed: a folder's own `expected.csv` may list the user's tests.
#[test]
fn an_earlier_generations_tests_are_removed_and_other_files_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path();
    for file in ["MP/a.litmus", "SB/gone.litmus", "own/mine.litmus"] {
        std::fs::create_dir_all(out.join(file).parent().unwrap()).unwrap();
        std::fs::write(out.join(file), "PTX x\n").unwrap();
    }
    std::fs::write(
        out.join(MANIFEST),
        "# written by litmus generate\nMP/a.litmus\nSB/gone.litmus\n",
    )
    .unwrap();
    let kept: HashSet<String> = ["MP/a.litmus".to_string()].into();
    let stale = remove_stale(out, &kept).unwrap();
    assert_eq!(stale.removed, 1);
    assert!(!out.join("SB").exists(), "the emptied family folder stays");
    assert!(out.join("MP/a.litmus").exists());
    assert_eq!(stale.foreign, vec![out.join("own/mine.litmus")]);
}

#[test]
fn without_a_manifest_nothing_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("mine.litmus"), "PTX x\n").unwrap();
    std::fs::write(dir.path().join("expected.csv"), "test\nmine.litmus\n").unwrap();
    let stale = remove_stale(dir.path(), &HashSet::new()).unwrap();
    assert_eq!(stale.removed, 0);
    assert!(dir.path().join("mine.litmus").exists());
    assert_eq!(stale.foreign, vec![dir.path().join("mine.litmus")]);
}
