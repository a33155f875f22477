//! `math_calculate`: a small, safe arithmetic evaluator (a hand-written recursive-descent parser;
//! nothing is ever handed to an interpreter).
//!
//! Grammar (usual precedence, `^` right-associative and binding tighter than unary minus, so
//! `-2^2 = -4` as in mathematics):
//! `expr := term (('+'|'-') term)*`, `term := unary (('*'|'/'|'%') unary)*`,
//! `unary := ('-'|'+') unary | power`, `power := atom ('^' unary)?`,
//! `atom := number | constant | function '(' args ')' | '(' expr ')'`.
//! Limits: 1,000 characters and 64 levels of nesting, so no input can exhaust the stack.

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};

/// Longest accepted expression, in bytes.
pub const MAX_EXPR_LEN: usize = 1_000;
/// Deepest accepted nesting (parentheses, unary operators, function calls).
pub const MAX_DEPTH: usize = 64;

/// The `math_calculate` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct MathCalculate;

#[async_trait]
impl Tool for MathCalculate {
    fn name(&self) -> &str {
        "math_calculate"
    }

    fn description(&self) -> &str {
        "Evaluate an arithmetic expression exactly as written: + - * / % ^, parentheses, \
         constants pi and e, functions sqrt abs floor ceil round trunc exp ln log10 log2 sin cos tan \
         asin acos atan min max pow hypot. Returns the numeric result."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "expression": {"type": "string", "description": "e.g. \"(2 + 3) * sqrt(16) / 4\""}
            },
            "required": ["expression"],
            "additionalProperties": false
        })
    }

    async fn execute(&self, _ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
        let expr = input
            .get("expression")
            .and_then(Value::as_str)
            .ok_or_else(|| ToolError::InvalidInput("`expression` (a string) is required".into()))?;
        let result = evaluate(expr).map_err(|e| ToolError::InvalidInput(e.to_string()))?;
        Ok(ToolOutput::json(
            json!({"expression": expr, "result": number_json(result)}),
        ))
    }
}

/// Integers print as integers (`4`, not `4.0`) when exactly representable.
fn number_json(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        // The guard keeps the value inside i64's exactly representable range.
        json!(x as i64)
    } else {
        json!(x)
    }
}

/// Why an expression could not be evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum MathError {
    #[error("expression is empty")]
    Empty,
    #[error("expression is longer than {MAX_EXPR_LEN} characters")]
    TooLong,
    #[error("expression nests deeper than {MAX_DEPTH} levels")]
    TooDeep,
    #[error("unexpected {found} at position {pos}; expected {expected}")]
    Unexpected {
        found: String,
        pos: usize,
        expected: &'static str,
    },
    #[error("unknown name `{0}` (constants: pi, e; functions: sqrt abs floor ceil round trunc exp ln log10 log2 sin cos tan asin acos atan min max pow hypot)")]
    UnknownName(String),
    #[error("function `{name}` takes {expected} argument(s), got {got}")]
    Arity {
        name: String,
        expected: &'static str,
        got: usize,
    },
    #[error("division by zero")]
    DivisionByZero,
    #[error("the result is not a finite number (overflow or a domain error such as sqrt(-1))")]
    NotFinite,
}

/// Evaluate `expr`.
pub fn evaluate(expr: &str) -> Result<f64, MathError> {
    if expr.len() > MAX_EXPR_LEN {
        return Err(MathError::TooLong);
    }
    let tokens = tokenize(expr)?;
    if tokens.is_empty() {
        return Err(MathError::Empty);
    }
    let mut p = Parser {
        tokens,
        pos: 0,
        depth: 0,
    };
    let v = p.expr()?;
    if let Some((tok, pos)) = p.tokens.get(p.pos) {
        return Err(MathError::Unexpected {
            found: tok.describe(),
            pos: *pos,
            expected: "an operator or the end",
        });
    }
    if v.is_finite() {
        Ok(v)
    } else {
        Err(MathError::NotFinite)
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Ident(String),
    Op(char),
    LParen,
    RParen,
    Comma,
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Num(n) => format!("number {n}"),
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Op(c) => format!("`{c}`"),
            Tok::LParen => "`(`".into(),
            Tok::RParen => "`)`".into(),
            Tok::Comma => "`,`".into(),
        }
    }
}

