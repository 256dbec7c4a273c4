//! The statement structure of CUDA C++ source, as far as placing a fence needs it.
//!
//! A fence the hardening checked after a PTX access has to land in the source between that
//! access and the next one, on every path the program can take. Lines do not say that: a line
//! can hold two statements, the one-statement body of an `if`, a `return` whose value is the
//! access, or the `else` of an `if` whose block closed on the line before. So the patch works
//! from statements. This module splits the source into tokens (skipping comments, string and
//! character literals and preprocessor lines) and parses function bodies into a tree of
//! statements: blocks, `if`/`else`, `while`/`for`, `do`/`while`, `switch`, jumps, and the rest
//! (expressions and declarations, each up to its `;`).
//!
//! It is not a C++ parser: expressions are not looked into, and what it does not understand
//! (a lambda's body, a macro that hides braces) stays inside the one statement around it, so a
//! line there has no statement of its own and the patch says so instead of guessing.

/// A token: where it is in the text and on which 1-based line it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token<'a> {
    pub text: &'a str,
    pub start: usize,
    pub end: usize,
    pub line: usize,
}

/// What a function returns, as far as a `return` statement's rewrite needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Returns {
    /// `void`: a `return E;` can become `E; return;`.
    Void,
    /// A value type: `E` can be kept in an `auto` variable and returned from it.
    Value,
    /// A reference (or a type spelled with `decltype`): a copy would change what is returned.
    Reference,
}

/// One statement of a function body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub kind: NodeKind,
    /// Its first token (after any `case …:` or other labels) and its last, as token indices.
    pub first: usize,
    pub last: usize,
    /// The statement it is part of (none at the top of a function body or of the file).
    pub parent: Option<usize>,
    /// How many statements it is nested in.
    pub depth: usize,
    /// What the function it is in returns (`None` outside a recognised function).
    pub returns: Option<Returns>,
}

/// The kinds of statement the patch tells apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeKind {
    /// `{ … }`.
    Block { children: Vec<usize> },
    /// `if (…) then [else …]`; `close` is the condition's `)`.
    If {
        close: usize,
        then: usize,
        otherwise: Option<usize>,
    },
    /// `while (…) body` or `for (…) body`; `close` is the header's `)`.
    Loop { close: usize, body: usize },
    /// `do body while (…);`; `keyword` is the `while`.
    Do { body: usize, keyword: usize },
    /// `switch (…) body`.
    Switch { close: usize, body: usize },
    /// `return E;`, with `E`'s first token.
    Return { value: usize },
    /// `break;`, `continue;`, `goto L;`, `return;`: no access of their own.
    Jump,
    /// An expression or a declaration, up to its `;` (or an empty statement).
    Simple,
}

/// The statements of a source text, and its tokens.
#[derive(Debug)]
pub struct Statements<'a> {
    pub tokens: Vec<Token<'a>>,
    pub nodes: Vec<Node>,
    /// The 1-based lines that end inside a block comment (nothing may be inserted after them).
    pub open_comment_lines: Vec<usize>,
}

/// How a node relates to a line it has tokens on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The statement's own tokens (a simple statement, a `return` with a value).
    Statement,
    /// The condition (or `for` header) of a control statement.
    Condition,
}

