//! Custom resources' `enum`s and CEL validation rules (`x-kubernetes-validations`), the subset
//! CRDs ordinarily write: `self` and field selection, `has()`, `size()`, literals,
//! comparisons, `!`, `&&`, `||` and parentheses. A rule outside it fails as
//! kube-apiserver fails a rule that does not compile, so a test never passes by a rule
//! the sandbox skipped.

use serde_json::Value;

use super::FieldError;

/// Checks every rule of `schema` against `object`, adding kube-apiserver's errors
/// (`spec: Invalid value: "object": <message>`).
pub(crate) fn validate(schema: &Value, object: &Value, errs: &mut Vec<FieldError>) {
    walk(schema, object, "", errs);
}

fn walk(schema: &Value, value: &Value, path: &str, errs: &mut Vec<FieldError>) {
    // `enum` travels with the rules: the type check (`schema`) does not read it.
    if let (Some(allowed), Value::String(text)) = (schema["enum"].as_array(), value) {
        if !allowed.iter().any(|a| a == value) {
            let allowed: Vec<&str> = allowed.iter().filter_map(Value::as_str).collect();
            errs.push(FieldError::not_supported(path, text, &allowed));
        }
    }
    if let Some(rules) = schema["x-kubernetes-validations"].as_array() {
        for rule in rules {
            let text = rule["rule"].as_str().unwrap_or_default();
            let verdict = parse(text).and_then(|expr| eval(&expr, value));
            let message = match verdict {
                Ok(Val::Bool(true)) => continue,
                Ok(Val::Bool(false)) => rule["message"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("failed rule: {text}")),
                Ok(_) => format!("compilation failed: rule {text:?} does not evaluate to a bool"),
                Err(err) => err,
            };
            let field = if path.is_empty() { "<nil>" } else { path };
            errs.push(FieldError::invalid(
                field,
                &format!("\"{}\"", type_name(value)),
                &message,
            ));
        }
    }
    match value {
        Value::Object(map) => {
            let props = schema["properties"].as_object();
            for (key, child) in map {
                let Some(child_schema) = props.and_then(|p| p.get(key)) else {
                    continue;
                };
                let child_path = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                walk(child_schema, child, &child_path, errs);
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    walk(item_schema, item, &format!("{path}[{i}]"), errs);
                }
            }
        }
        _ => {}
    }
}