fn tokenize(s: &str) -> Result<Vec<(Tok, usize)>, MathError> {
    let chars: Vec<(usize, char)> = s.char_indices().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let (pos, c) = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c.is_ascii_digit() || c == '.' {
            let start = i;
            while i < chars.len()
                && (chars[i].1.is_ascii_digit() || chars[i].1 == '.' || chars[i].1 == '_')
            {
                i += 1;
            }
            // Exponent: 1e10, 2.5E-3
            if i < chars.len() && matches!(chars[i].1, 'e' | 'E') {
                let mut j = i + 1;
                if j < chars.len() && matches!(chars[j].1, '+' | '-') {
                    j += 1;
                }
                if j < chars.len() && chars[j].1.is_ascii_digit() {
                    while j < chars.len() && chars[j].1.is_ascii_digit() {
                        j += 1;
                    }
                    i = j;
                }
            }
            let text: String = chars[start..i]
                .iter()
                .map(|(_, c)| *c)
                .filter(|c| *c != '_')
                .collect();
            let n: f64 = text.parse().map_err(|_| MathError::Unexpected {
                found: format!("`{text}`"),
                pos,
                expected: "a number",
            })?;
            out.push((Tok::Num(n), pos));
            continue;
        }
        if c.is_ascii_alphabetic() {
            let start = i;
            while i < chars.len() && (chars[i].1.is_ascii_alphanumeric() || chars[i].1 == '_') {
                i += 1;
            }
            let name: String = chars[start..i].iter().map(|(_, c)| *c).collect();
            out.push((Tok::Ident(name.to_ascii_lowercase()), pos));
            continue;
        }
        let tok = match c {
            '+' | '-' | '/' | '%' | '^' => Tok::Op(c),
            '*' => {
                // `**` is accepted as a synonym of `^`.
                if i + 1 < chars.len() && chars[i + 1].1 == '*' {
                    i += 1;
                    Tok::Op('^')
                } else {
                    Tok::Op('*')
                }
            }
            '×' => Tok::Op('*'),
            '÷' => Tok::Op('/'),
            '(' => Tok::LParen,
            ')' => Tok::RParen,
            ',' => Tok::Comma,
            other => {
                return Err(MathError::Unexpected {
                    found: format!("character `{other}`"),
                    pos,
                    expected: "a number, a name, an operator or a parenthesis",
                })
            }
        };
        out.push((tok, pos));
        i += 1;
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<(Tok, usize)>,
    pos: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.pos).map(|(t, _)| t)
    }

    fn unexpected(&self, expected: &'static str) -> MathError {
        match self.tokens.get(self.pos) {
            Some((t, p)) => MathError::Unexpected {
                found: t.describe(),
                pos: *p,
                expected,
            },
            None => MathError::Unexpected {
                found: "end of expression".into(),
                pos: self.tokens.last().map(|(_, p)| p + 1).unwrap_or(0),
                expected,
            },
        }
    }

    fn enter(&mut self) -> Result<(), MathError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            Err(MathError::TooDeep)
        } else {
            Ok(())
        }
    }

    fn expr(&mut self) -> Result<f64, MathError> {
        self.enter()?;
        let mut v = self.term()?;
        while let Some(Tok::Op(op @ ('+' | '-'))) = self.peek().cloned() {
            self.pos += 1;
            let r = self.term()?;
            v = if op == '+' { v + r } else { v - r };
        }
        self.depth -= 1;
        Ok(v)
    }

    fn term(&mut self) -> Result<f64, MathError> {
        let mut v = self.unary()?;
        while let Some(Tok::Op(op @ ('*' | '/' | '%'))) = self.peek().cloned() {
            self.pos += 1;
            let r = self.unary()?;
            v = match op {
                '*' => v * r,
                _ if r == 0.0 => return Err(MathError::DivisionByZero),
                '/' => v / r,
                _ => v % r,
            };
        }
        Ok(v)
    }

    fn unary(&mut self) -> Result<f64, MathError> {
        match self.peek() {
            Some(Tok::Op('-')) => {
                self.pos += 1;
                self.enter()?;
                let v = -self.unary()?;
                self.depth -= 1;
                Ok(v)
            }
            Some(Tok::Op('+')) => {
                self.pos += 1;
                self.enter()?;
                let v = self.unary()?;
                self.depth -= 1;
                Ok(v)
            }
            _ => self.power(),
        }
    }

    fn power(&mut self) -> Result<f64, MathError> {
        let base = self.atom()?;
        if let Some(Tok::Op('^')) = self.peek() {
            self.pos += 1;
            self.enter()?;
            let exp = self.unary()?;
            self.depth -= 1;
            return Ok(base.powf(exp));
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<f64, MathError> {
        match self.peek().cloned() {
            Some(Tok::Num(n)) => {
                self.pos += 1;
                Ok(n)
            }
            Some(Tok::LParen) => {
                self.pos += 1;
                let v = self.expr()?;
                if self.peek() != Some(&Tok::RParen) {
                    return Err(self.unexpected("`)`"));
                }
                self.pos += 1;
                Ok(v)
            }
            Some(Tok::Ident(name)) => {
                self.pos += 1;
                if self.peek() == Some(&Tok::LParen) {
                    self.pos += 1;
                    let mut args = Vec::new();
                    if self.peek() != Some(&Tok::RParen) {
                        loop {
                            args.push(self.expr()?);
                            match self.peek() {
                                Some(Tok::Comma) => self.pos += 1,
                                Some(Tok::RParen) => break,
                                _ => return Err(self.unexpected("`,` or `)`")),
                            }
                        }
                    }
                    self.pos += 1; // the `)`
                    call(&name, &args)
                } else {
                    match name.as_str() {
                        "pi" => Ok(std::f64::consts::PI),
                        "e" => Ok(std::f64::consts::E),
                        "tau" => Ok(std::f64::consts::TAU),
                        _ => Err(MathError::UnknownName(name)),
                    }
                }
            }
            _ => Err(self.unexpected("a number, a name or `(`")),
        }
    }
}

fn call(name: &str, args: &[f64]) -> Result<f64, MathError> {
    let one = |f: fn(f64) -> f64| -> Result<f64, MathError> {
        match args {
            [x] => Ok(f(*x)),
            _ => Err(MathError::Arity {
                name: name.into(),
                expected: "1",
                got: args.len(),
            }),
        }
    };
    let two = |f: fn(f64, f64) -> f64| -> Result<f64, MathError> {
        match args {
            [x, y] => Ok(f(*x, *y)),
            _ => Err(MathError::Arity {
                name: name.into(),
                expected: "2",
                got: args.len(),
            }),
        }
    };
    match name {
        "sqrt" => one(f64::sqrt),
        "abs" => one(f64::abs),
        "floor" => one(f64::floor),
        "ceil" => one(f64::ceil),
        "round" => one(f64::round),
        "trunc" => one(f64::trunc),
        "exp" => one(f64::exp),
        "ln" => one(f64::ln),
        "log" | "log10" => one(f64::log10),
        "log2" => one(f64::log2),
        "sin" => one(f64::sin),
        "cos" => one(f64::cos),
        "tan" => one(f64::tan),
        "asin" => one(f64::asin),
        "acos" => one(f64::acos),
        "atan" => one(f64::atan),
        "pow" => two(f64::powf),
        "hypot" => two(f64::hypot),
        "min" | "max" => {
            if args.is_empty() {
                return Err(MathError::Arity {
                    name: name.into(),
                    expected: "1 or more",
                    got: 0,
                });
            }
            let init = args[0];
            Ok(args[1..].iter().fold(
                init,
                |a, b| if name == "min" { a.min(*b) } else { a.max(*b) },
            ))
        }
        _ => Err(MathError::UnknownName(name.into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_and_associativity() {
        assert_eq!(evaluate("2 + 3 * 4").unwrap(), 14.0);
        assert_eq!(evaluate("(2 + 3) * 4").unwrap(), 20.0);
        assert_eq!(evaluate("2 ^ 3 ^ 2").unwrap(), 512.0);
        assert_eq!(evaluate("-2 ^ 2").unwrap(), -4.0);
        assert_eq!(evaluate("2 ** 10").unwrap(), 1024.0);
        assert_eq!(evaluate("10 - 4 - 3").unwrap(), 3.0);
        assert_eq!(evaluate("7 % 4").unwrap(), 3.0);
        assert_eq!(evaluate("1.5e3 / 3").unwrap(), 500.0);
        assert_eq!(evaluate("max(1, 9, 4) + min(3, -1)").unwrap(), 8.0);
        assert_eq!(evaluate("sqrt(16) + abs(-2)").unwrap(), 6.0);
        assert!((evaluate("sin(pi / 2)").unwrap() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn rejects_bad_input_without_panicking() {
        assert_eq!(evaluate(""), Err(MathError::Empty));
        assert_eq!(evaluate("1 / 0"), Err(MathError::DivisionByZero));
        assert_eq!(evaluate("sqrt(-1)"), Err(MathError::NotFinite));
        assert!(matches!(
            evaluate("__import__('os')"),
            Err(MathError::Unexpected { .. })
        ));
        assert!(matches!(evaluate("system(1)"), Err(MathError::UnknownName(n)) if n == "system"));
        assert!(matches!(evaluate("2 +"), Err(MathError::Unexpected { .. })));
        assert!(matches!(evaluate("(1"), Err(MathError::Unexpected { .. })));
        assert!(matches!(evaluate("1 2"), Err(MathError::Unexpected { .. })));
        assert!(matches!(evaluate("pow(1)"), Err(MathError::Arity { .. })));
        assert_eq!(evaluate(&"(".repeat(500)), Err(MathError::TooDeep));
        assert_eq!(evaluate(&"-".repeat(500)), Err(MathError::TooDeep));
        assert_eq!(evaluate(&"1+".repeat(600)), Err(MathError::TooLong));
    }

    #[test]
    fn integers_render_as_integers() {
        assert_eq!(number_json(4.0), json!(4));
        assert_eq!(number_json(0.5), json!(0.5));
    }
}
