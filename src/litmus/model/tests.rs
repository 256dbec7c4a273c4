use super::*;
use crate::litmus::file::parse::parse;
use std::path::Path;

fn run(text: &str) -> ModelOutcome {
    let test = parse(Path::new("t.litmus"), text).expect("test parses");
    model(&test).expect("test is modelled")
}

#[test]
fn mp_relaxed_without_fences_allows_the_weak_state() {
    let o = run("PTX MP\n{ x=0; y=0; }\n P0@cta 0,gpu 0 | P1@cta 1,gpu 0 ;\n st.weak x, 1 | ld.relaxed.gpu r0, y ;\n st.relaxed.gpu y, 1 | ld.weak r1, x ;\nexists (P1:r0 == 1 /\\ P1:r1 == 0)\n");
    assert_eq!(o.expected(), Expected::Allowed);
    assert_eq!(o.sc_reachable(), ScReachable::No);
}
