//! The `toolgate` command line: parse arguments, load config, run.

use std::collections::HashMap;
use std::future::Future;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use toolgate::cli::explain::{self, Question};
use toolgate::config::Config;
use toolgate::error::Error;
use toolgate::policy::PolicySet;

/// mimalloc: the proxy allocates many short-lived buffers per request; glibc's
/// malloc spent ~15 % of a loaded stream path's CPU (perf, `bench/load.sh`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exit code for bad configuration (EX_USAGE).
const EXIT_CONFIG: u8 = 64;

const USAGE: &str = "\
toolgate: a tool-call firewall for AI agents

usage:
  toolgate serve [--config FILE]   run the proxy (no FILE: the embedded default config)
  toolgate check [--config FILE]   validate config, policies, CEL and schemas; print file:line: message
  toolgate explain [--config FILE] --tool NAME [--args JSON] [--phase P] [--request TEXT]
                   [--mission TEXT] [--principal NAME] [--protocol chat_completions|responses|messages]
                   [--json]
                                   the decision for one call, its signals and deciding rule
  toolgate policy scaffold --from-request FILE
                                   a starter tool catalog from a request's tools
  toolgate eval sentinel [--config FILE]
                                   the ten sentinel scenarios against the configured [judge]
  toolgate certs dev --out DIR [--force]
                                   a development CA, a server certificate for localhost and
                                   127.0.0.1, and a client certificate for mutual TLS
  toolgate demo                    toolgate between a scripted agent and a scripted model
                                   (loopback only, no API key): four decisions, explained
  toolgate facts import DIR --out FILE
                                   TraceFinding JSON files in DIR → facts merged into FILE
  toolgate health [--addr HOST:PORT]
                                   exit 0 if the admin port (default 127.0.0.1:9090) is ready
  toolgate --version
";

enum Command {
    Serve(Option<PathBuf>),
    Check(Option<PathBuf>),
    Explain(Option<PathBuf>, Question, bool),
    Scaffold(PathBuf),
    EvalSentinel(Option<PathBuf>),
    CertsDev(PathBuf, bool),
    Demo,
    Health(String),
    FactsImport(PathBuf, PathBuf),
}

/// `--flag value` pairs and bare `--json`.
fn flags(rest: &[String], known: &[&str]) -> Result<(HashMap<String, String>, bool), String> {
    let mut map = HashMap::new();
    let mut json = false;
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        let name = match a.as_str() {
            "-c" => "--config",
            "--json" if known.contains(&"--json") => {
                json = true;
                continue;
            }
            n if known.contains(&n) => n,
            other => return Err(format!("unknown argument `{other}`")),
        };
        let v = it.next().ok_or(format!("{name} needs a value"))?;
        map.insert(name.to_string(), v.clone());
    }
    Ok((map, json))
}

