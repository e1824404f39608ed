//! CEL conditions: one shared environment, programs compiled once at load.
//!
//! JSON numbers become CEL `int` when they are integers that fit (never
//! `uint`, so `args.n > 3` works), else `double`. A missing key is an error in
//! CEL; an error at run time counts as a match of its rule (fail closed).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use cel::{Context, Env, Program};

static ENV: LazyLock<Arc<Env>> =
    LazyLock::new(|| Arc::new(Env::stdlib().with_optional_support(true)));

/// A compiled `when` condition.
#[derive(Debug, Clone)]
pub struct Condition {
    pub source: String,
    program: Arc<Program>,
    /// Top-level variables it reads (`tool`, `args`, `phase`, …).
    pub variables: Vec<String>,
    /// The signal paths it reads, two segments deep (`provenance.entities`).
    pub names: Vec<String>,
}

impl Condition {
    /// Whether it reads the signal `name`, or all of its top-level variable
    /// (`provenance` for `provenance.x`).
    pub fn reads(&self, name: &str) -> bool {
        let top = name.split('.').next().unwrap_or(name);
        self.names.iter().any(|v| v == name || v == top)
    }

    pub fn compile(source: &str) -> Result<Condition, String> {
        let program = ENV
            .compile(source)
            .map_err(|e| e.to_string().trim().to_string())?;
        let variables = program
            .references()
            .variables()
            .iter()
            .map(|v| v.to_string())
            .collect();
        let names = super::check::names(program.expression());
        Ok(Condition {
            names,
            source: source.to_string(),
            program: Arc::new(program),
            variables,
        })
    }

    /// Problems the checker finds against the signal schema, each with the
    /// character offset in `source` where it starts.
    pub fn problems(&self) -> Vec<(usize, String)> {
        super::check::check(self.program.expression())
            .into_iter()
            .map(|p| {
                let at =
                    p.id.and_then(|id| self.program.source_info().offset_for(id));
                // The parser's offsets are in bytes; callers count characters.
                let byte = at.map_or(0, |(start, _)| start as usize);
                let chars = self.source.get(..byte).map_or(0, |s| s.chars().count());
                (chars, p.message)
            })
            .collect()
    }

    /// Evaluates against `b`; anything but a boolean is an error.
    pub fn eval(&self, b: &Bindings) -> Result<bool, String> {
        match self.program.execute(&b.ctx) {
            Ok(cel::Value::Bool(b)) => Ok(b),
            Ok(other) => Err(format!("condition returned {other:?}, not a bool")),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// Variables bound once and shared by every condition of an evaluation pass
/// (binding converts values deeply, so it is done once, not per rule).
pub struct Bindings {
    ctx: Context<'static, 'static>,
}

impl Bindings {
    pub fn new(vars: HashMap<String, cel::Value>) -> Bindings {
        let mut ctx = Context::with_env(ENV.clone());
        for (k, v) in vars {
            ctx.add_variable_from_value(k, v);
        }
        Bindings { ctx }
    }
}

/// JSON → CEL, with integers as `int`.
pub fn to_cel(v: &serde_json::Value) -> cel::Value {
    use serde_json::Value as J;
    match v {
        J::Null => cel::Value::Null,
        J::Bool(b) => cel::Value::Bool(*b),
        J::Number(n) => match n.as_i64() {
            Some(i) => cel::Value::Int(i),
            None => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        J::String(s) => cel::Value::String(Arc::new(s.clone())),
        J::Array(a) => cel::Value::List(Arc::new(a.iter().map(to_cel).collect())),
        J::Object(o) => {
            let m: HashMap<String, cel::Value> =
                o.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
            cel::Value::from(m)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars(v: serde_json::Value) -> Bindings {
        Bindings::new(
            v.as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), to_cel(v)))
                .collect(),
        )
    }

    #[test]
    fn operators_used_by_the_shipped_policies() {
        let v = vars(json!({
            "tool": {"name": "comm.email", "namespace": "comm", "class": "irreversible", "declared": true},
            "phase": "planning",
            "args": {"amount": 120, "to": "a@b.c", "tags": ["x", "y"]},
            "detect": {"domains": ["evil.example"], "traversal": false},
            "rate": {"exceeded": false}
        }));
        for (src, want) in [
            ("tool.namespace == 'comm' && phase != 'execution'", true),
            ("tool.class in ['irreversible', 'costs_money']", true),
            ("!tool.declared", false),
            ("args.amount > 100.0", true),
            ("args.amount >= 120 && args.amount < 121", true),
            ("has(args.to) && args.to.endsWith('.c')", true),
            ("has(args.missing)", false),
            ("args.?missing.orValue('none') == 'none'", true),
            (
                "tool.name.startsWith('comm.') || tool.name.matches('^comm_')",
                true,
            ),
            ("size(args.tags) == 2 && 'x' in args.tags", true),
            ("detect.domains.exists(d, d.endsWith('.example'))", true),
            ("detect.traversal || rate.exceeded", false),
            ("tool.name.contains('mail')", true),
        ] {
            let c = Condition::compile(src).unwrap();
            assert_eq!(c.eval(&v), Ok(want), "{src}");
        }
    }

    #[test]
    fn a_missing_key_is_an_error_and_non_bools_are_errors() {
        let v = vars(json!({"args": {}}));
        assert!(Condition::compile("args.nope == 1")
            .unwrap()
            .eval(&v)
            .is_err());
        assert!(Condition::compile("1 + 1").unwrap().eval(&v).is_err());
        assert!(
            Condition::compile("phase == 'x'")
                .unwrap()
                .eval(&v)
                .is_err(),
            "unbound variable"
        );
    }

    #[test]
    fn syntax_errors_are_reported_and_variables_listed() {
        assert!(Condition::compile("tool.name ==").is_err());
        let c = Condition::compile("tool.name == 'x' && phase == 'y'").unwrap();
        let mut vs = c.variables.clone();
        vs.sort();
        assert_eq!(vs, ["phase", "tool"]);
    }
}
