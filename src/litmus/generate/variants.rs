//! The axes a shape is crossed with, and the text of one variant.
//!
//! - order: how accesses are spelled (all weak, all volatile, all relaxed, all release/acquire,
//!   a release flag and acquire flag around weak data, all RMWs relaxed or acq_rel);
//! - fence: none, `fence.acq_rel`, `fence.sc` or `membar` between consecutive accesses of a
//!   thread;
//! - scopes: the scope of thread 0's strong operations and fences, and of the others';
//! - placement: all threads in one CTA, one CTA each, or thread 0 alone and the others together.

use super::families::{Access, Kind, Shape};
use crate::litmus::file::ast::Scope;
use std::fmt::Write;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Weak,
    Volatile,
    Relaxed,
    /// Every write a release, every read an acquire.
    RelAcq,
    /// Each thread's last write a release and first read an acquire; the other accesses weak.
    Flag,
    /// Writes `atom.exch`, reads `atom.add 0`, relaxed.
    Rmw,
    RmwAcqRel,
}

pub const ORDERS: [Order; 7] = [
    Order::Weak,
    Order::Volatile,
    Order::Relaxed,
    Order::RelAcq,
    Order::Flag,
    Order::Rmw,
    Order::RmwAcqRel,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceKind {
    None,
    AcqRel,
    Sc,
    Membar,
}

pub const FENCES: [FenceKind; 4] = [
    FenceKind::None,
    FenceKind::AcqRel,
    FenceKind::Sc,
    FenceKind::Membar,
];

/// (thread 0's scope, the other threads' scope).
pub const SCOPES: [(Scope, Scope); 5] = [
    (Scope::Cta, Scope::Cta),
    (Scope::Gpu, Scope::Gpu),
    (Scope::Sys, Scope::Sys),
    (Scope::Cta, Scope::Gpu),
    (Scope::Gpu, Scope::Cta),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    OneCta,
    CtaEach,
    /// Thread 0 in one CTA, the others in another (three threads or more).
    Split,
    /// A CTA per thread, the threads alternating between GPU 0 and GPU 1.
    GpuAlternate,
    /// Thread 0 on GPU 0, the others in one CTA of GPU 1 (three threads or more).
    GpuSplit,
}

/// The placements on one GPU: the families `litmus generate` writes.
pub const PLACEMENTS: [Placement; 3] = [Placement::OneCta, Placement::CtaEach, Placement::Split];

/// The placements across two GPUs (`litmus generate --across-gpus`).
pub const PLACEMENTS_ACROSS_GPUS: [Placement; 2] = [Placement::GpuAlternate, Placement::GpuSplit];

/// One point of the cross product.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    pub order: Order,
    pub fence: FenceKind,
    pub scopes: (Scope, Scope),
    pub placement: Placement,
}

/// The variants of a shape with these placements, in a fixed order.
pub fn all(shape: &Shape, placements: &[Placement]) -> Vec<Variant> {
    let threads = shape.accesses().len();
    let mut out = Vec::new();
    for &placement in placements {
        if matches!(placement, Placement::Split | Placement::GpuSplit) && threads < 3 {
            continue;
        }
        for order in ORDERS {
            for fence in FENCES {
                for scopes in SCOPES {
                    out.push(Variant {
                        order,
                        fence,
                        scopes,
                        placement,
                    });
                }
            }
        }
    }
    out
}