impl<'a> Statements<'a> {
    /// The statements of `text`.
    pub fn parse(text: &'a str) -> Statements<'a> {
        let (tokens, open_comment_lines) = tokenize(text);
        let pairs = matching_brackets(&tokens);
        let mut parser = Parser {
            tokens: &tokens,
            pairs,
            nodes: Vec::new(),
            pos: 0,
        };
        parser.declarations(tokens.len());
        let mut nodes = parser.nodes;
        link_parents(&mut nodes);
        Statements {
            tokens,
            nodes,
            open_comment_lines,
        }
    }

    /// The statements with tokens of their own on `line` that can hold an access, in text
    /// order: simple statements and `return E;` (as [`Part::Statement`]) and control
    /// statements whose condition is there (as [`Part::Condition`]).
    pub fn parts_on_line(&self, line: usize) -> Vec<(usize, Part)> {
        let mut parts: Vec<(usize, usize, Part)> = Vec::new();
        for (id, node) in self.nodes.iter().enumerate() {
            let (own, part) = match node.kind {
                NodeKind::Simple | NodeKind::Return { .. } => {
                    (node.first..node.last + 1, Part::Statement)
                }
                NodeKind::If { close, .. }
                | NodeKind::Loop { close, .. }
                | NodeKind::Switch { close, .. } => (node.first..close + 1, Part::Condition),
                NodeKind::Do { keyword, .. } => (keyword..node.last + 1, Part::Condition),
                NodeKind::Block { .. } | NodeKind::Jump => continue,
            };
            let empty = node.first == node.last && self.tokens[node.first].text == ";";
            let on_line = |&t: &usize| self.tokens[t].line == line && !self.in_lambda_body(id, t);
            if let Some(t) = own.clone().find(on_line).filter(|_| !empty) {
                parts.push((t, id, part));
            }
        }
        parts.sort_unstable_by_key(|p| (p.0, p.1));
        parts.into_iter().map(|(_, id, part)| (id, part)).collect()
    }

    /// Whether token `t` of statement `id` is inside a brace group that follows `)` or `]` (a
    /// lambda's body, run where the lambda is called, not where it is defined).
    fn in_lambda_body(&self, id: usize, t: usize) -> bool {
        let node = &self.nodes[id];
        let mut depth = 0usize;
        let mut lambda_depths: Vec<usize> = Vec::new();
        for i in node.first..t {
            match self.tokens[i].text {
                "{" => {
                    depth += 1;
                    let before = i.checked_sub(1).map_or("", |b| self.tokens[b].text);
                    if matches!(before, ")" | "]" | "mutable") {
                        lambda_depths.push(depth);
                    }
                }
                "}" => {
                    if lambda_depths.last() == Some(&depth) {
                        lambda_depths.pop();
                    }
                    depth = depth.saturating_sub(1);
                }
                _ => {}
            }
        }
        !lambda_depths.is_empty()
    }

    /// The first statement that starts on `line`, if any (the outermost of those that start at
    /// the same token; not the block of a function or of a control statement, before which
    /// a statement would leave it).
    pub fn first_starting_on(&self, line: usize) -> Option<usize> {
        let in_block = |n: &Node| {
            n.parent
                .is_some_and(|p| matches!(self.nodes[p].kind, NodeKind::Block { .. }))
        };
        let body_block = |n: &Node| matches!(n.kind, NodeKind::Block { .. }) && !in_block(n);
        (0..self.nodes.len())
            .filter(|&id| self.tokens[self.nodes[id].first].line == line)
            .filter(|&id| !body_block(&self.nodes[id]))
            .min_by_key(|&id| (self.nodes[id].first, self.nodes[id].depth))
    }

    /// Whether `id` is the body of a control statement without braces of its own (so that a
    /// statement added before or after it needs braces to stay in the body).
    pub fn is_unbraced_body(&self, id: usize) -> bool {
        let node = &self.nodes[id];
        let in_block = node
            .parent
            .is_none_or(|p| matches!(self.nodes[p].kind, NodeKind::Block { .. }));
        !in_block && !matches!(node.kind, NodeKind::Block { .. })
    }

    /// The `if` whose branch `id` ends, directly or as the last statement of a block that is
    /// the branch: after `id` comes what comes after that `if`.
    pub fn branch_end_of(&self, id: usize) -> Option<usize> {
        let parent = self.nodes[id].parent?;
        match &self.nodes[parent].kind {
            NodeKind::If { .. } => Some(parent),
            NodeKind::Block { children } if children.last() == Some(&id) => {
                let grand = self.nodes[parent].parent?;
                matches!(self.nodes[grand].kind, NodeKind::If { .. }).then_some(grand)
            }
            _ => None,
        }
    }

    /// `id`, or, when it is a branch of an `if` without braces, that `if` (repeatedly): the
    /// statement whose end is the same place on `id`'s path.
    pub fn lifted_out_of_branches(&self, mut id: usize) -> usize {
        while let Some(parent) = self.nodes[id].parent {
            if !(self.is_unbraced_body(id)
                && matches!(self.nodes[parent].kind, NodeKind::If { .. }))
            {
                break;
            }
            id = parent;
        }
        id
    }

    /// Whether the condition of the `if` `id` declares a variable (`if (int v = f())`,
    /// `if (init; c)`): two words in a row or a `;` outside brackets, where an expression has
    /// neither.
    pub fn condition_declares(&self, id: usize) -> bool {
        let NodeKind::If { close, .. } = self.nodes[id].kind else {
            return false;
        };
        let (mut depth, mut previous_word) = (0i64, false);
        for token in &self.tokens[self.nodes[id].first + 1..close] {
            let word = is_word(token.text) && !matches!(token.text, "constexpr" | "sizeof");
            match token.text {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" => depth -= 1,
                ";" if depth == 1 => return true,
                _ if word && previous_word && depth == 1 => return true,
                _ => {}
            }
            previous_word = word;
        }
        false
    }

    /// The token that follows the last of `id` on its line, if any.
    pub fn next_on_line(&self, id: usize) -> Option<&'a str> {
        let last = self.nodes[id].last;
        (self.tokens.get(last + 1))
            .filter(|t| t.line == self.tokens[last].line)
            .map(|t| t.text)
    }

