//! The PTX intermediate representation.
//!
//! The IR is deliberately shallow: it understands exactly what the instrumentation passes and the
//! simulator need (functions, their parameters, statements, predicate guards, opcodes with their
//! modifiers, operands, labels and `.loc` line information) and keeps everything else verbatim, so
//! that printing a parsed module gives PTX that `ptxas` accepts.

use std::fmt;

/// A whole PTX module, in source order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Module {
    pub items: Vec<Item>,
}

/// A top-level element of a module.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// A line kept verbatim: `.version`, `.target`, `.address_size`, module-scope variables,
    /// `.section` blocks.
    Directive(String),
    /// A comment, kept so that printed PTX stays readable.
    Comment(String),
    /// `.file N "path"`: maps a file index used by `.loc` to a path.
    File(FileEntry),
    /// A kernel (`.entry`) or device function (`.func`), defined or declared.
    Function(Function),
}

/// A `.file` directive.
#[derive(Debug, Clone, PartialEq)]
pub struct FileEntry {
    pub index: u32,
    pub path: String,
    /// Anything after the path (timestamp and size), verbatim.
    pub rest: String,
}

/// Whether a function is a kernel or a device function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FunctionKind {
    Entry,
    Func,
}

/// A `.entry` or `.func`.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    /// Linkage and other words before `.entry`/`.func` (`.visible`, `.weak`, `.extern`), verbatim.
    pub linkage: String,
    pub kind: FunctionKind,
    /// The return parameter list of a `.func`, verbatim including parentheses.
    pub returns: Option<String>,
    pub name: String,
    pub params: Vec<Param>,
    /// Performance directives between the parameter list and the body (`.maxntid 256, 1, 1`).
    pub directives: Vec<String>,
    /// `None` for a declaration without body.
    pub body: Option<Vec<Statement>>,
}

/// One entry of a parameter list.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// The full declaration, e.g. `.param .u64 dot_param_0`.
    pub decl: String,
    pub name: String,
}

/// A statement inside a function body.
#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    Instruction(Instruction),
    Label(String),
    Loc(Loc),
    /// A body directive (`.reg`, `.shared`, `.local`, `.pragma`, ...), verbatim without the `;`.
    Directive(String),
    Comment(String),
    /// `{`: opens a nested scope.
    BlockOpen,
    /// `}`: closes a nested scope.
    BlockClose,
}

/// A `.loc file line column [, function_name F, inlined_at file line column]` directive.
#[derive(Debug, Clone, PartialEq)]
pub struct Loc {
    pub at: SourcePos,
    pub function_name: Option<String>,
    pub inlined_at: Option<SourcePos>,
}

/// A position in a source file, by `.file` index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourcePos {
    pub file: u32,
    pub line: u32,
    pub column: u32,
}

/// A predicate guard: `@%p1` or `@!%p1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    pub negated: bool,
    pub predicate: String,
}

/// One PTX instruction.
#[derive(Debug, Clone, PartialEq)]
pub struct Instruction {
    pub guard: Option<Guard>,
    pub opcode: Opcode,
    pub operands: Vec<Operand>,
    /// Line in the parsed PTX text, 0 for instructions created by a pass.
    pub ptx_line: usize,
}

/// An opcode split at its dots: `ld.global.v4.u32` is base `ld` and modifiers
/// `global`, `v4`, `u32`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opcode {
    pub base: String,
    pub modifiers: Vec<String>,
}

/// An instruction operand.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    /// A register, including special registers such as `%tid.x`.
    Register(String),
    /// A numeric literal, verbatim (`42`, `-1`, `0f3F800000`, `0x10`).
    Immediate(String),
    /// A symbol: a label, parameter, variable or function name.
    Symbol(String),
    /// `[base]` or `[base+offset]`.
    Address { base: String, offset: i64 },
    /// `{a, b, c, d}`.
    Vector(Vec<Operand>),
    /// `(a, b)` as used by `call`.
    List(Vec<Operand>),
    /// Anything else (`%p|%q`, `!%p`), verbatim.
    Other(String),
}