/// The type word kube-apiserver shows as the invalid value of a failed rule.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        Value::Null => "null",
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Expr {
    Lit(Val),
    SelfRef,
    Select(Box<Expr>, String),
    Has(Box<Expr>, String),
    Size(Box<Expr>),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Cmp(Box<Expr>, &'static str, Box<Expr>),
}

#[derive(Debug, Clone, PartialEq)]
enum Val {
    Bool(bool),
    Int(i64),
    Str(String),
    Null,
    Json(Value),
}

fn parse(text: &str) -> Result<Expr, String> {
    let tokens = tokenize(text)?;
    let mut parser = Parser { tokens, at: 0 };
    let expr = parser.or()?;
    if parser.at != parser.tokens.len() {
        return Err(format!(
            "compilation failed: unexpected {:?} in {text:?}",
            parser.tokens[parser.at]
        ));
    }
    Ok(expr)
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Int(i64),
    Op(&'static str),
}

fn tokenize(text: &str) -> Result<Vec<Tok>, String> {
    const OPS: [&str; 13] = [
        "||", "&&", "==", "!=", "<=", ">=", "<", ">", "!", "(", ")", ".", ",",
    ];
    let mut out = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let c = rest.chars().next().unwrap_or(' ');
        if let Some(op) = OPS.iter().find(|op| rest.starts_with(**op)) {
            out.push(Tok::Op(op));
            rest = &rest[op.len()..];
        } else if c == '\'' || c == '"' {
            let end = rest[1..]
                .find(c)
                .ok_or_else(|| format!("compilation failed: unterminated string in {text:?}"))?;
            out.push(Tok::Str(rest[1..=end].to_string()));
            rest = &rest[end + 2..];
        } else if c.is_ascii_digit() {
            let end = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            out.push(Tok::Int(
                rest[..end]
                    .parse()
                    .map_err(|e| format!("compilation failed: {e}"))?,
            ));
            rest = &rest[end..];
        } else if c.is_ascii_alphabetic() || c == '_' {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            out.push(Tok::Ident(rest[..end].to_string()));
            rest = &rest[end..];
        } else {
            return Err(format!("compilation failed: unexpected {c:?} in {text:?}"));
        }
        rest = rest.trim_start();
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<Tok>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.at)
    }

    fn eat(&mut self, op: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Op(o)) if *o == op) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, op: &str) -> Result<(), String> {
        if self.eat(op) {
            Ok(())
        } else {
            Err(format!("compilation failed: expected {op:?}"))
        }
    }

    fn or(&mut self) -> Result<Expr, String> {
        let mut left = self.and()?;
        while self.eat("||") {
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut left = self.unary()?;
        while self.eat("&&") {
            left = Expr::And(Box::new(left), Box::new(self.unary()?));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat("!") {
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        let left = self.postfix()?;
        for op in ["==", "!=", "<=", ">=", "<", ">"] {
            if self.eat(op) {
                return Ok(Expr::Cmp(Box::new(left), op, Box::new(self.postfix()?)));
            }
        }
        Ok(left)
    }

    fn postfix(&mut self) -> Result<Expr, String> {
        let mut expr = self.primary()?;
        while self.eat(".") {
            let Some(Tok::Ident(name)) = self.peek().cloned() else {
                return Err("compilation failed: expected a field name after '.'".into());
            };
            self.at += 1;
            if name == "size" && self.eat("(") {
                self.expect(")")?;
                expr = Expr::Size(Box::new(expr));
            } else {
                expr = Expr::Select(Box::new(expr), name);
            }
        }
        Ok(expr)
    }

    fn primary(&mut self) -> Result<Expr, String> {
        let token = self
            .peek()
            .cloned()
            .ok_or("compilation failed: unexpected end of rule")?;
        self.at += 1;
        match token {
            Tok::Op("(") => {
                let inner = self.or()?;
                self.expect(")")?;
                Ok(inner)
            }
            Tok::Str(s) => Ok(Expr::Lit(Val::Str(s))),
            Tok::Int(i) => Ok(Expr::Lit(Val::Int(i))),
            Tok::Ident(word) => match word.as_str() {
                "self" => Ok(Expr::SelfRef),
                "true" => Ok(Expr::Lit(Val::Bool(true))),
                "false" => Ok(Expr::Lit(Val::Bool(false))),
                "null" => Ok(Expr::Lit(Val::Null)),
                "has" => {
                    self.expect("(")?;
                    let inner = self.postfix()?;
                    self.expect(")")?;
                    match inner {
                        Expr::Select(of, field) => Ok(Expr::Has(of, field)),
                        _ => Err("compilation failed: invalid argument to has() macro".into()),
                    }
                }
                other => Err(format!(
                    "compilation failed: undeclared reference to '{other}'"
                )),
            },
            Tok::Op(op) => Err(format!("compilation failed: unexpected {op:?}")),
        }
    }
}

fn to_val(value: &Value) -> Val {
    match value {
        Value::Bool(b) => Val::Bool(*b),
        Value::String(s) => Val::Str(s.clone()),
        Value::Number(n) if n.as_i64().is_some() => Val::Int(n.as_i64().unwrap_or_default()),
        Value::Null => Val::Null,
        other => Val::Json(other.clone()),
    }
}

fn eval(expr: &Expr, this: &Value) -> Result<Val, String> {
    let bool_of = |e: &Expr| match eval(e, this)? {
        Val::Bool(b) => Ok(b),
        other => Err(format!("no such overload: {other:?} is not a bool")),
    };
    match expr {
        Expr::Lit(v) => Ok(v.clone()),
        Expr::SelfRef => Ok(to_val(this)),
        Expr::Select(of, field) => match eval(of, this)? {
            Val::Json(Value::Object(map)) => map
                .get(field)
                .map(to_val)
                .ok_or_else(|| format!("no such key: {field}")),
            _ => Err(format!("no such key: {field}")),
        },
        Expr::Has(of, field) => match eval(of, this)? {
            Val::Json(Value::Object(map)) => Ok(Val::Bool(map.contains_key(field))),
            _ => Err(format!("no such key: {field}")),
        },
        Expr::Size(of) => match eval(of, this)? {
            Val::Str(s) => Ok(Val::Int(s.chars().count() as i64)),
            Val::Json(Value::Array(a)) => Ok(Val::Int(a.len() as i64)),
            Val::Json(Value::Object(m)) => Ok(Val::Int(m.len() as i64)),
            other => Err(format!("no such overload: size({other:?})")),
        },
        Expr::Not(inner) => Ok(Val::Bool(!bool_of(inner)?)),
        // CEL's logical operators forgive an error on the side that does not decide.
        Expr::And(l, r) => match (bool_of(l), bool_of(r)) {
            (Ok(false), _) | (_, Ok(false)) => Ok(Val::Bool(false)),
            (Ok(true), Ok(true)) => Ok(Val::Bool(true)),
            (Err(e), _) | (_, Err(e)) => Err(e),
        },
        Expr::Or(l, r) => match (bool_of(l), bool_of(r)) {
            (Ok(true), _) | (_, Ok(true)) => Ok(Val::Bool(true)),
            (Ok(false), Ok(false)) => Ok(Val::Bool(false)),
            (Err(e), _) | (_, Err(e)) => Err(e),
        },
        Expr::Cmp(l, op, r) => {
            let (l, r) = (eval(l, this)?, eval(r, this)?);
            let ordering = match (&l, &r) {
                (Val::Int(a), Val::Int(b)) => Some(a.cmp(b)),
                (Val::Str(a), Val::Str(b)) => Some(a.cmp(b)),
                _ => None,
            };
            let result = match (*op, ordering) {
                ("==", _) => l == r,
                ("!=", _) => l != r,
                ("<", Some(o)) => o.is_lt(),
                (">", Some(o)) => o.is_gt(),
                ("<=", Some(o)) => o.is_le(),
                (">=", Some(o)) => o.is_ge(),
                _ => return Err(format!("no such overload: {l:?} {op} {r:?}")),
            };
            Ok(Val::Bool(result))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn holds(rule: &str, this: Value) -> Result<bool, String> {
        match eval(&parse(rule)?, &this)? {
            Val::Bool(b) => Ok(b),
            other => Err(format!("{other:?}")),
        }
    }

    #[test]
    fn rules_of_the_supported_subset_evaluate_as_cel_does() {
        let this = json!({"a": "x", "n": 3, "list": [1, 2], "sub": {"b": true}});
        assert_eq!(holds("has(self.a) || has(self.z)", this.clone()), Ok(true));
        assert_eq!(holds("has(self.z) || has(self.y)", this.clone()), Ok(false));
        assert_eq!(
            holds("self.a == 'x' && self.n >= 3", this.clone()),
            Ok(true)
        );
        assert_eq!(holds("self.list.size() < 2", this.clone()), Ok(false));
        assert_eq!(holds("!(self.sub.b)", this.clone()), Ok(false));
        assert_eq!(
            holds("has(self.sub.b) && self.a != \"y\"", this.clone()),
            Ok(true)
        );
        // An error on the side that does not decide is forgiven; otherwise it stands.
        assert_eq!(holds("self.missing == 1 || true", this.clone()), Ok(true));
        assert_eq!(
            holds("self.missing == 1", this.clone()),
            Err("no such key: missing".into())
        );
        assert!(holds("self.a.matches('x')", this.clone()).is_err());
        assert!(parse("self.a ==").is_err());
        assert!(parse("size(self.a)").is_err());
    }

    #[test]
    fn a_failed_rule_is_reported_at_its_node_with_its_message() {
        let schema = json!({"properties": {"spec": {"properties": {"items": {"items": {
            "x-kubernetes-validations": [{"rule": "has(self.a) || has(self.b)", "message": "set a or b"}]
        }}}}}});
        let mut errs = Vec::new();
        validate(
            &schema,
            &json!({"spec": {"items": [{"a": 1}, {"c": 2}]}}),
            &mut errs,
        );
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].field, "spec.items[1]");
        assert_eq!(errs[0].message, "Invalid value: \"object\": set a or b");

        let schema =
            json!({"properties": {"policy": {"type": "string", "enum": ["Prune", "Orphan"]}}});
        let mut errs = Vec::new();
        validate(&schema, &json!({"policy": "Delete"}), &mut errs);
        assert_eq!(errs[0].field, "policy");
        assert_eq!(
            errs[0].message,
            "Unsupported value: \"Delete\": supported values: \"Prune\", \"Orphan\""
        );
    }
}