fn parse(args: &[String]) -> Result<Command, String> {
    let (cmd, rest) = args.split_first().ok_or("no command given")?;
    let path = |m: &HashMap<String, String>| m.get("--config").map(PathBuf::from);
    match cmd.as_str() {
        "serve" | "check" => {
            let (m, _) = flags(rest, &["--config"])?;
            Ok(if cmd == "serve" {
                Command::Serve(path(&m))
            } else {
                Command::Check(path(&m))
            })
        }
        "explain" => {
            let known = [
                "--config",
                "--tool",
                "--args",
                "--phase",
                "--request",
                "--mission",
                "--principal",
                "--protocol",
                "--json",
            ];
            let (mut m, json) = flags(rest, &known)?;
            let protocol = match m.remove("--protocol").as_deref() {
                None | Some("chat_completions") => "chat_completions",
                Some("responses") => "responses",
                Some("messages") => "messages",
                Some(_) => {
                    return Err("--protocol is chat_completions, responses or messages".into())
                }
            };
            let q = Question {
                tool: m.remove("--tool").ok_or("explain needs --tool")?,
                args: m.remove("--args").unwrap_or_else(|| "{}".into()),
                phase: m.remove("--phase"),
                request: m.remove("--request"),
                mission: m.remove("--mission"),
                principal: m.remove("--principal"),
                protocol,
            };
            Ok(Command::Explain(path(&m), q, json))
        }
        "policy" => match rest.split_first() {
            Some((sub, rest)) if sub == "scaffold" => {
                let (m, _) = flags(rest, &["--from-request"])?;
                Ok(Command::Scaffold(PathBuf::from(
                    m.get("--from-request")
                        .ok_or("scaffold needs --from-request FILE")?,
                )))
            }
            _ => Err("policy needs a subcommand: scaffold".into()),
        },
        "eval" => match rest.split_first() {
            Some((sub, rest)) if sub == "sentinel" => {
                let (m, _) = flags(rest, &["--config"])?;
                Ok(Command::EvalSentinel(path(&m)))
            }
            _ => Err("eval needs a subcommand: sentinel".into()),
        },
        "demo" if rest.is_empty() => Ok(Command::Demo),
        "facts" => match rest.split_first() {
            Some((sub, rest)) if sub == "import" => {
                let (dir, rest) = rest.split_first().ok_or("facts import needs DIR")?;
                let (m, _) = flags(rest, &["--out"])?;
                let out = m.get("--out").ok_or("facts import needs --out FILE")?;
                Ok(Command::FactsImport(PathBuf::from(dir), PathBuf::from(out)))
            }
            _ => Err("facts needs a subcommand: import".into()),
        },
        "health" => {
            let (m, _) = flags(rest, &["--addr"])?;
            Ok(Command::Health(
                m.get("--addr")
                    .cloned()
                    .unwrap_or_else(|| "127.0.0.1:9090".into()),
            ))
        }
        "certs" => match rest.split_first() {
            Some((sub, rest)) if sub == "dev" => {
                let force = rest.iter().any(|a| a == "--force");
                let rest: Vec<String> = rest.iter().filter(|a| *a != "--force").cloned().collect();
                let (m, _) = flags(&rest, &["--out"])?;
                let out = m.get("--out").ok_or("certs dev needs --out DIR")?;
                Ok(Command::CertsDev(PathBuf::from(out), force))
            }
            _ => Err("certs needs a subcommand: dev".into()),
        },
        other => Err(format!("unknown command `{other}`")),
    }
}

fn load(path: Option<&PathBuf>) -> Result<Config, Error> {
    match path {
        Some(p) => Config::load(p),
        None => Config::embedded(),
    }
}

/// Loads the config, or reports why not and gives the exit code for it.
fn load_or_report(path: Option<&PathBuf>) -> Result<Config, ExitCode> {
    load(path).map_err(|e| {
        report(&e);
        ExitCode::from(EXIT_CONFIG)
    })
}

fn report(e: &Error) {
    eprintln!("{e}");
}

