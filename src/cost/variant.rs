//! The three fence sets whose cost is compared, as transformations of the app's PTX.
//!
//! All three start from the app with its own fences stripped (for an app without fences, the app
//! itself): `no` is that module, `emp` adds the fences of a harden result at its sites and kinds,
//! `cons` a fence after every memory access (instruction granularity, the paper's conservative
//! strategy). Building them is pure: module in, module out.

use super::CostError;
use crate::ptx::passes::fences::{
    fence_sites, insert_fences, insert_kinded_fences, strip_fences, FenceKind, FenceSite,
    Granularity,
};
use crate::ptx::Module;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A fence set whose cost is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    /// No fences at all.
    No,
    /// The fences a hardening kept.
    Emp,
    /// A fence after every memory access.
    Cons,
}

impl Variant {
    pub const ALL: [Variant; 3] = [Variant::No, Variant::Emp, Variant::Cons];

    pub fn name(self) -> &'static str {
        match self {
            Variant::No => "no",
            Variant::Emp => "emp",
            Variant::Cons => "cons",
        }
    }
}

display_by_name!(Variant, name);
parse_by_name!(Variant, name, String, |s| format!(
    "unknown variant '{s}' (expected no, emp or cons)"
));

/// The fences of a harden result: site ids at the hardening's granularity, each with its kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmpFences {
    pub granularity: Granularity,
    pub fences: BTreeMap<usize, FenceKind>,
    /// The accesses (PTX text) of each fence's site when it was hardened, where the result
    /// records them: a site that accesses something else now is another site.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub accesses: BTreeMap<usize, Vec<String>>,
    /// Where they come from (the harden journal), for the record.
    pub source: String,
}

/// The app's module without its own fences: what every variant starts from.
pub fn fence_free(module: &Module) -> Module {
    strip_fences(module).0
}

/// The module of `variant`, from the fence-free module `base`. `emp` is needed for
/// [`Variant::Emp`]; `cons_kind` is the kind of every conservative fence.
pub fn variant_module(
    base: &Module,
    variant: Variant,
    emp: Option<&EmpFences>,
    cons_kind: FenceKind,
) -> Result<Module, CostError> {
    match variant {
        Variant::No => Ok(base.clone()),
        Variant::Cons => {
            let sites = fence_sites(base, Granularity::Instruction);
            Ok(insert_fences(
                base,
                &sites.iter().collect::<Vec<_>>(),
                cons_kind,
            ))
        }
        Variant::Emp => {
            let emp = emp.expect("the emp variant needs a harden result");
            let sites = fence_sites(base, emp.granularity);
            let chosen = emp
                .fences
                .iter()
                .map(|(&id, &kind)| {
                    let site = sites.get(id).ok_or(CostError::NoSuchSite {
                        site: id,
                        sites: sites.len(),
                    })?;
                    refuse_another_site(emp, site)?;
                    Ok((site, kind))
                })
                .collect::<Result<Vec<_>, CostError>>()?;
            Ok(insert_kinded_fences(base, &chosen))
        }
    }
}

/// A fence of `emp` goes at `site` (the site with its id now) only if the site still accesses
/// what the hardening recorded for it: after the compiler or gpuwmm's site finder changed, the
/// same id can name other accesses.
fn refuse_another_site(emp: &EmpFences, site: &FenceSite) -> Result<(), CostError> {
    let Some(recorded) = emp.accesses.get(&site.id) else {
        return Ok(());
    };
    let now: Vec<&str> = site.accesses.iter().map(|a| a.ptx.as_str()).collect();
    if now == *recorded {
        return Ok(());
    }
    Err(CostError::AnotherSite {
        site: site.id,
        recorded: recorded.join("; "),
        now: now.join("; "),
    })
}

/// Parses `no,emp,cons` (any non-empty subset, in any order; kept in that order).
pub fn parse_variants(list: &str) -> Result<Vec<Variant>, String> {
    let mut chosen = list
        .split(',')
        .map(|s| s.trim().parse::<Variant>())
        .collect::<Result<Vec<_>, _>>()?;
    chosen.sort();
    chosen.dedup();
    if !chosen.contains(&Variant::No) {
        return Err("the variants must include `no`: overheads are measured against it".into());
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx::passes::fences::own_fences;

    const PTX: &str = include_str!("../../tests/fixtures/ptx/small/one_store.ptx");

    fn base() -> Module {
        fence_free(&crate::ptx::parse(PTX).unwrap())
    }

    #[test]
    fn no_has_no_fence_cons_one_per_access_emp_the_chosen_ones() {
        let base = base();
        assert_eq!(own_fences(&base).len(), 0);
        let cons = variant_module(&base, Variant::Cons, None, FenceKind::ScGpu).unwrap();
        assert_eq!(own_fences(&cons).len(), 3);
        let emp = EmpFences {
            granularity: Granularity::Instruction,
            fences: BTreeMap::from([(1, FenceKind::AcqRelGpu)]),
            accesses: BTreeMap::new(),
            source: "test".into(),
        };
        let fenced = variant_module(&base, Variant::Emp, Some(&emp), FenceKind::ScGpu).unwrap();
        let fences = own_fences(&fenced);
        assert_eq!(fences.len(), 1);
        assert!(crate::ptx::print(&fenced).contains("fence.acq_rel.gpu"));
    }

    #[test]
    fn an_emp_site_beyond_the_module_is_an_error() {
        let emp = EmpFences {
            granularity: Granularity::Instruction,
            fences: BTreeMap::from([(9, FenceKind::ScGpu)]),
            accesses: BTreeMap::new(),
            source: "test".into(),
        };
        let e = variant_module(&base(), Variant::Emp, Some(&emp), FenceKind::ScGpu).unwrap_err();
        assert!(e.to_string().contains("site 9"), "{e}");
    }

    /// Bug: `cost --emp` put a harden result's fences at the sites with the same ids now, even
    /// where the compiler or the site finder had changed what those ids name.
    #[test]
    fn an_emp_site_that_accesses_something_else_now_is_refused() {
        let base = base();
        let sites = fence_sites(&base, Granularity::Instruction);
        let ptx_of = |id: usize| vec![sites[id].accesses[0].ptx.clone()];
        let mut emp = EmpFences {
            granularity: Granularity::Instruction,
            fences: BTreeMap::from([(1, FenceKind::ScGpu)]),
            accesses: BTreeMap::from([(1, ptx_of(1))]),
            source: "test".into(),
        };
        assert!(variant_module(&base, Variant::Emp, Some(&emp), FenceKind::ScGpu).is_ok());
        emp.accesses.insert(1, ptx_of(2));
        let e = variant_module(&base, Variant::Emp, Some(&emp), FenceKind::ScGpu).unwrap_err();
        assert!(matches!(e, CostError::AnotherSite { site: 1, .. }), "{e}");
        let message = e.to_string();
        assert!(
            message.contains(&format!("accessed `{}`", ptx_of(2)[0])),
            "{message}"
        );
        assert!(
            message.contains(&format!("now accesses `{}`", ptx_of(1)[0])),
            "{message}"
        );
    }

    #[test]
    fn variants_parse_in_canonical_order_and_need_the_baseline() {
        assert_eq!(
            parse_variants("cons,no").unwrap(),
            vec![Variant::No, Variant::Cons]
        );
        assert!(parse_variants("emp,cons").unwrap_err().contains("`no`"));
        assert!(parse_variants("no,fast").unwrap_err().contains("'fast'"));
    }
}
