//! The CEL checker: every name, field path and function a `when` uses is
//! checked against the signal schema ([`super::vocabulary`]) at load, and the
//! condition must be boolean. It reports only what is certain to fail or to
//! be meaningless at run time (an unknown name, a string compared with a
//! number); anything it cannot know (values inside `args`) passes.

use cel::common::ast::{Expr, LiteralValue};
use cel::IdedExpr;

use super::vocabulary::{self, Ty, SIGNALS};

/// One problem, at the node `id` of the program (`None`: the whole condition).
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub id: Option<u64>,
    pub message: String,
}

/// Functions called as `f(x)`.
const GLOBAL: &[&str] = &[
    "size", "int", "uint", "double", "string", "bool", "bytes", "dyn", "type", "matches",
];

/// Functions called as `x.f(…)`.
const MEMBER: &[&str] = &[
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "orValue",
    "hasValue",
    "value",
    "or",
    "optMap",
    "optFlatMap",
];

/// Type names, usable as values (`type(x) == int`).
const TYPES: &[&str] = &[
    "int",
    "uint",
    "double",
    "string",
    "bool",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
];

/// `optional.of(…)` and its siblings.
const OPTIONAL: &[&str] = &["of", "none", "ofNonZeroValue"];

/// What the checker knows of a value's type.
#[derive(Debug, Clone, PartialEq)]
enum T {
    Bool,
    Int,
    Double,
    Str,
    Null,
    List(Box<T>),
    Map(Box<T>),
    /// Unknown until run time (inside `args`, optionals, `dyn(…)`).
    Dyn,
    /// A group of signals (`tool`, `detect`): its fields are the signals under it.
    Group(String),
}

impl T {
    fn of(ty: Ty) -> T {
        match ty {
            Ty::Bool => T::Bool,
            Ty::Int => T::Int,
            Ty::Double => T::Double,
            Ty::String => T::Str,
            Ty::Strings => T::List(Box::new(T::Str)),
            Ty::Numbers => T::List(Box::new(T::Double)),
            Ty::Records => T::List(Box::new(T::Map(Box::new(T::Dyn)))),
            Ty::Map => T::Map(Box::new(T::Dyn)),
        }
    }

    fn name(&self) -> String {
        match self {
            T::Bool => "bool".into(),
            T::Int => "int".into(),
            T::Double => "double".into(),
            T::Str => "string".into(),
            T::Null => "null".into(),
            T::List(e) => format!("list({})", e.name()),
            T::Map(v) => format!("map(string, {})", v.name()),
            T::Dyn => "dyn".into(),
            T::Group(p) => format!("the signal group `{p}`"),
        }
    }

    fn numeric(&self) -> bool {
        matches!(self, T::Int | T::Double | T::Dyn)
    }

    fn boolish(&self) -> bool {
        matches!(self, T::Bool | T::Dyn)
    }

    /// Values of the two types can never be equal (CEL compares across
    /// types as false: a typo'd comparison that is silently never true).
    fn disjoint(&self, other: &T) -> bool {
        let family = |t: &T| match t {
            T::Int | T::Double => Some(0),
            T::Str => Some(1),
            T::Bool => Some(2),
            T::List(_) => Some(3),
            T::Map(_) | T::Group(_) => Some(4),
            T::Null | T::Dyn => None,
        };
        matches!((family(self), family(other)), (Some(a), Some(b)) if a != b)
    }
}

/// Checks a compiled condition; an empty list means it is sound.
pub fn check(expr: &IdedExpr) -> Vec<Problem> {
    let mut c = Checker {
        scope: Vec::new(),
        problems: Vec::new(),
    };
    let t = c.expr(expr);
    if c.problems.is_empty() && !t.boolish() {
        c.problems.push(Problem {
            id: None,
            message: format!("the condition must be a bool, but it is {}", t.name()),
        });
    }
    c.problems
}

