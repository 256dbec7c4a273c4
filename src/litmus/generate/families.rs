//! The shapes the generator starts from: the classic cycles of relations, each written as the
//! accesses of its threads and the values that close the cycle.
//!
//! A shape is `threads` separated by `|`, accesses by `;`: `Wx1` writes 1 to `x`, `Rx0` reads
//! `x` and the condition asks it to have read 0, `Ax0` adds 1 to `x` atomically and the
//! condition asks it to have read 0; `final` pins the last value of locations (the
//! coherence edges of the cycle). The condition is the cycle itself: the state every edge
//! (program order, reads-from, from-reads, coherence) holds in at once.

/// One family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub family: &'static str,
    /// The cycle, in diy's notation (documentation of what the shape is).
    pub cycle: &'static str,
    pub threads: &'static str,
    /// Final values the condition requires, as `x=2` separated by spaces.
    pub finals: &'static str,
}

const fn shape(
    family: &'static str,
    cycle: &'static str,
    threads: &'static str,
    finals: &'static str,
) -> Shape {
    Shape {
        family,
        cycle,
        threads,
        finals,
    }
}

/// Every family.
pub const SHAPES: &[Shape] = &[
    shape("MP", "PodWW Rfe PodRR Fre", "Wx1;Wy1|Ry1;Rx0", ""),
    shape("SB", "PodWR Fre PodWR Fre", "Wx1;Ry0|Wy1;Rx0", ""),
    shape("LB", "PodRW Rfe PodRW Rfe", "Rx1;Wy1|Ry1;Wx1", ""),
    shape("S", "PodWW Rfe PodRW Coe", "Wx2;Wy1|Ry1;Wx1", "x=2"),
    shape("R", "PodWW Coe PodWR Fre", "Wx1;Wy1|Wy2;Rx0", "y=2"),
    shape("2+2W", "PodWW Coe PodWW Coe", "Wx2;Wy1|Wy2;Wx1", "x=2 y=2"),
    shape("WRC", "Rfe PodRW Rfe PodRR Fre", "Wx1|Rx1;Wy1|Ry1;Rx0", ""),
    shape(
        "ISA2",
        "PodWW Rfe PodRW Rfe PodRR Fre",
        "Wx1;Wy1|Ry1;Wz1|Rz1;Rx0",
        "",
    ),
    shape(
        "IRIW",
        "Rfe PodRR Fre Rfe PodRR Fre",
        "Wx1|Rx1;Ry0|Wy1|Ry1;Rx0",
        "",
    ),
    shape("RWC", "Rfe PodRR Fre PodWR Fre", "Wx1|Rx1;Ry0|Wy1;Rx0", ""),
    shape(
        "WWC",
        "Rfe PodRW Rfe PodRW Coe",
        "Wx2|Rx2;Wy1|Ry1;Wx1",
        "x=2",
    ),
    shape(
        "3.SB",
        "PodWR Fre PodWR Fre PodWR Fre",
        "Wx1;Ry0|Wy1;Rz0|Wz1;Rx0",
        "",
    ),
    shape(
        "3.LB",
        "PodRW Rfe PodRW Rfe PodRW Rfe",
        "Rx1;Wy1|Ry1;Wz1|Rz1;Wx1",
        "",
    ),
    shape("CoRR", "Rfe PosRR Fre", "Wx1|Rx1;Rx0", ""),
    shape("CoRW", "PosRW Coe Rfe", "Rx2;Wx1|Wx2", "x=2"),
    shape("CoWR", "PosWR Fre Coe", "Wx1;Rx2|Wx2", "x=1"),
    shape("CoWW", "PosWW Coe Rfe PosRR Fre", "Wx1;Wx2|Rx2;Rx1", ""),
    shape("CoRR3", "Rfe PosRR Fre Coe", "Wx1|Rx1;Rx2|Wx2", "x=2"),
    shape("INC2", "RMW Fre RMW Fre (lost update)", "Ax0|Ax0", "x=1"),
    shape("MP+INC", "PodWW Rfe RMW PodRR Fre", "Wx1;Wy1|Ay1;Rx0", ""),
    shape("LB+INC", "PodRW Rfe RMW PodRW Rfe", "Rx1;Wy1|Ay1;Wx1", ""),
];

/// What an access does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Write,
    Read,
    /// `atom.add` of 1, whatever the order (reads its value).
    Increment,
}

/// One access of a shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    pub kind: Kind,
    pub loc: char,
    pub value: i64,
}

impl Shape {
    /// The accesses of each thread.
    pub fn accesses(&self) -> Vec<Vec<Access>> {
        self.threads
            .split('|')
            .map(|t| t.split(';').map(parse_access).collect())
            .collect()
    }

    /// `(location, value)` pairs of `finals`.
    pub fn final_values(&self) -> Vec<(char, i64)> {
        self.finals
            .split_whitespace()
            .map(|f| {
                let (l, v) = f.split_once('=').expect("finals are loc=value");
                (
                    l.chars().next().expect("a location"),
                    v.parse().expect("a value"),
                )
            })
            .collect()
    }
}

fn parse_access(text: &str) -> Access {
    let mut chars = text.chars();
    let kind = chars.next().expect("an access kind");
    let loc = chars.next().expect("a location");
    let kind = match kind {
        'W' => Kind::Write,
        'R' => Kind::Read,
        _ => Kind::Increment,
    };
    Access {
        kind,
        loc,
        value: chars.as_str().parse().expect("a value"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shape_reads_values_some_write_of_its_location_stores() {
        for s in SHAPES {
            let all: Vec<Access> = s.accesses().concat();
            for a in all.iter().filter(|a| a.kind == Kind::Read && a.value != 0) {
                assert!(
                    all.iter()
                        .any(|w| w.kind != Kind::Read && w.loc == a.loc && w.value == a.value)
                        || all
                            .iter()
                            .any(|w| w.kind == Kind::Increment && w.loc == a.loc),
                    "{}: {a:?}",
                    s.family
                );
            }
        }
    }
}
