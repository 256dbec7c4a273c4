//! Barrier synchronisation (`bar.cta.sync`, `bar.cta.arrive`), in the semantics the published
//! verdicts of the suite use (Dat3M's): a barrier is named by all its operands but a third
//! one, and synchronises the events of one CTA that use that name, with no phases.
//!
//! Without a third operand every `sync` of a barrier synchronises with every other event on it
//! (an `arrive` synchronises with the `sync`s but waits for nothing). With a third operand `k`
//! (a quorum), the barrier completes with its first `k` arrivals: those synchronise with every
//! other `sync` on it, later arrivals pass without holding anyone back, and a barrier that
//! fewer than `k` events reach never completes (no execution ends).

use super::execution::Skeleton;
use super::program::EventKind;
use super::relation::Relation;
use std::collections::BTreeMap;

/// A barrier: the CTA and the name.
type BarrierKey = (u32, Vec<u32>);
/// A barrier's quorum and its events (with whether each only arrives).
type BarrierGroup = (Option<u32>, Vec<(usize, bool)>);

/// The barrier an event uses, its quorum, and whether the event only arrives.
pub fn barrier_of(sk: &Skeleton, e: usize) -> Option<(BarrierKey, Option<u32>, bool)> {
    let EventKind::Barrier { arrive, operands } = &sk.events[e].kind else {
        return None;
    };
    let (name, quorum) = name_and_quorum(operands);
    Some(((sk.events[e].cta, name.to_vec()), quorum, *arrive))
}

/// A barrier instruction's operands split into the barrier's name (all but a third operand)
/// and its quorum (the third operand, if any).
pub fn name_and_quorum(operands: &[u32]) -> (&[u32], Option<u32>) {
    if operands.len() >= 3 {
        (&operands[..operands.len() - 1], operands.last().copied())
    } else {
        (operands, None)
    }
}

/// The alternative synchronisations of all barriers together (one per choice of which events
/// complete each quorum barrier), or `None` when some barrier can never complete.
pub fn synchronisations(sk: &Skeleton) -> Option<Vec<Relation>> {
    let mut groups: BTreeMap<BarrierKey, BarrierGroup> = BTreeMap::new();
    for e in 0..sk.len() {
        if let Some((key, quorum, arrive)) = barrier_of(sk, e) {
            let g = groups.entry(key).or_insert((quorum, Vec::new()));
            g.0 = g.0.max(quorum);
            g.1.push((e, arrive));
        }
    }
    let mut out = vec![Relation::empty(sk.len())];
    for (quorum, events) in groups.values() {
        let firsts: Vec<u64> = match quorum {
            None => vec![events.iter().fold(0, |m, (e, _)| m | 1 << e)],
            Some(k) if (*k as usize) > events.len() => return None,
            Some(k) => subsets(events.len(), *k as usize)
                .into_iter()
                .map(|s| {
                    (0..events.len())
                        .filter(|i| s >> i & 1 == 1)
                        .fold(0, |m, i| m | 1 << events[i].0)
                })
                .collect(),
        };
        let mut next = Vec::with_capacity(out.len() * firsts.len());
        for base in &out {
            for &first in &firsts {
                let mut rel = base.clone();
                for &(a, _) in events.iter().filter(|(a, _)| first >> a & 1 == 1) {
                    for &(b, arrive) in events {
                        if a != b && !arrive {
                            rel.add(a, b);
                        }
                    }
                }
                next.push(rel);
            }
        }
        out = next;
    }
    Some(out)
}

/// The `k`-element subsets of `0..n`, as bit masks.
fn subsets(n: usize, k: usize) -> Vec<u64> {
    (0u64..1 << n)
        .filter(|s| s.count_ones() as usize == k)
        .collect()
}