struct Checker {
    /// Comprehension variables in scope, innermost last.
    scope: Vec<(String, T)>,
    problems: Vec<Problem>,
}

impl Checker {
    fn fail(&mut self, id: u64, message: String) -> T {
        self.problems.push(Problem {
            id: Some(id),
            message,
        });
        T::Dyn
    }

    fn expr(&mut self, e: &IdedExpr) -> T {
        match &e.expr {
            Expr::Literal(l) => match l {
                LiteralValue::Boolean(_) => T::Bool,
                LiteralValue::Int(_) | LiteralValue::UInt(_) => T::Int,
                LiteralValue::Double(_) => T::Double,
                LiteralValue::String(_) => T::Str,
                LiteralValue::Bytes(_) => T::Dyn,
                LiteralValue::Null => T::Null,
            },
            Expr::Ident(name) => self.ident(e.id, name),
            Expr::Select(s) => {
                let operand = self.expr(&s.operand);
                let t = self.field(path_start(e), &operand, &s.field);
                if s.test {
                    T::Bool
                } else {
                    t
                }
            }
            Expr::List(l) => {
                let types: Vec<T> = l.elements.iter().map(|x| self.expr(x)).collect();
                T::List(Box::new(same(&types)))
            }
            Expr::Map(m) => {
                let mut values = Vec::new();
                for entry in &m.entries {
                    if let cel::common::ast::EntryExpr::MapEntry(me) = &entry.expr {
                        self.expr(&me.key);
                        values.push(self.expr(&me.value));
                    }
                }
                T::Map(Box::new(same(&values)))
            }
            Expr::Struct(_) => self.fail(e.id, "message literals are not supported here".into()),
            Expr::Comprehension(c) => {
                let range = self.expr(&c.iter_range);
                let item = match &range {
                    T::List(el) => (**el).clone(),
                    T::Map(_) | T::Group(_) => T::Str,
                    T::Dyn => T::Dyn,
                    other => {
                        return self.fail(
                            c.iter_range.id,
                            format!("cannot iterate over {}", other.name()),
                        )
                    }
                };
                let accu = self.expr(&c.accu_init);
                let depth = self.scope.len();
                self.scope.push((c.iter_var.clone(), item));
                if let Some(v2) = &c.iter_var2 {
                    self.scope.push((v2.clone(), T::Dyn));
                }
                self.scope.push((c.accu_var.clone(), accu));
                self.expr(&c.loop_cond);
                self.expr(&c.loop_step);
                let t = self.expr(&c.result);
                self.scope.truncate(depth);
                t
            }
            Expr::Call(call) => self.call(e.id, call),
            Expr::Unspecified => T::Dyn,
        }
    }

    fn ident(&mut self, id: u64, name: &str) -> T {
        if let Some((_, t)) = self.scope.iter().rev().find(|(n, _)| n == name) {
            return t.clone();
        }
        if let Some(s) = vocabulary::signal(name) {
            return T::of(s.ty);
        }
        if TYPES.contains(&name) {
            return T::Dyn;
        }
        if vocabulary::is_group(name) {
            return T::Group(name.to_string());
        }
        let mut names: Vec<&str> = SIGNALS.iter().map(|s| s.name).collect();
        names.extend(
            SIGNALS
                .iter()
                .filter_map(|s| s.name.split_once('.').map(|(g, _)| g)),
        );
        let hint = vocabulary::closest(name, names.into_iter())
            .map(|n| format!("; did you mean `{n}`?"))
            .unwrap_or_default();
        self.fail(
            id,
            format!("unknown name `{name}`{hint} (`toolgate signals` lists them)"),
        )
    }

