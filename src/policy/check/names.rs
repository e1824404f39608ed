//! The signal names a CEL condition reads, for choosing which signal groups
//! a decision computes.

use cel::common::ast::{Expr, IdedExpr, LiteralValue};

/// The signal names a condition reads, as far as they are spelled out:
/// `provenance.entities` for `size(provenance.entities) > 0`, `provenance`
/// for `size(provenance)` (every signal under it).
pub fn names(expr: &IdedExpr) -> Vec<String> {
    fn walk(e: &IdedExpr, out: &mut Vec<String>) {
        let mut segments: Vec<&str> = Vec::new();
        let mut at = e;
        loop {
            match &at.expr {
                Expr::Select(s) => {
                    segments.push(&s.field);
                    at = &s.operand;
                }
                Expr::Ident(root) if !segments.is_empty() => {
                    segments.push(root);
                    segments.reverse();
                    out.push(
                        segments
                            .iter()
                            .take(2)
                            .copied()
                            .collect::<Vec<_>>()
                            .join("."),
                    );
                    return;
                }
                _ => break,
            }
        }
        match &e.expr {
            Expr::Ident(name) => out.push(name.clone()),
            Expr::Select(s) => walk(&s.operand, out),
            Expr::Call(c) => {
                if let (Some(Expr::Ident(root)), Some(Expr::Literal(LiteralValue::String(f)))) = (
                    c.args.first().map(|a| &a.expr),
                    c.args.get(1).map(|a| &a.expr),
                ) {
                    if c.func_name == "_?._" {
                        let f: &str = f.as_ref();
                        out.push(format!("{root}.{f}"));
                        return;
                    }
                }
                c.target.iter().for_each(|t| walk(t, out));
                c.args.iter().for_each(|a| walk(a, out));
            }
            Expr::List(l) => l.elements.iter().for_each(|x| walk(x, out)),
            Expr::Map(m) => {
                for entry in &m.entries {
                    if let cel::common::ast::EntryExpr::MapEntry(me) = &entry.expr {
                        walk(&me.key, out);
                        walk(&me.value, out);
                    }
                }
            }
            Expr::Comprehension(c) => {
                for x in [
                    &c.iter_range,
                    &c.accu_init,
                    &c.loop_cond,
                    &c.loop_step,
                    &c.result,
                ] {
                    walk(x, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(expr, &mut out);
    out.sort();
    out.dedup();
    out
}