impl Variant {
    /// `MP+relacq+fence.sc+cta-gpu+cta-each`.
    pub fn name(&self, shape: &Shape) -> String {
        let order = match self.order {
            Order::Weak => "weak",
            Order::Volatile => "volatile",
            Order::Relaxed => "relaxed",
            Order::RelAcq => "relacq",
            Order::Flag => "flag",
            Order::Rmw => "rmw",
            Order::RmwAcqRel => "rmw-acqrel",
        };
        let fence = match self.fence {
            FenceKind::None => "nofence",
            FenceKind::AcqRel => "fence.acq_rel",
            FenceKind::Sc => "fence.sc",
            FenceKind::Membar => "membar",
        };
        let placement = match self.placement {
            Placement::OneCta => "one-cta",
            Placement::CtaEach => "cta-each",
            Placement::Split => "split",
            Placement::GpuAlternate => "gpu-alt",
            Placement::GpuSplit => "gpu-split",
        };
        format!(
            "{}+{order}+{fence}+{}-{}+{placement}",
            shape.family,
            self.scopes.0.name(),
            self.scopes.1.name()
        )
    }

    fn scope(&self, thread: usize) -> Scope {
        if thread == 0 {
            self.scopes.0
        } else {
            self.scopes.1
        }
    }

    fn cta(&self, thread: usize) -> usize {
        match self.placement {
            Placement::OneCta | Placement::GpuSplit => 0,
            Placement::CtaEach | Placement::GpuAlternate => thread,
            Placement::Split => usize::from(thread > 0),
        }
    }

    fn gpu(&self, thread: usize) -> usize {
        match self.placement {
            Placement::OneCta | Placement::CtaEach | Placement::Split => 0,
            Placement::GpuAlternate => thread % 2,
            Placement::GpuSplit => usize::from(thread > 0),
        }
    }
}

/// The text of a variant after its `PTX name` line.
pub struct Rendered {
    /// The quoted comment line.
    pub comment: String,
    /// Init block, thread table and condition: what the test means.
    pub body: String,
}

/// The test: comment, init block, thread table, condition.
pub fn render(shape: &Shape, v: &Variant) -> Rendered {
    let threads = shape.accesses();
    let mut locs: Vec<char> = threads.iter().flatten().map(|a| a.loc).collect();
    locs.sort();
    locs.dedup();
    let mut columns: Vec<Vec<String>> = Vec::new();
    let mut condition: Vec<String> = Vec::new();
    for (t, accesses) in threads.iter().enumerate() {
        let scope = v.scope(t);
        let mut cells = Vec::new();
        let last_write = accesses.iter().rposition(|a| a.kind == Kind::Write);
        let first_read = accesses.iter().position(|a| a.kind == Kind::Read);
        let mut reads = 0;
        for (i, a) in accesses.iter().enumerate() {
            if i > 0 {
                if let Some(f) = fence(v.fence, scope) {
                    cells.push(f);
                }
            }
            let flag = (a.kind == Kind::Write && Some(i) == last_write)
                || (a.kind == Kind::Read && Some(i) == first_read);
            let (text, reg) = access(a, v.order, scope, flag, i);
            cells.push(text);
            if let Some(reg) = reg {
                condition.push(format!("P{t}:{reg} == {}", a.value));
                reads += 1;
            }
        }
        let _ = reads;
        columns.push(cells);
    }
    for (loc, value) in shape.final_values() {
        condition.push(format!("{loc} == {value}"));
    }
    let comment = format!(
        "\"{}: {}; {} accesses, {} fences, scopes {}/{}, {} (gpuwmm litmus generate)\"\n",
        shape.family,
        shape.cycle,
        order_word(v.order),
        fence_word(v.fence),
        v.scopes.0.name(),
        v.scopes.1.name(),
        placement_word(v.placement)
    );
    let mut text = String::from("{\n");
    for l in &locs {
        let _ = write!(text, "{l}=0; ");
    }
    text.push_str("\n}\n");
    let header: Vec<String> = (0..threads.len())
        .map(|t| format!("P{t}@cta {},gpu {}", v.cta(t), v.gpu(t)))
        .collect();
    let rows = columns.iter().map(Vec::len).max().unwrap_or(0);
    let mut table = vec![header];
    for r in 0..rows {
        table.push(
            columns
                .iter()
                .map(|c| c.get(r).cloned().unwrap_or_default())
                .collect(),
        );
    }
    let widths: Vec<usize> = (0..threads.len())
        .map(|t| table.iter().map(|row| row[t].len()).max().unwrap_or(0))
        .collect();
    for row in &table {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!(" {c:<w$} "))
            .collect();
        let _ = writeln!(text, "{};", cells.join("|"));
    }
    let _ = writeln!(text, "exists ({})", condition.join(" /\\ "));
    Rendered {
        comment,
        body: text,
    }
}

