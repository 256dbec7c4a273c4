use super::*;

#[test]
fn generates_over_five_thousand_distinct_tests_the_parser_reads() {
    let tests = generate();
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
    assert_eq!(generate(), generate());
}