impl Opcode {
    /// Builds an opcode from its dotted spelling.
    pub fn parse(text: &str) -> Opcode {
        let mut parts = text.split('.');
        let base = parts.next().unwrap_or_default().to_string();
        Opcode {
            base,
            modifiers: parts.map(str::to_string).collect(),
        }
    }

    pub fn has(&self, modifier: &str) -> bool {
        self.modifiers.iter().any(|m| m == modifier)
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.base)?;
        for m in &self.modifiers {
            write!(f, ".{m}")?;
        }
        Ok(())
    }
}

impl Instruction {
    /// An unguarded instruction made by a pass, parsed from its spelling: `"fence.sc.gpu"`.
    pub fn synthetic(opcode: &str, operands: Vec<Operand>) -> Instruction {
        Instruction {
            guard: None,
            opcode: Opcode::parse(opcode),
            operands,
            ptx_line: 0,
        }
    }
}

impl Operand {
    pub fn reg(name: &str) -> Operand {
        Operand::Register(name.to_string())
    }

    pub fn imm(value: impl fmt::Display) -> Operand {
        Operand::Immediate(value.to_string())
    }

    /// Calls `f` on every register name read or written through this operand, including the base
    /// of an address and the elements of vectors and lists.
    pub fn for_each_register_mut(&mut self, f: &mut impl FnMut(&mut String)) {
        match self {
            Operand::Register(r) => f(r),
            Operand::Address { base, .. } if base.starts_with('%') => f(base),
            Operand::Vector(items) | Operand::List(items) => {
                for item in items {
                    item.for_each_register_mut(f);
                }
            }
            _ => {}
        }
    }
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Register(s)
            | Operand::Immediate(s)
            | Operand::Symbol(s)
            | Operand::Other(s) => f.write_str(s),
            Operand::Address { base, offset } => match offset {
                0 => write!(f, "[{base}]"),
                o if base.is_empty() => write!(f, "[{o}]"),
                o => write!(f, "[{base}+{o}]"),
            },
            Operand::Vector(items) => write_list(f, "{", items, "}"),
            Operand::List(items) => write_list(f, "(", items, ")"),
        }
    }
}

fn write_list(
    f: &mut fmt::Formatter<'_>,
    open: &str,
    items: &[Operand],
    close: &str,
) -> fmt::Result {
    f.write_str(open)?;
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{item}")?;
    }
    f.write_str(close)
}

impl Module {
    /// The path recorded for a `.file` index.
    pub fn file_path(&self, index: u32) -> Option<&str> {
        self.items.iter().find_map(|item| match item {
            Item::File(entry) if entry.index == index => Some(entry.path.as_str()),
            _ => None,
        })
    }

    pub fn functions(&self) -> impl Iterator<Item = &Function> {
        self.items.iter().filter_map(|item| match item {
            Item::Function(f) => Some(f),
            _ => None,
        })
    }

    pub fn functions_mut(&mut self) -> impl Iterator<Item = &mut Function> {
        self.items.iter_mut().filter_map(|item| match item {
            Item::Function(f) => Some(f),
            _ => None,
        })
    }

    /// Kernels with a body.
    pub fn kernels(&self) -> impl Iterator<Item = &Function> {
        self.functions()
            .filter(|f| f.kind == FunctionKind::Entry && f.body.is_some())
    }

    pub fn function(&self, name: &str) -> Option<&Function> {
        self.functions().find(|f| f.name == name)
    }
}

impl Function {
    /// The instructions of the body, in order (empty for a declaration).
    pub fn instructions(&self) -> impl Iterator<Item = &Instruction> {
        self.body.iter().flatten().filter_map(|s| match s {
            Statement::Instruction(i) => Some(i),
            _ => None,
        })
    }
}
