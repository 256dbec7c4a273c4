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
//! Only variables that the module's code names (an instruction operand, or another variable's
//! initialiser) are handled: a variable nothing names cannot be written or read by a kernel. That
//! leaves out the hundreds of one-byte tag objects libcu++ headers define, which would otherwise
//! cost a copy each per run on a GPU. A variable initialised with an address (`generic(x)`) is
//! not restored either: its initial contents are only known to the loaded module. Modules
//! without such variables (most apps) cost nothing: no call reaches the backend.

use crate::backend::sim::{module_variables, ModuleVariable};
use crate::backend::{Backend, BackendError, ModuleId};
use crate::ptx::{Item, Module, Operand, Statement};
use std::collections::HashSet;

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
        let variables = |module: &Module| {
            let named = names_in_code(module);
            let mut vars = module_variables(module);
            vars.retain(|v| named.contains(&v.name));
            vars
        };
        let app = variables(app);
        let check = check.map(variables).unwrap_or_default();
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

/// Every identifier that `module`'s code names: in instruction operands, and in the initialisers
/// of variables (module- or function-scope), where one variable can take another's address.
fn names_in_code(module: &Module) -> HashSet<String> {
    let mut names = HashSet::new();
    let mut add_words = |text: &str| {
        let words = text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'));
        names.extend(words.filter(|w| !w.is_empty()).map(str::to_string));
    };
    let initialiser = |text: &str| text.split_once('=').map(|(_, init)| init.to_string());
    for item in &module.items {
        match item {
            Item::Directive(text) => initialiser(text).iter().for_each(|i| add_words(i)),
            Item::Function(f) => {
                for statement in f.body.iter().flatten() {
                    match statement {
                        Statement::Instruction(i) => i
                            .operands
                            .iter()
                            .for_each(|o| operand_words(o, &mut add_words)),
                        Statement::Directive(text) => {
                            initialiser(text).iter().for_each(|i| add_words(i))
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    names
}

fn operand_words(operand: &Operand, add: &mut impl FnMut(&str)) {
    match operand {
        Operand::Register(_) | Operand::Immediate(_) => {}
        Operand::Symbol(text) | Operand::Other(text) => add(text),
        Operand::Address { base, .. } => add(base),
        Operand::Vector(parts) | Operand::List(parts) => {
            parts.iter().for_each(|p| operand_words(p, add))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module declaring `variables` with a kernel that adds 1 to each of `used` (parsed only,
    /// never run).
    fn module(variables: &str, used: &[&str]) -> Module {
        let body: String = used
            .iter()
            .map(|v| format!("    atom.global.add.u32 %r1, [{v}], 1;\n"))
            .collect();
        let text = format!(
            ".version 8.8\n.target sm_70\n.address_size 64\n{variables}\n\
             .visible .entry k()\n{{\n    .reg .b32 %r<2>;\n{body}    ret;\n}}\n"
        );
        crate::ptx::parse(&text).unwrap()
    }

    #[test]
    fn the_check_is_given_the_variables_both_modules_define_and_no_others() {
        let app = module(
            ".global .align 4 .u32 matches;\n.global .align 4 .u32 app_only;",
            &["matches", "app_only"],
        );
        let check = module(
            ".global .align 4 .u32 check_only;\n.global .align 4 .u32 matches;\n\
             .const .align 4 .u32 limit = 3;",
            &["check_only", "matches"],
        );
        let vars = ModuleVariables::new(&app, Some(&check)).unwrap();
        assert_eq!(vars.shared(), ["matches"]);
        assert!(!vars.is_empty());
        assert!(ModuleVariables::new(&module("", &[]), None)
            .unwrap()
            .is_empty());
    }

    /// libcu++ headers define hundreds of one-byte tag objects no code names; copying each per
    /// run would cost a GPU run hundreds of copies.
    #[test]
    fn variables_no_code_names_are_left_alone_unless_an_initialiser_takes_their_address() {
        let tags = ".global .align 1 .b8 tag_a[1];\n.global .align 1 .b8 tag_b[1];";
        let app = module(tags, &[]);
        assert!(ModuleVariables::new(&app, Some(&app)).unwrap().is_empty());
        // `to_b` holds tag_b's address: tag_b can be written through it. `to_b` itself is left
        // out, since its initial contents (an address) are not known before loading.
        let pointer = format!("{tags}\n.global .align 8 .u64 to_b = generic(tag_b);");
        let app = module(&pointer, &["to_b"]);
        let vars = ModuleVariables::new(&app, None).unwrap();
        let names: Vec<&str> = vars.app.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["tag_b"]);
    }

    #[test]
    fn a_variable_of_two_sizes_is_an_error_naming_it() {
        let app = module(".global .align 4 .u32 table[4];", &["table"]);
        let check = module(".global .align 4 .u32 table[8];", &["table"]);
        let error = ModuleVariables::new(&app, Some(&check)).unwrap_err();
        assert_eq!(
            error,
            "variable 'table' has 16 bytes in the app module and 32 in the check module"
        );
    }
}