    /// The keyword (or `{`) that starts `id`.
    pub fn keyword(&self, id: usize) -> &'a str {
        self.tokens[self.nodes[id].first].text
    }

    /// The 1-based line `id` starts on.
    pub fn line_of(&self, id: usize) -> usize {
        self.tokens[self.nodes[id].first].line
    }
}

/// The tokens of `text` and the lines that end inside a block comment.
fn tokenize(text: &str) -> (Vec<Token<'_>>, Vec<usize>) {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut open_comment_lines = Vec::new();
    let (mut i, mut line, mut line_start) = (0, 1, true);
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        if c == b'\n' {
            (line, line_start, i) = (line + 1, true, i + 1);
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'#' && line_start {
            i = preprocessor_end(bytes, i);
        } else if text[i..].starts_with("//") {
            i = text[i..].find('\n').map_or(bytes.len(), |n| i + n);
        } else if text[i..].starts_with("/*") {
            let end = text[i + 2..]
                .find("*/")
                .map_or(bytes.len(), |n| i + 2 + n + 2);
            let newlines = text[i..end].matches('\n').count();
            open_comment_lines.extend(line..line + newlines);
            i = end;
        } else {
            i = token_end(bytes, i);
            tokens.push(Token {
                text: &text[start..i],
                start,
                end: i,
                line,
            });
        }
        line += text[start..i].matches('\n').count();
        line_start = false;
    }
    (tokens, open_comment_lines)
}

/// Where a preprocessor line starting at `i` ends (its line ending, after `\` continuations).
fn preprocessor_end(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && bytes[i] != b'\n' {
        if bytes[i] == b'\\' && bytes.get(i + 1) == Some(&b'\n') {
            i += 1;
        } else if bytes[i] == b'\\' && bytes.get(i + 1) == Some(&b'\r') {
            i += 2;
        }
        i += 1;
    }
    i
}

/// Where the token starting at `i` ends: a word or number, a literal, `::`, or one character.
fn token_end(bytes: &[u8], i: usize) -> usize {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    match bytes[i] {
        b if word(b) => i + bytes[i..].iter().take_while(|&&b| word(b)).count(),
        quote @ (b'"' | b'\'') => {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != quote && bytes[j] != b'\n' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            (j + 1).min(bytes.len())
        }
        b':' if bytes.get(i + 1) == Some(&b':') => i + 2,
        _ => i + 1,
    }
}

/// For each bracket token, the index of the one it pairs with (`usize::MAX` when unpaired).
fn matching_brackets(tokens: &[Token<'_>]) -> Vec<usize> {
    let mut pairs = vec![usize::MAX; tokens.len()];
    let mut open: Vec<usize> = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        match token.text {
            "(" | "[" | "{" => open.push(i),
            ")" | "]" | "}" => {
                let opener = match token.text {
                    ")" => "(",
                    "]" => "[",
                    _ => "{",
                };
                // An unpaired closer leaves the brackets opened before it as they are.
                if let Some(depth) = open.iter().rposition(|&o| tokens[o].text == opener) {
                    let o = open[depth];
                    open.truncate(depth);
                    (pairs[o], pairs[i]) = (i, o);
                }
            }
            _ => {}
        }
    }
    pairs
}

