//! Integer expressions over an application's size parameters.
//!
//! `app.toml` gives buffer lengths, grids, blocks and scalar arguments either as integers or as
//! small expressions over the `[sizes]` parameters (`"blocks*threads"`, `"n/4 + 1"`), so one
//! manifest serves both the simulator size and the GPU size. This file parses and evaluates them:
//! integers, parameter names, `+ - * / %` with the usual precedence and parentheses. Arithmetic is
//! checked: overflow and division by zero are errors, never panics.

use std::collections::BTreeMap;
use std::fmt;

/// A parsed expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    Number(i64),
    Param(String),
    Binary(Box<Expr>, Op, Box<Expr>),
}

/// A binary operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

/// Why an expression could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvalError {
    UnknownParameter(String),
    Overflow,
    DivisionByZero,
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalError::UnknownParameter(p) => write!(f, "unknown parameter '{p}'"),
            EvalError::Overflow => f.write_str("arithmetic overflow"),
            EvalError::DivisionByZero => f.write_str("division by zero"),
        }
    }
}

impl Expr {
    /// Parses `text`; the error says what was expected where.
    pub fn parse(text: &str) -> Result<Expr, String> {
        let tokens = tokenize(text)?;
        let mut parser = Parser {
            tokens: &tokens,
            pos: 0,
        };
        let expr = parser.sum()?;
        match parser.peek() {
            None => Ok(expr),
            Some(t) => Err(format!("unexpected '{t}' in expression '{text}'")),
        }
    }

    /// The value under `params`.
    pub fn eval(&self, params: &BTreeMap<String, i64>) -> Result<i64, EvalError> {
        match self {
            Expr::Number(n) => Ok(*n),
            Expr::Param(p) => params
                .get(p)
                .copied()
                .ok_or_else(|| EvalError::UnknownParameter(p.clone())),
            Expr::Binary(a, op, b) => {
                let (a, b) = (a.eval(params)?, b.eval(params)?);
                match op {
                    Op::Add => a.checked_add(b).ok_or(EvalError::Overflow),
                    Op::Sub => a.checked_sub(b).ok_or(EvalError::Overflow),
                    Op::Mul => a.checked_mul(b).ok_or(EvalError::Overflow),
                    Op::Div if b == 0 => Err(EvalError::DivisionByZero),
                    Op::Rem if b == 0 => Err(EvalError::DivisionByZero),
                    Op::Div => a.checked_div(b).ok_or(EvalError::Overflow),
                    Op::Rem => a.checked_rem(b).ok_or(EvalError::Overflow),
                }
            }
        }
    }

    /// The parameter names the expression uses, in order of appearance.
    pub fn params(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.collect_params(&mut out);
        out
    }

    fn collect_params<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Expr::Number(_) => {}
            Expr::Param(p) => out.push(p),
            Expr::Binary(a, _, b) => {
                a.collect_params(out);
                b.collect_params(out);
            }
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Number(n) => write!(f, "{n}"),
            Expr::Param(p) => f.write_str(p),
            Expr::Binary(a, op, b) => {
                let op = match op {
                    Op::Add => "+",
                    Op::Sub => "-",
                    Op::Mul => "*",
                    Op::Div => "/",
                    Op::Rem => "%",
                };
                write!(f, "({a}{op}{b})")
            }
        }
    }
}

/// Whether `s` is a valid parameter or buffer name: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Number(i64),
    Ident(String),
    Sym(char),
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Number(n) => write!(f, "{n}"),
            Token::Ident(s) => f.write_str(s),
            Token::Sym(c) => write!(f, "{c}"),
        }
    }
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '_') {
                i += 1;
            }
            let digits: String = chars[start..i].iter().filter(|c| **c != '_').collect();
            let value = digits
                .parse::<i64>()
                .map_err(|_| format!("number '{digits}' is too large"))?;
            tokens.push(Token::Number(value));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(Token::Ident(chars[start..i].iter().collect()));
        } else if "+-*/%()".contains(c) {
            tokens.push(Token::Sym(c));
            i += 1;
        } else {
            return Err(format!(
                "unexpected character '{c}' in expression '{text}' (expected integers, \
                 parameter names, + - * / % and parentheses)"
            ));
        }
    }
    if tokens.is_empty() {
        return Err("empty expression".to_string());
    }
    Ok(tokens)
}