/// Runs `fut` on a fresh runtime (multi-threaded when `multi`).
fn block_on<T>(multi: bool, fut: impl Future<Output = Result<T, Error>>) -> Result<T, Error> {
    let mut b = if multi {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    b.enable_all()
        .build()
        .map_err(|e| Error::io("cannot start the runtime", e))
        .and_then(|rt| rt.block_on(fut))
}

/// A checking command's report on stdout; exit 1 unless every check held.
fn checked(text: &str, all_right: bool) -> ExitCode {
    let code = write_out(text);
    if all_right {
        code
    } else {
        ExitCode::from(1)
    }
}

/// Writes a command's result to stdout (the one place the CLI prints to it).
fn write_out(text: &str) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--help" | "-h" | "help") => {
            eprint!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Some("--version" | "-V") => {
            eprintln!("toolgate {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        _ => {}
    }
    let cmd = match parse(&args) {
        Ok(c) => c,
        Err(m) => {
            eprintln!("toolgate: {m}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    // Colours only for a person at a terminal, and never with NO_COLOR set
    // (https://no-color.org): log files and collectors get plain text.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TOOLGATE_LOG").unwrap_or_else(|_| {
                // The demo's output is its story; only problems go to the log.
                tracing_subscriber::EnvFilter::new(if matches!(cmd, Command::Demo) {
                    "error"
                } else {
                    "info"
                })
            }),
        )
        .init();
    match cmd {
        Command::FactsImport(dir, out) => match toolgate::facts::bridge::import(&dir, &out) {
            Ok(r) => write_out(&r.render(&out)),
            Err(e) => {
                report(&e);
                ExitCode::from(1)
            }
        },
        Command::Health(addr) => match block_on(false, toolgate::cli::health::check(&addr)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                report(&e);
                ExitCode::FAILURE
            }
        },
        Command::Demo => match block_on(true, toolgate::cli::demo::run()) {
            Ok((text, all_right)) => checked(&text, all_right),
            Err(e) => {
                report(&e);
                ExitCode::FAILURE
            }
        },
        Command::CertsDev(out, force) => match toolgate::cli::certs::dev(&out, force) {
            Ok(paths) => {
                let mut text = String::new();
                for p in paths {
                    text.push_str(&format!("wrote {}\n", p.display()));
                }
                text.push_str("use them with:\n  [listen.tls]\n  cert = \"server.pem\"\n  key = \"server-key.pem\"\n  # client_ca = \"ca.pem\"   # to require client certificates\n");
                write_out(&text)
            }
            Err(e) => {
                report(&e);
                ExitCode::from(1)
            }
        },
        Command::Explain(path, q, json) => {
            let config = match load_or_report(path.as_ref()) {
                Ok(c) => c,
                Err(code) => return code,
            };
            match block_on(false, explain::explain(&config, &q)) {
                Ok(v) => {
                    let text = if json {
                        format!("{v}\n")
                    } else {
                        explain::render(&v)
                    };
                    write_out(&text)
                }
                Err(e) => {
                    report(&e);
                    ExitCode::from(if matches!(e, Error::Config(_)) {
                        EXIT_CONFIG
                    } else {
                        2
                    })
                }
            }
        }
        Command::EvalSentinel(path) => {
            let config = match load_or_report(path.as_ref()) {
                Ok(c) => c,
                Err(code) => return code,
            };
            match block_on(true, toolgate::cli::eval::sentinel(&config)) {
                Ok((text, all_right)) => checked(&text, all_right),
                Err(e) => {
                    report(&e);
                    ExitCode::from(EXIT_CONFIG)
                }
            }
        }
        Command::Scaffold(file) => {
            let req = std::fs::read(&file)
                .map_err(|e| format!("{}: {e}", file.display()))
                .and_then(|b| {
                    serde_json::from_slice::<serde_json::Value>(&b)
                        .map_err(|e| format!("{}: not JSON: {e}", file.display()))
                });
            match req {
                Ok(v) => write_out(&toolgate::cli::scaffold::scaffold(
                    &v,
                    &file.display().to_string(),
                )),
                Err(m) => {
                    eprintln!("toolgate: {m}");
                    ExitCode::from(2)
                }
            }
        }
        Command::Check(path) => {
            let checked = load(path.as_ref()).and_then(|c| {
                if let Some(t) = &c.listen.tls {
                    toolgate::tls::server_config(t)?;
                }
                PolicySet::load(c.policy.dir.as_deref()).map(|p| (c, p))
            });
            match checked {
                Ok((c, p)) => {
                    eprintln!(
                        "ok: {} ({} rules, default verdict {}, policy {})",
                        c.source,
                        p.rules.len(),
                        p.default_verdict.as_str(),
                        p.version
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    report(&e);
                    ExitCode::from(1)
                }
            }
        }
        Command::Serve(path) => {
            let config = match load_or_report(path.as_ref()) {
                Ok(c) => c,
                Err(code) => return code,
            };
            match block_on(true, toolgate::run(config)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e @ Error::Config(_)) => {
                    report(&e);
                    ExitCode::from(EXIT_CONFIG)
                }
                Err(e) => {
                    report(&e);
                    ExitCode::FAILURE
                }
            }
        }
    }
}