const STATEMENT_KEYWORDS: [&str; 11] = [
    "if", "while", "for", "do", "switch", "return", "break", "continue", "goto", "case", "default",
];

struct Parser<'t, 'a> {
    tokens: &'t [Token<'a>],
    pairs: Vec<usize>,
    nodes: Vec<Node>,
    pos: usize,
}

impl Parser<'_, '_> {
    fn text(&self, i: usize) -> &str {
        self.tokens.get(i).map_or("", |t| t.text)
    }

    fn push(
        &mut self,
        kind: NodeKind,
        first: usize,
        last: usize,
        returns: Option<Returns>,
    ) -> usize {
        self.nodes.push(Node {
            kind,
            first,
            last,
            parent: None,
            depth: 0,
            returns,
        });
        self.nodes.len() - 1
    }

    /// Declarations up to token `end`: function bodies are parsed, the bodies of namespaces,
    /// `extern "C"` and classes are declarations again, other braces are skipped, and
    /// declarations ending in `;` are no statements; a block or a statement that starts with
    /// a keyword at this level (a snippet) is parsed as one.
    fn declarations(&mut self, end: usize) {
        while self.pos < end {
            let word = self.text(self.pos);
            if word == "{" || STATEMENT_KEYWORDS.contains(&word) {
                self.statement(None);
                continue;
            }
            let head = self.pos;
            while self.pos < end && !matches!(self.text(self.pos), ";" | "{" | "}") {
                self.pos = self.skip_group(self.pos) + 1;
            }
            match self.text(self.pos) {
                // A declaration outside a function (a global, a member): no place for a fence.
                ";" => self.pos += 1,
                "{" => self.declaration_block(head, end),
                _ => self.pos += 1,
            }
        }
    }

    /// The `{` at `self.pos` after the declaration head starting at `head`.
    fn declaration_block(&mut self, head: usize, end: usize) {
        let open = self.pos;
        let close = self.pairs[open].min(end.saturating_sub(1));
        let words: Vec<&str> = (head..open).map(|i| self.text(i)).collect();
        let depth0_eq = self.depth0(head, open).any(|i| self.text(i) == "=");
        let container = ["namespace", "extern", "struct", "class", "union"];
        if !depth0_eq && words.contains(&"(") {
            let returns = Some(self.return_kind(head, open));
            self.statement(returns);
        } else if !depth0_eq && words.iter().any(|w| container.contains(w)) {
            self.pos = open + 1;
            self.declarations(close);
            self.pos = close + 1;
        } else {
            self.pos = close + 1;
        }
    }

