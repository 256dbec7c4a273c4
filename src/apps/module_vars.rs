//! The `__device__` variables of an app's modules, kept as a program that runs the app once
//! would see them.
//!
//! Why this module exists: the app's kernels and its check kernel run from modules of their own
//! (the check module is loaded apart so that fence sites and the stress harness never see check
//! code, and a stressed run launches a harnessed copy of the app module), and each loaded module
//! has its own copy of every module-scope variable. Two rules make those copies act as the one
//! variable of a real program:
//!
//! - before the check kernel runs, each `.global` variable that the check module shares by name
//!   with the app module is given the contents the app's launches left in it (in the module the
//!   app's last launch ran from), so a check kernel that names the variable reads what the app
//!   wrote;
//! - when a run ends, every module it launched from, and the check module, get their variables'
//!   initial contents back (their initialisers, zeros where none), so each run starts as a
//!   freshly started program does rather than from what the run before left.
//!
//! Modules without `.global` variables (most apps) cost nothing: no call reaches the backend.

use crate::backend::sim::{module_variables, ModuleVariable};
use crate::backend::{Backend, BackendError, ModuleId};
use crate::ptx::Module;

/// The `.global` variables of an app module and of its check module.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleVariables {
    app: Vec<ModuleVariable>,
    check: Vec<ModuleVariable>,
    /// The names in both, whose contents the check kernel is given.
    shared: Vec<String>,
}

impl ModuleVariables {
    /// The variables of `app` (the module the app's kernels run from, as loaded) and of `check`.
    /// A variable both define with different sizes is an error (they are compiled from the same
    /// files with the same defines, so it cannot happen unless the modules were not).
    pub fn new(app: &Module, check: Option<&Module>) -> Result<ModuleVariables, String> {
        let variables = |module: &Module| module_variables(module).map_err(|e| e.to_string());
        let app = variables(app)?;
        let check = match check {
            Some(module) => variables(module)?,
            None => Vec::new(),
        };
        let mut shared = Vec::new();
        for theirs in &check {
            let Some(ours) = app.iter().find(|v| v.name == theirs.name) else {
                continue;
            };
            if ours.initial.len() != theirs.initial.len() {
                return Err(format!(
                    "variable '{}' has {} bytes in the app module and {} in the check module",
                    ours.name,
                    ours.initial.len(),
                    theirs.initial.len()
                ));
            }
            shared.push(ours.name.clone());
        }
        Ok(ModuleVariables { app, check, shared })
    }

    /// The names of the variables the check kernel is given the app's contents of.
    pub fn shared(&self) -> &[String] {
        &self.shared
    }

    /// Copies each shared variable from module `from` (where the app's launches ran) into the
    /// check module `to`.
    pub fn pass_to_check(
        &self,
        backend: &mut dyn Backend,
        from: ModuleId,
        to: ModuleId,
    ) -> Result<(), BackendError> {
        for name in &self.shared {
            let source = backend.module_global(from, name)?;
            let target = backend.module_global(to, name)?;
            let mut bytes = vec![0u8; source.bytes];
            backend.copy_out(source, 0, &mut bytes)?;
            backend.copy_in(target, 0, &bytes)?;
        }
        Ok(())
    }

    /// Gives the variables of each of `app_modules` (the app module and the modules derived
    /// from it that launches ran from) and of `check` their initial contents back.
    pub fn restore(
        &self,
        backend: &mut dyn Backend,
        app_modules: &[ModuleId],
        check: Option<ModuleId>,
    ) -> Result<(), BackendError> {
        let app = app_modules.iter().map(|&m| (m, &self.app));
        for (module, variables) in app.chain(check.map(|m| (m, &self.check))) {
            for variable in variables {
                let buffer = backend.module_global(module, &variable.name)?;
                backend.copy_in(buffer, 0, &variable.initial)?;
            }
        }
        Ok(())
    }

    /// Whether neither module has a `.global` variable.
    pub fn is_empty(&self) -> bool {
        self.app.is_empty() && self.check.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(variables: &str) -> Module {
        let text = format!(".version 8.8\n.target sm_70\n.address_size 64\n{variables}\n");
        crate::ptx::parse(&text).unwrap()
    }

    #[test]
    fn the_check_is_given_the_variables_both_modules_define_and_no_others() {
        let app = module(".global .align 4 .u32 matches;\n.global .align 4 .u32 app_only;");
        let check = module(
            ".global .align 4 .u32 check_only;\n.global .align 4 .u32 matches;\n\
             .const .align 4 .u32 limit = 3;",
        );
        let vars = ModuleVariables::new(&app, Some(&check)).unwrap();
        assert_eq!(vars.shared(), ["matches"]);
        assert!(!vars.is_empty());
        assert!(ModuleVariables::new(&module(""), None).unwrap().is_empty());
    }

    #[test]
    fn a_variable_of_two_sizes_is_an_error_naming_it() {
        let app = module(".global .align 4 .u32 table[4];");
        let check = module(".global .align 4 .u32 table[8];");
        let error = ModuleVariables::new(&app, Some(&check)).unwrap_err();
        assert_eq!(
            error,
            "variable 'table' has 16 bytes in the app module and 32 in the check module"
        );
    }
}