    fn field(&mut self, id: u64, of: &T, field: &str) -> T {
        match of {
            T::Group(g) => {
                let full = format!("{g}.{field}");
                if let Some(s) = vocabulary::signal(&full) {
                    return T::of(s.ty);
                }
                if vocabulary::is_group(&full) {
                    return T::Group(full);
                }
                let under = SIGNALS.iter().map(|s| s.name);
                let hint = vocabulary::closest(&full, under)
                    .map(|n| format!("; did you mean `{n}`?"))
                    .unwrap_or_default();
                self.fail(id, format!("unknown signal `{full}`{hint}"))
            }
            T::Map(v) => (**v).clone(),
            T::Dyn => T::Dyn,
            other => self.fail(id, format!("{} has no fields (`.{field}`)", other.name())),
        }
    }

    fn call(&mut self, id: u64, call: &cel::common::ast::CallExpr) -> T {
        let f = call.func_name.as_str();
        if let Some(target) = &call.target {
            if matches!(&target.expr, Expr::Ident(n) if n == "optional") && OPTIONAL.contains(&f) {
                for a in &call.args {
                    self.expr(a);
                }
                return T::Dyn;
            }
        }
        if f == "optional.of" || f == "optional.none" || f == "optional.ofNonZeroValue" {
            for a in &call.args {
                self.expr(a);
            }
            return T::Dyn;
        }
        let target = call.target.as_ref().map(|t| self.expr(t));
        // `x.?f` and `x[?k]`: the field is checked like a plain one.
        if f == "_?._" {
            let operand = call.args.first().map(|a| self.expr(a)).unwrap_or(T::Dyn);
            if let Some(Expr::Literal(LiteralValue::String(s))) = call.args.get(1).map(|a| &a.expr)
            {
                self.field(id, &operand, s.as_ref());
            }
            return T::Dyn;
        }
        let args: Vec<T> = call.args.iter().map(|a| self.expr(a)).collect();
        let arg = |i: usize| args.get(i).cloned().unwrap_or(T::Dyn);
        match (f, &target) {
            ("_&&_" | "_||_", None) => {
                for (i, t) in args.iter().enumerate() {
                    if !t.boolish() {
                        let op = if f == "_&&_" { "&&" } else { "||" };
                        let at = call.args[i].id;
                        self.fail(at, format!("`{op}` needs bools, but this is {}", t.name()));
                    }
                }
                T::Bool
            }
            ("!_" | "@not_strictly_false", None) => {
                if !arg(0).boolish() {
                    self.fail(
                        id,
                        format!("`!` needs a bool, but this is {}", arg(0).name()),
                    );
                }
                T::Bool
            }
            ("_==_" | "_!=_", None) => {
                if arg(0).disjoint(&arg(1)) {
                    self.fail(
                        id,
                        format!(
                            "compares {} with {}: never equal",
                            arg(0).name(),
                            arg(1).name()
                        ),
                    );
                }
                T::Bool
            }
            ("_<_" | "_<=_" | "_>_" | "_>=_", None) => {
                let (a, b) = (arg(0), arg(1));
                let ok = (a.numeric() && b.numeric())
                    || (matches!(a, T::Str | T::Dyn) && matches!(b, T::Str | T::Dyn));
                if !ok {
                    self.fail(id, format!("cannot order {} and {}", a.name(), b.name()));
                }
                T::Bool
            }
            ("_+_", None) => match (arg(0), arg(1)) {
                (T::Int, T::Int) => T::Int,
                (a, b) if a.numeric() && b.numeric() && a != T::Dyn && b != T::Dyn => T::Double,
                (T::Str, T::Str) => T::Str,
                (T::List(a), T::List(b)) => T::List(Box::new(same(&[*a, *b]))),
                (T::Dyn, _) | (_, T::Dyn) => T::Dyn,
                (a, b) => self.fail(id, format!("cannot add {} and {}", a.name(), b.name())),
            },
            ("_-_" | "_*_" | "_/_" | "_%_", None) => {
                let (a, b) = (arg(0), arg(1));
                if !(a.numeric() && b.numeric()) {
                    return self.fail(id, format!("arithmetic on {} and {}", a.name(), b.name()));
                }
                if a == T::Int && b == T::Int {
                    T::Int
                } else if a == T::Dyn || b == T::Dyn {
                    T::Dyn
                } else {
                    T::Double
                }
            }
            ("-_", None) => {
                if !arg(0).numeric() {
                    self.fail(id, format!("cannot negate {}", arg(0).name()));
                }
                arg(0)
            }
            ("_?_:_", None) => {
                if !arg(0).boolish() {
                    self.fail(
                        id,
                        format!("`? :` needs a bool, but this is {}", arg(0).name()),
                    );
                }
                same(&[arg(1), arg(2)])
            }
            ("_[_]" | "_[?_]", None) => {
                let optional = f == "_[?_]";
                let t = match arg(0) {
                    T::List(e) if arg(1).numeric() => *e,
                    T::List(_) => self.fail(
                        id,
                        format!("a list index must be an int, not {}", arg(1).name()),
                    ),
                    T::Map(v) => *v,
                    T::Group(g) => match call.args.get(1).map(|a| &a.expr) {
                        Some(Expr::Literal(LiteralValue::String(s))) => {
                            self.field(id, &T::Group(g), s.as_ref())
                        }
                        _ => T::Dyn,
                    },
                    T::Dyn => T::Dyn,
                    other => self.fail(id, format!("cannot index {}", other.name())),
                };
                if optional {
                    T::Dyn
                } else {
                    t
                }
            }
            ("@in", None) => {
                match arg(1) {
                    T::List(_) | T::Map(_) | T::Group(_) | T::Dyn => {}
                    T::Str => {
                        self.fail(
                            id,
                            "`in` needs a list or a map; for text use `.contains()`".into(),
                        );
                    }
                    other => {
                        self.fail(
                            id,
                            format!("`in` needs a list or a map, not {}", other.name()),
                        );
                    }
                }
                T::Bool
            }
            ("size", _) => {
                let of = target.clone().unwrap_or_else(|| arg(0));
                if !matches!(of, T::Str | T::List(_) | T::Map(_) | T::Group(_) | T::Dyn) {
                    self.fail(
                        id,
                        format!("`size` needs a string, list or map, not {}", of.name()),
                    );
                }
                T::Int
            }
            ("contains" | "startsWith" | "endsWith" | "matches", Some(t)) => {
                if !matches!(t, T::Str | T::Dyn) {
                    let hint = if matches!(t, T::List(_)) && f == "contains" {
                        "; for a list use `x in list`"
                    } else {
                        ""
                    };
                    self.fail(id, format!("`{f}` is for strings, not {}{hint}", t.name()));
                }
                T::Bool
            }
            ("matches", None) => T::Bool,
            ("hasValue", Some(_)) => T::Bool,
            ("int" | "uint", None) => T::Int,
            ("double", None) => T::Double,
            ("string", None) => T::Str,
            ("bool", None) => T::Bool,
            (_, None) if GLOBAL.contains(&f) => T::Dyn,
            (_, Some(_)) if MEMBER.contains(&f) => T::Dyn,
            _ => {
                let known: Vec<&str> = if target.is_some() { MEMBER } else { GLOBAL }.to_vec();
                let hint = vocabulary::closest(f, known.into_iter())
                    .map(|n| format!("; did you mean `{n}`?"))
                    .unwrap_or_default();
                let how = if target.is_some() {
                    "method"
                } else {
                    "function"
                };
                self.fail(id, format!("unknown {how} `{f}`{hint}"))
            }
        }
    }
}

/// The node where a field path (`a.b.c`) starts: its root identifier.
fn path_start(mut e: &IdedExpr) -> u64 {
    while let Expr::Select(s) = &e.expr {
        e = &s.operand;
    }
    e.id
}

/// The common type of a list's elements (or a conditional's branches).
fn same(types: &[T]) -> T {
    match types.split_first() {
        Some((first, rest)) if rest.iter().all(|t| t == first) => first.clone(),
        None => T::Dyn,
        _ => T::Dyn,
    }
}

mod names;
pub use names::names;

#[cfg(test)]
mod tests;