    /// The token indices from `from` to `to` outside brackets.
    fn depth0(&self, from: usize, to: usize) -> impl Iterator<Item = usize> + '_ {
        let mut i = from;
        std::iter::from_fn(move || {
            if i >= to {
                return None;
            }
            let here = i;
            i = self.skip_group(i) + 1;
            Some(here)
        })
    }

    /// The last token of the bracket group opening at `i` (or `i` itself).
    fn skip_group(&self, i: usize) -> usize {
        match self.text(i) {
            "(" | "[" | "{" if self.pairs[i] != usize::MAX => self.pairs[i],
            _ => i,
        }
    }

    /// What the function whose head is `head..open` returns: its return type is the words
    /// before its name (the word before the parameter list) and any after the parameters.
    fn return_kind(&self, head: usize, open: usize) -> Returns {
        let params = self
            .depth0(head, open)
            .filter(|&i| self.text(i) == "(")
            .find(|&i| {
                !matches!(
                    self.text(i.wrapping_sub(1)),
                    "__launch_bounds__" | "__attribute__" | "__align__" | "alignas" | "__declspec"
                )
            });
        let Some(params) = params else {
            return Returns::Reference;
        };
        let before = head..params.saturating_sub(1);
        // After the parameters: qualifiers, and a trailing return type after `->`.
        let trailing = self.pairs[params] + 1..open;
        let words: Vec<&str> = before.chain(trailing).map(|i| self.text(i)).collect();
        if words.iter().any(|w| matches!(*w, "&" | "decltype")) {
            Returns::Reference
        } else if words.contains(&"void") && !words.contains(&"*") {
            Returns::Void
        } else {
            Returns::Value
        }
    }

    /// The statement at `self.pos`, if one starts there; `self.pos` moves past it.
    fn statement(&mut self, returns: Option<Returns>) -> Option<usize> {
        self.skip_labels();
        let first = self.pos;
        if first >= self.tokens.len() || self.text(first) == "}" {
            return None;
        }
        let id = match self.text(first) {
            "{" => self.block(returns),
            "if" => self.if_statement(returns),
            "while" | "for" | "switch" => self.headed(returns),
            "do" => self.do_statement(returns),
            "return" if self.text(first + 1) != ";" => {
                let last = self.statement_end(first);
                self.push(NodeKind::Return { value: first + 1 }, first, last, returns)
            }
            "return" | "break" | "continue" | "goto" => {
                let last = self.statement_end(first);
                self.push(NodeKind::Jump, first, last, returns)
            }
            _ => {
                let last = self.statement_end(first);
                self.push(NodeKind::Simple, first, last, returns)
            }
        };
        Some(id)
    }

    /// Moves past `case X:`, `default:` and `name:` labels.
    fn skip_labels(&mut self) {
        loop {
            let here = self.pos;
            match self.text(here) {
                "case" => {
                    let colon = (here..self.tokens.len()).find(|&i| self.text(i) == ":");
                    self.pos = colon.map_or(self.tokens.len(), |c| c + 1);
                }
                "default" if self.text(here + 1) == ":" => self.pos += 2,
                word if is_word(word)
                    && !STATEMENT_KEYWORDS.contains(&word)
                    && self.text(here + 1) == ":" =>
                {
                    self.pos += 2
                }
                _ => return,
            }
        }
    }

    /// The `;` that ends the statement starting at `first` (brackets skipped), or the token
    /// before an unmatched `}`; `self.pos` moves past it.
    fn statement_end(&mut self, first: usize) -> usize {
        let mut i = first;
        while i < self.tokens.len() && self.text(i) != ";" {
            if self.text(i) == "}" {
                self.pos = i;
                return i.saturating_sub(1).max(first);
            }
            i = self.skip_group(i) + 1;
        }
        let last = i.min(self.tokens.len() - 1);
        self.pos = last + 1;
        last
    }

    fn block(&mut self, returns: Option<Returns>) -> usize {
        let open = self.pos;
        let close = self.pairs[open].min(self.tokens.len() - 1);
        self.pos = open + 1;
        let mut children = Vec::new();
        while self.pos < close {
            match self.statement(returns) {
                Some(child) => children.push(child),
                None => self.pos += 1,
            }
        }
        self.pos = close + 1;
        self.push(NodeKind::Block { children }, open, close, returns)
    }

    /// The `)` closing the parenthesis after the keyword at `self.pos`; `self.pos` moves past it.
    fn header(&mut self) -> usize {
        let open = self.pos + 1;
        let close = match self.text(open) {
            "(" => self.skip_group(open),
            _ => self.pos,
        };
        self.pos = close + 1;
        close
    }

    /// A body statement, or an empty simple statement when none is there.
    fn body(&mut self, returns: Option<Returns>) -> usize {
        match self.statement(returns) {
            Some(id) => id,
            None => {
                let at = self.pos.saturating_sub(1);
                self.push(NodeKind::Simple, at, at, returns)
            }
        }
    }

    fn if_statement(&mut self, returns: Option<Returns>) -> usize {
        let first = self.pos;
        if self.text(first + 1) == "constexpr" {
            self.pos += 1;
        }
        let close = self.header();
        let then = self.body(returns);
        let otherwise = (self.text(self.pos) == "else").then(|| {
            self.pos += 1;
            self.body(returns)
        });
        let last = self.nodes[otherwise.unwrap_or(then)].last;
        let kind = NodeKind::If {
            close,
            then,
            otherwise,
        };
        self.push(kind, first, last, returns)
    }

    fn headed(&mut self, returns: Option<Returns>) -> usize {
        let first = self.pos;
        let close = self.header();
        let body = self.body(returns);
        let last = self.nodes[body].last;
        let kind = match self.text(first) {
            "switch" => NodeKind::Switch { close, body },
            _ => NodeKind::Loop { close, body },
        };
        self.push(kind, first, last, returns)
    }

    fn do_statement(&mut self, returns: Option<Returns>) -> usize {
        let first = self.pos;
        self.pos += 1;
        let body = self.body(returns);
        let keyword = self.pos;
        let last = self.statement_end(keyword);
        self.push(NodeKind::Do { body, keyword }, first, last, returns)
    }
}

