//! Unit tests of the CEL checker.

use super::*;

fn problems(src: &str) -> Vec<String> {
    let program = cel::Env::stdlib()
        .with_optional_support(true)
        .compile(src)
        .unwrap();
    check(program.expression())
        .into_iter()
        .map(|p| p.message)
        .collect()
}

#[test]
fn sound_conditions_pass() {
    for src in [
        "!tool.declared",
        "tool.namespace == 'comm' && phase != 'execution'",
        "tool.class in ['irreversible', 'costs_money']",
        "size(command.dangerous) > 0",
        "size(provenance.args_from_tool_results) > 0",
        "has(args.to) && args.to.endsWith('.c')",
        "args.?missing.orValue('none') == 'none'",
        "args.amount > 100.0 || args.n + 1 == 3",
        "detect.urls.exists(u, !u.matches('(?i)^https://'))",
        "detect.money.all(m, m < 100.0)",
        "detect.emails.map(e, e.size()).exists(n, n > 3)",
        "detect.paths.filter(p, p.startsWith('/etc')).size() > 0",
        "output.contradictions.exists(c, c.subject == 'x')",
        "sentinel.decision == 'reject' && sentinel.confidence > 0.9",
        "'x' in args.tags",
        "detect['urls'].size() > 0",
        "args.list[0] == 1",
        "int(args.n) > 2 ? true : false",
    ] {
        assert_eq!(problems(src), Vec::<String>::new(), "{src}");
    }
}

#[test]
fn unknown_names_fields_and_functions_are_named_with_a_suggestion() {
    for (src, want) in [
        (
            "size(args_from_tool_results) > 0",
            "unknown name `args_from_tool_results`; did you mean `provenance.args_from_tool_results`?",
        ),
        ("tool.nmae == 'x'", "unknown signal `tool.nmae`; did you mean `tool.name`?"),
        ("phse == 'x'", "unknown name `phse`; did you mean `phase`?"),
        ("detect.url.size() > 0", "did you mean `detect.urls`?"),
        ("tool.name.lowerAscii() == 'x'", "unknown method `lowerAscii`"),
        ("sizee(args) > 1", "unknown function `sizee`; did you mean `size`?"),
        ("mission == 'x'", "unknown name `mission`"),
    ] {
        let got = problems(src).join(" | ");
        assert!(got.contains(want), "{src}: {got}");
    }
}

#[test]
fn conditions_that_cannot_mean_what_they_say_are_refused() {
    for (src, want) in [
        (
            "tool.name",
            "the condition must be a bool, but it is string",
        ),
        ("size(detect.urls)", "must be a bool, but it is int"),
        (
            "rate.exceeded == 'true'",
            "compares bool with string: never equal",
        ),
        ("tool.declared == 1", "never equal"),
        (
            "detect.urls && true",
            "`&&` needs bools, but this is list(string)",
        ),
        ("detect.urls.contains('x')", "for a list use `x in list`"),
        ("'a' in tool.name", "for text use `.contains()`"),
        ("tool.name > 3", "cannot order string and int"),
        ("tool.name.x == 1", "string has no fields"),
        ("phase.exists(p, p == 'x')", "cannot iterate over string"),
        (
            "detect.urls.exists(u, u)",
            "needs bools, but this is string",
        ),
    ] {
        let got = problems(src).join(" | ");
        assert!(got.contains(want), "{src}: {got}");
    }
}

#[test]
fn every_listed_function_exists_in_the_cel_library() {
    let env = std::sync::Arc::new(cel::Env::stdlib().with_optional_support(true));
    let ctx = cel::Context::with_env(env.clone());
    let sources = [
        "size('ab') == 2",
        "int('3') == 3",
        "uint(3) == 3u",
        "double(1) == 1.0",
        "string(1) == '1'",
        "bool('true')",
        "size(bytes('a')) == 1",
        "dyn(1) == 1",
        "type(1) == int",
        "matches('abc', 'b')",
        "'ab'.size() == 2",
        "'ab'.contains('a') && 'ab'.startsWith('a') && 'ab'.endsWith('b') && 'ab'.matches('a')",
        "optional.of(1).hasValue() && optional.of(1).value() == 1",
        "optional.none().orValue(2) == 2",
        "optional.none().or(optional.of(1)).value() == 1",
        "optional.ofNonZeroValue(0).hasValue() == false",
        "optional.of(1).optMap(x, x + 1).value() == 2",
        "optional.of(1).optFlatMap(x, optional.of(x)).value() == 1",
    ];
    for src in sources {
        let program = env.compile(src).unwrap();
        assert_eq!(program.execute(&ctx), Ok(cel::Value::Bool(true)), "{src}");
        assert_eq!(check(program.expression()), Vec::new(), "{src}");
    }
    // Every name the checker accepts is exercised above.
    for f in GLOBAL.iter().chain(MEMBER).chain(OPTIONAL) {
        assert!(sources.iter().any(|s| s.contains(&format!("{f}("))), "{f}");
    }
}

#[test]
fn names_are_the_signal_paths_read() {
    let program = cel::Env::stdlib()
        .with_optional_support(true)
        .compile("size(provenance.entities) > 0 && tool.name.startsWith('x') && args.?a.orValue(1) == 1 && detect.urls.exists(u, u == phase)")
        .unwrap();
    assert_eq!(
        names(program.expression()),
        [
            "@result",
            "args.a",
            "detect.urls",
            "phase",
            "provenance.entities",
            "tool.name",
            "u"
        ]
    );
}