/// The instruction of one access, and the register whose value the condition pins.
fn access(
    a: &Access,
    order: Order,
    scope: Scope,
    flag: bool,
    index: usize,
) -> (String, Option<String>) {
    let s = scope.name();
    let (loc, value) = (a.loc, a.value);
    let reg = format!("r{index}");
    let rmw_sem = match order {
        Order::RelAcq | Order::RmwAcqRel => "acq_rel",
        _ => "relaxed",
    };
    // A plain access's qualifiers, `ordered` naming the ordering one; `None` for an RMW.
    let plain = |ordered: &str| match (order, flag) {
        (Order::Weak, _) | (Order::Flag, false) => Some(".weak".to_string()),
        (Order::Volatile, _) => Some(".volatile".to_string()),
        (Order::Relaxed, _) => Some(format!(".relaxed.{s}")),
        (Order::RelAcq, _) | (Order::Flag, true) => Some(format!(".{ordered}.{s}")),
        (Order::Rmw | Order::RmwAcqRel, _) => None,
    };
    match a.kind {
        Kind::Increment => (format!("atom.{rmw_sem}.{s}.add {reg}, {loc}, 1"), Some(reg)),
        Kind::Write => match plain("release") {
            Some(q) => (format!("st{q} {loc}, {value}"), None),
            None => (
                format!("atom.{rmw_sem}.{s}.exch t{index}, {loc}, {value}"),
                None,
            ),
        },
        Kind::Read => match plain("acquire") {
            Some(q) => (format!("ld{q} {reg}, {loc}"), Some(reg)),
            None => (format!("atom.{rmw_sem}.{s}.add {reg}, {loc}, 0"), Some(reg)),
        },
    }
}

fn fence(kind: FenceKind, scope: Scope) -> Option<String> {
    let s = scope.name();
    match kind {
        FenceKind::None => None,
        FenceKind::AcqRel => Some(format!("fence.acq_rel.{s}")),
        FenceKind::Sc => Some(format!("fence.sc.{s}")),
        FenceKind::Membar => Some(
            match scope {
                Scope::Cta => "membar.cta",
                Scope::Gpu => "membar.gl",
                Scope::Sys => "membar.sys",
                Scope::Cluster => unreachable!("the generator's scopes are cta, gpu and sys"),
            }
            .to_string(),
        ),
    }
}

fn order_word(order: Order) -> &'static str {
    match order {
        Order::Weak => "weak",
        Order::Volatile => "volatile",
        Order::Relaxed => "relaxed",
        Order::RelAcq => "release/acquire",
        Order::Flag => "weak data with a release/acquire flag",
        Order::Rmw => "relaxed RMW",
        Order::RmwAcqRel => "acq_rel RMW",
    }
}

fn fence_word(kind: FenceKind) -> &'static str {
    match kind {
        FenceKind::None => "no",
        FenceKind::AcqRel => "fence.acq_rel",
        FenceKind::Sc => "fence.sc",
        FenceKind::Membar => "membar",
    }
}

fn placement_word(p: Placement) -> &'static str {
    match p {
        Placement::OneCta => "all threads in one CTA",
        Placement::CtaEach => "one CTA per thread",
        Placement::Split => "thread 0 in its own CTA",
        Placement::GpuAlternate => "one CTA per thread, alternating between two GPUs",
        Placement::GpuSplit => "thread 0 on one GPU, the others in one CTA of another",
    }
}