struct Parser<'t> {
    tokens: &'t [Token],
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn sum(&mut self) -> Result<Expr, String> {
        let mut left = self.product()?;
        while let Some(Token::Sym(c @ ('+' | '-'))) = self.peek() {
            let op = if *c == '+' { Op::Add } else { Op::Sub };
            self.pos += 1;
            let right = self.product()?;
            left = Expr::Binary(Box::new(left), op, Box::new(right));
        }
        Ok(left)
    }

    fn product(&mut self) -> Result<Expr, String> {
        let mut left = self.atom()?;
        while let Some(Token::Sym(c @ ('*' | '/' | '%'))) = self.peek() {
            let op = match c {
                '*' => Op::Mul,
                '/' => Op::Div,
                _ => Op::Rem,
            };
            self.pos += 1;
            let right = self.atom()?;
            left = Expr::Binary(Box::new(left), op, Box::new(right));
        }
        Ok(left)
    }

    fn atom(&mut self) -> Result<Expr, String> {
        let token = self.peek().cloned();
        self.pos += 1;
        match token {
            Some(Token::Number(n)) => Ok(Expr::Number(n)),
            Some(Token::Ident(s)) => Ok(Expr::Param(s)),
            Some(Token::Sym('(')) => {
                let inner = self.sum()?;
                match self.peek() {
                    Some(Token::Sym(')')) => {
                        self.pos += 1;
                        Ok(inner)
                    }
                    _ => Err("missing ')'".to_string()),
                }
            }
            Some(Token::Sym('-')) => {
                let inner = self.atom()?;
                Ok(Expr::Binary(
                    Box::new(Expr::Number(0)),
                    Op::Sub,
                    Box::new(inner),
                ))
            }
            Some(t) => Err(format!(
                "unexpected '{t}' (expected a number or a parameter)"
            )),
            None => Err("expression ends early (expected a number or a parameter)".to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> BTreeMap<String, i64> {
        [("blocks", 4), ("threads", 64), ("n", 1000)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }

    fn eval(text: &str) -> Result<i64, String> {
        Expr::parse(text)?
            .eval(&params())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn precedence_and_parentheses() {
        assert_eq!(eval("blocks*threads"), Ok(256));
        assert_eq!(eval("n/4 + 1"), Ok(251));
        assert_eq!(eval("2+3*4"), Ok(14));
        assert_eq!(eval("(2+3)*4"), Ok(20));
        assert_eq!(eval("n % 7 - -1"), Ok(1000 % 7 + 1));
        assert_eq!(eval("1_000"), Ok(1000));
        assert_eq!(eval("10-2-3"), Ok(5));
    }

    #[test]
    fn errors_are_values_not_panics() {
        assert_eq!(eval("m*2"), Err("unknown parameter 'm'".to_string()));
        assert_eq!(eval("n/0"), Err("division by zero".to_string()));
        assert_eq!(
            eval("9223372036854775807*2"),
            Err("arithmetic overflow".to_string())
        );
        assert!(eval("").is_err());
        assert!(eval("n*").is_err());
        assert!(eval("(n").is_err());
        assert!(eval("n n").is_err());
        assert!(eval("n^2").unwrap_err().contains("unexpected character"));
        assert!(eval("99999999999999999999")
            .unwrap_err()
            .contains("too large"));
    }

    #[test]
    fn params_are_listed() {
        let e = Expr::parse("blocks*threads+blocks").unwrap();
        assert_eq!(e.params(), vec!["blocks", "threads", "blocks"]);
        assert!(is_identifier("tile_flag2"));
        assert!(!is_identifier("2x"));
        assert!(!is_identifier(""));
    }
}
