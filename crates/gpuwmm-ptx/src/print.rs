//! IR to PTX text.
//!
//! The printer writes one statement per line in the layout NVRTC uses (tab-indented
//! instructions, labels at column 0), so that printed PTX is easy to diff against the input.

use super::ir::*;
use std::fmt::Write;

/// Prints a module as PTX text.
pub fn print(module: &Module) -> String {
    let mut out = String::new();
    for item in &module.items {
        print_item(&mut out, item);
    }
    out
}

fn print_item(out: &mut String, item: &Item) {
    match item {
        Item::Directive(text) | Item::Comment(text) => {
            out.push_str(text);
            out.push('\n');
        }
        Item::File(file) => {
            let _ = write!(out, "\t.file\t{} \"{}\"", file.index, file.path);
            if !file.rest.is_empty() {
                let _ = write!(out, " {}", file.rest);
            }
            out.push('\n');
        }
        Item::Function(function) => print_function(out, function),
    }
}

fn print_function(out: &mut String, f: &Function) {
    if !f.linkage.is_empty() {
        out.push_str(&f.linkage);
        out.push(' ');
    }
    out.push_str(match f.kind {
        FunctionKind::Entry => ".entry ",
        FunctionKind::Func => ".func ",
    });
    if let Some(returns) = &f.returns {
        out.push_str(returns);
        out.push(' ');
    }
    out.push_str(&f.name);
    out.push_str("(\n");
    for (i, param) in f.params.iter().enumerate() {
        let comma = if i + 1 < f.params.len() { "," } else { "" };
        let _ = writeln!(out, "\t{}{comma}", param.decl);
    }
    out.push_str(")\n");
    for directive in &f.directives {
        let _ = writeln!(out, "{directive}");
    }
    match &f.body {
        None => out.push_str(";\n"),
        Some(body) => {
            out.push_str("{\n");
            for statement in body {
                print_statement(out, statement);
            }
            out.push_str("}\n");
        }
    }
}

/// Prints one body statement, with its line break.
pub fn print_statement(out: &mut String, statement: &Statement) {
    match statement {
        Statement::Instruction(i) => {
            let _ = writeln!(out, "\t{};", instruction_text(i));
        }
        Statement::Label(name) => {
            let _ = writeln!(out, "{name}:");
        }
        Statement::Loc(loc) => {
            let _ = writeln!(out, "\t{}", loc_text(loc));
        }
        // `.loc` ends at the end of its line; `.local` (a prefix of the same letters) does not.
        Statement::Directive(text) if text.split_whitespace().next() == Some(".loc") => {
            let _ = writeln!(out, "\t{text}");
        }
        Statement::Directive(text) => {
            let _ = writeln!(out, "\t{text};");
        }
        Statement::Comment(text) => {
            let _ = writeln!(out, "\t{text}");
        }
        Statement::BlockOpen => out.push_str("\t{\n"),
        Statement::BlockClose => out.push_str("\t}\n"),
    }
}

/// An instruction without its `;`: `@%p1 st.global.u32 [%rd1], %r2`.
pub fn instruction_text(i: &Instruction) -> String {
    let mut text = String::new();
    if let Some(guard) = &i.guard {
        let bang = if guard.negated { "!" } else { "" };
        let _ = write!(text, "@{bang}{} ", guard.predicate);
    }
    let _ = write!(text, "{}", i.opcode);
    for (n, operand) in i.operands.iter().enumerate() {
        let sep = if n == 0 { " \t" } else { ", " };
        let _ = write!(text, "{sep}{operand}");
    }
    text
}

fn loc_text(loc: &Loc) -> String {
    let mut text = format!(".loc\t{} {} {}", loc.at.file, loc.at.line, loc.at.column);
    if let Some(name) = &loc.function_name {
        let _ = write!(text, ", function_name {name}");
    }
    if let Some(at) = &loc.inlined_at {
        let _ = write!(text, ", inlined_at {} {} {}", at.file, at.line, at.column);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::super::parse::parse;
    use super::*;

    #[test]
    fn print_then_parse_is_stable() {
        let text = ".version 8.8\n.target sm_70\n.address_size 64\n\n.visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n\t.reg .b32 %r<3>;\n\t.loc 1 3 1\n\tmov.u32 %r1, %tid.x;\n\t@!%p1 st.global.u32 [%rd1+4], %r1;\n$L__BB0_1:\n\tret;\n}\n\t.file\t1 \"k.cu\"\n";
        let once = print(&parse(text).unwrap());
        let twice = print(&parse(&once).unwrap());
        assert_eq!(once, twice);
        assert!(
            once.contains("@!%p1 st.global.u32 \t[%rd1+4], %r1;"),
            "{once}"
        );
        assert!(once.contains(".loc\t1 3 1"));
    }

    /// A `.local` declaration was printed without its `;` (taken for a `.loc`), so the next
    /// declaration ran into it and every kernel with a local depot (`printf`, a local array)
    /// was rejected after any pass: "unknown symbol '__local_depot0'".
    #[test]
    fn a_local_declaration_keeps_its_semicolon() {
        let text = ".version 8.8\n.target sm_70\n.address_size 64\n\n.visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n\t.local .align 8 .b8 \t__local_depot0[8];\n\t.reg .b64 %SPL;\n\tmov.u64 %SPL, __local_depot0;\n\tret;\n}\n";
        let once = print(&parse(text).unwrap());
        assert!(once.contains("__local_depot0[8];\n"), "{once}");
        assert_eq!(print(&parse(&once).unwrap()), once);
    }
}