fn is_word(text: &str) -> bool {
    text.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
}

/// Sets each node's parent and depth from the children the kinds name.
fn link_parents(nodes: &mut [Node]) {
    for id in 0..nodes.len() {
        for child in children(&nodes[id].kind) {
            nodes[child].parent = Some(id);
        }
    }
    for id in 0..nodes.len() {
        let mut depth = 0;
        let mut up = nodes[id].parent;
        while let Some(p) = up {
            depth += 1;
            up = nodes[p].parent;
        }
        nodes[id].depth = depth;
    }
}

/// The statements directly inside one of kind `kind`.
pub fn children(kind: &NodeKind) -> Vec<usize> {
    match kind {
        NodeKind::Block { children } => children.clone(),
        NodeKind::If {
            then, otherwise, ..
        } => std::iter::once(*then).chain(*otherwise).collect(),
        NodeKind::Loop { body, .. } | NodeKind::Switch { body, .. } | NodeKind::Do { body, .. } => {
            vec![*body]
        }
        NodeKind::Return { .. } | NodeKind::Jump | NodeKind::Simple => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<String> {
        let s = Statements::parse(text);
        (s.nodes.iter())
            .map(|n| format!("{}:{}", s.tokens[n.first].text, s.tokens[n.last].text))
            .collect()
    }

    #[test]
    fn a_function_body_is_parsed_into_statements() {
        let text =
            "__device__ int f(int *p) {\n  if (p[0]) x = 1; else { y = 2; }\n  return p[1];\n}\n";
        let s = Statements::parse(text);
        assert_eq!(
            kinds(text),
            ["x:;", "y:;", "{:}", "if:}", "return:;", "{:}"]
        );
        assert!(s.nodes.iter().all(|n| n.returns == Some(Returns::Value)));
        let parts = s.parts_on_line(2);
        assert_eq!(
            parts,
            [
                (3, Part::Condition),
                (0, Part::Statement),
                (1, Part::Statement)
            ]
        );
        assert!(s.is_unbraced_body(0));
        assert!(!s.is_unbraced_body(2));
        assert_eq!(s.branch_end_of(1), Some(3));
    }

    #[test]
    fn comments_strings_and_preprocessor_lines_are_not_tokens() {
        let text =
            "#define A(x) \\\n  { x; }\nvoid k() { s = \"a;}\"; /* ; {\n */ t = 1; // }\n}\n";
        let s = Statements::parse(text);
        assert_eq!(kinds(text), ["s:;", "t:;", "{:}"]);
        assert_eq!(s.open_comment_lines, [3]);
        assert_eq!(s.tokens[s.nodes[1].first].line, 4);
    }

    #[test]
    fn return_kinds_follow_the_declared_type() {
        let returns = |text: &str| Statements::parse(text).nodes.last().unwrap().returns;
        assert_eq!(
            returns("__global__ void k(int *p) { }"),
            Some(Returns::Void)
        );
        assert_eq!(
            returns("__device__ int &at(int *p) { }"),
            Some(Returns::Reference)
        );
        assert_eq!(
            returns("__device__ auto f() -> int & { }"),
            Some(Returns::Reference)
        );
        assert_eq!(returns("__device__ void *f() { }"), Some(Returns::Value));
        assert_eq!(
            returns("template <typename T> __device__ __forceinline__ T f(T *p) { }"),
            Some(Returns::Value)
        );
    }

    #[test]
    fn labels_and_do_while_are_statements_parts() {
        let text = "void k() { switch (a) { case 1: x = 1; break; default: y = 2; }\n do { z = 1; } while (f[0]);\n}";
        let s = Statements::parse(text);
        assert_eq!(
            kinds(text),
            ["x:;", "break:;", "y:;", "{:}", "switch:}", "z:;", "{:}", "do:;", "{:}"]
        );
        assert_eq!(
            s.parts_on_line(2),
            [(5, Part::Statement), (7, Part::Condition)]
        );
    }
}
