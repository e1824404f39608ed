//! The dispatch: parse the arguments ([`super::args`]), load the config,
//! start logging ([`super::log`]), run the command (on tokio's multi-thread
//! runtime, or its current-thread one when the process has one CPU to run
//! on). Exit 0 ok, 1 wrong, 2 usage.

use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use crate::cli::args::{
    AuditCommand, CertsCommand, Cli, Command, EvalCommand, ExplainArgs, FactsCommand,
    PolicyCommand, EXIT_USAGE, EXIT_WRONG,
};
use crate::cli::explain::{self, Query};
use crate::config::Config;
use crate::error::Error;
use crate::policy::PolicySet;

fn load(path: Option<&PathBuf>) -> Result<Config, Error> {
    match path {
        Some(p) => Config::load(p),
        None => Config::embedded(),
    }
}

/// Reports an error on stderr; the exit code says the thing checked is wrong.
fn wrong(e: &Error) -> ExitCode {
    eprintln!("{e}");
    ExitCode::from(EXIT_WRONG)
}

/// Runs `fut` on a fresh runtime (multi-threaded when `multi`).
fn block_on<T>(multi: bool, fut: impl Future<Output = Result<T, Error>>) -> Result<T, Error> {
    // One core to run on (a pinned sidecar): one thread does it all.
    let one = std::thread::available_parallelism().is_ok_and(|n| n.get() == 1);
    let mut b = if multi && !one {
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
        ExitCode::from(EXIT_WRONG)
    }
}

/// Writes a command's result to stdout (the one place the CLI prints to
/// it). A reader that went away (`toolgate … | head`) is not an error.
fn write_out(text: &str) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => ExitCode::FAILURE,
        _ => ExitCode::SUCCESS,
    }
}

/// The `toolgate` command: parses the process's arguments and runs the command.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // --help and --version go to stdout and exit 0; a usage error
            // goes to stderr and exits 2. A closed pipe is ignored.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_USAGE } else { 0 });
        }
    };
    run(cli)
}

/// Loads the command's config, then starts logging: the config's
/// `[log] format` (unless `--log-format` says otherwise) decides how the log
/// is written, so a config error is printed plainly.
fn configured(cli: &Cli, path: Option<&PathBuf>) -> Result<Config, ExitCode> {
    let c = load(path).map_err(|e| wrong(&e))?;
    log(cli, Some(&c));
    Ok(c)
}

fn log(cli: &Cli, config: Option<&Config>) {
    let format = cli
        .log_format
        .or(config.map(|c| c.log_format))
        .unwrap_or_default();
    crate::cli::log::init(format, matches!(cli.command, Command::Demo));
}

fn run(cli: Cli) -> ExitCode {
    let loads = cli.command.config();
    if loads.is_none() {
        log(&cli, None);
    }
    let config = || configured(&cli, loads.and_then(|c| c.config.as_ref()));
    match &cli.command {
        Command::Serve(_) => match config().map(|c| block_on(true, crate::app::run(c))) {
            Ok(Ok(())) => ExitCode::SUCCESS,
            Ok(Err(e)) => wrong(&e),
            Err(code) => code,
        },
        Command::Check(c) => check(c.config.as_deref()),
        Command::Explain(args) => match config().map(|c| explain(&c, args)) {
            Ok(Ok(text)) => write_out(&text),
            Ok(Err(e @ Error::BadRequest(_))) => {
                eprintln!("{e}");
                ExitCode::from(EXIT_USAGE)
            }
            Ok(Err(e)) => wrong(&e),
            Err(code) => code,
        },
        Command::Eval(EvalCommand::Sentinel(_)) => {
            match config().map(|c| block_on(true, crate::cli::eval::sentinel(&c))) {
                Ok(Ok((text, all_right))) => checked(&text, all_right),
                Ok(Err(e)) => wrong(&e),
                Err(code) => code,
            }
        }
        Command::Signals { words: true, .. } => match config() {
            Ok(c) => match crate::policy::PolicySet::load(c.policy.dir.as_deref()) {
                Ok(p) => write_out(&p.words.text()),
                Err(e) => wrong(&e),
            },
            Err(code) => code,
        },
        Command::Signals { markdown, .. } => write_out(&if *markdown {
            crate::policy::vocabulary::markdown()
        } else {
            crate::policy::vocabulary::text()
        }),
        Command::Policy(PolicyCommand::Scaffold { from_request }) => scaffold(from_request),
        Command::Certs(CertsCommand::Dev { out, force }) => {
            match crate::cli::certs::dev(out, *force) {
                Ok(paths) => {
                    let mut text = String::new();
                    for p in paths {
                        text.push_str(&format!("wrote {}\n", p.display()));
                    }
                    text.push_str("use them with:\n  [listen.tls]\n  cert = \"server.pem\"\n  key = \"server-key.pem\"\n  # client_ca = \"ca.pem\"   # to require client certificates\n");
                    write_out(&text)
                }
                Err(e) => wrong(&e),
            }
        }
        Command::Demo => match block_on(true, crate::cli::demo::run()) {
            Ok((text, all_right)) => checked(&text, all_right),
            Err(e) => wrong(&e),
        },
        Command::Mcp(a) => match config().map(|c| block_on(true, mcp(c, a))) {
            Ok(Ok(())) => ExitCode::SUCCESS,
            Ok(Err(e)) => wrong(&e),
            Err(code) => code,
        },
        Command::Mock(a) if a.print_script => write_out(crate::mock::DEFAULT_SCRIPT),
        Command::Mock(a) => match block_on(true, crate::cli::mock::run(a)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => wrong(&e),
        },
        Command::Facts(FactsCommand::Import { dir, out }) => {
            match crate::facts::bridge::import(dir, out) {
                Ok(r) => write_out(&r.render(out)),
                Err(e) => wrong(&e),
            }
        }
        Command::Audit(AuditCommand::Verify {
            files,
            key_env,
            head,
        }) => audit_verify(files, key_env.as_deref(), head.as_deref()),
        Command::Health { addr } => match block_on(false, crate::cli::health::check(addr)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => wrong(&e),
        },
        Command::Approvals(a) => match block_on(false, crate::cli::approvals::run(a)) {
            Ok(text) => write_out(&text),
            Err(e) => wrong(&e),
        },
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "toolgate", &mut script);
            write_out(&String::from_utf8_lossy(&script))
        }
    }
}

/// `toolgate audit verify`: the chain through the files, against a head.
fn audit_verify(files: &[PathBuf], key_env: Option<&str>, head: Option<&str>) -> ExitCode {
    use crate::audit::chain::{verify, Head};
    let key = match key_env {
        None => None,
        Some(name) => match std::env::var(name).ok().filter(|k| !k.trim().is_empty()) {
            Some(k) => Some(k.trim().as_bytes().to_vec()),
            None => {
                eprintln!("{name} is not set: a keyed trail needs its key");
                return ExitCode::from(EXIT_USAGE);
            }
        },
    };
    let head = match head.map(|h| Head::parse(h).ok_or(h)) {
        None => None,
        Some(Ok(h)) => Some(h),
        Some(Err(h)) => {
            eprintln!("--head `{h}` is not SEQ:HASH (64 hex digits)");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let v = match verify(files, key.as_deref(), head.as_ref()) {
        Ok(v) => v,
        Err(e) => return wrong(&e),
    };
    if let Some(at) = &v.broken {
        eprintln!("broken: {at} ({} records before it hold)", v.records);
        return ExitCode::from(EXIT_WRONG);
    }
    let mut text = format!("ok: {} records, the chain holds", v.records);
    if let Some(h) = &v.starts_after {
        text.push_str(&format!(
            " (going on from {h}: older records were rotated away)"
        ));
    }
    if let Some(h) = &head {
        text.push_str(&format!("; record {} is the head's", h.seq));
    }
    match (&v.sealed, &v.last) {
        (Some(reason), _) => text.push_str(&format!("; sealed ({reason}): nothing was cut from its end")),
        (None, Some(last)) => text.push_str(&format!(
            "; not sealed: its end is checked only against a head published after it (this trail's is {last})"
        )),
        (None, None) => {}
    }
    text.push('\n');
    write_out(&text)
}

fn explain(config: &Config, a: &ExplainArgs) -> Result<String, Error> {
    if !a.trail.is_empty() {
        let q = explain::recorded::Lookup {
            files: a.trail.clone(),
            request_id: a.request_id.clone().unwrap_or_default(),
            call_id: a.call_id.clone(),
        };
        let v = explain::recorded::explain(&q)?;
        return Ok(if a.json {
            format!("{v}\n")
        } else {
            explain::recorded::render(&v)
        });
    }
    let q = Query {
        tool: a.tool.clone().unwrap_or_default(),
        args: a.args.clone(),
        phase: a.phase.clone(),
        request: a.request.clone(),
        mission: a.mission.clone(),
        principal: a.principal.clone(),
        protocol: a.protocol,
        conversation: a.conversation.clone(),
    };
    let v = block_on(false, explain::explain(config, &q))?;
    Ok(if a.json {
        format!("{v}\n")
    } else {
        explain::render(&v)
    })
}

fn scaffold(file: &Path) -> ExitCode {
    let req = std::fs::read(file)
        .map_err(|e| format!("{}: {e}", file.display()))
        .and_then(|b| {
            serde_json::from_slice::<serde_json::Value>(&b)
                .map_err(|e| format!("{}: not JSON: {e}", file.display()))
        });
    match req {
        Ok(v) => {
            let names = crate::cli::scaffold::tool_names(&v);
            if names.is_empty() {
                eprintln!(
                    "toolgate: warning: {} declares no tools (no `tools` with names): the catalog is empty",
                    file.display()
                );
            }
            write_out(&crate::cli::scaffold::scaffold(
                &v,
                &file.display().to_string(),
            ))
        }
        Err(m) => {
            eprintln!("toolgate: {m}");
            ExitCode::from(EXIT_WRONG)
        }
    }
}

/// `check`: the config, its TLS files and its policies. What only the place
/// toolgate runs provides (an environment variable, a directory or file
/// mounted into the container) is listed as needed at run time, not failed.
fn check(path: Option<&Path>) -> ExitCode {
    let config = match path {
        Some(p) => Config::load_for_check(p),
        None => Config::embedded(),
    };
    let mut config = match config {
        Ok(c) => c,
        Err(e) => return wrong(&e),
    };
    let mut needs = std::mem::take(&mut config.deferred);
    if let Some(t) = &config.listen.tls {
        let missing: Vec<&PathBuf> = [Some(&t.cert), Some(&t.key), t.client_ca.as_ref()]
            .into_iter()
            .flatten()
            .filter(|p| !p.exists())
            .collect();
        if missing.is_empty() {
            if let Err(e) = crate::net::tls::server_config(t) {
                return wrong(&e);
            }
        }
        needs.extend(
            missing
                .iter()
                .map(|p| format!("file {} (listen.tls)", p.display())),
        );
    }
    let dir = config.policy.dir.as_deref();
    let policies = match dir {
        Some(d) if !d.exists() => {
            needs.push(format!(
                "policy directory {} (not checked: it is not here)",
                d.display()
            ));
            None
        }
        _ => match PolicySet::load(dir) {
            Ok(p) => Some(p),
            Err(e) => return wrong(&e),
        },
    };
    let summary = match policies {
        Some(p) => format!(
            "{} rules, default verdict {}, policy {}",
            p.rules.len(),
            p.default_verdict.as_str(),
            p.version
        ),
        None => "policies not checked".into(),
    };
    // The report is the command's result: stdout. What is wrong goes to
    // stderr (and exits 1) above.
    let mut report = format!("ok: {} ({summary})\n", config.source);
    if !needs.is_empty() {
        report.push_str("needed at run time:\n");
        for n in &needs {
            report.push_str(&format!("  - {n}\n"));
        }
    }
    write_out(&report)
}

/// `toolgate mcp`: the stdio server behind the gates until either side
/// ends, the audit trail flushed after; `toolgate mcp pin`: a pin file.
async fn mcp(config: Config, a: &crate::cli::args::McpArgs) -> Result<(), Error> {
    use crate::cli::args::McpCommand;
    use crate::proxy::mcp::{list, pins::PinFile, servers::Servers};
    if let Some(McpCommand::Pin {
        name, out, command, ..
    }) = &a.pin
    {
        let entry = config.mcp.iter().find(|m| &m.name == name);
        let tools = if command.is_empty() {
            // The pins are being written: the old ones are not read.
            let mut unpinned = config.clone();
            unpinned.mcp.iter_mut().for_each(|m| m.pins = None);
            let servers = Servers::new(&unpinned)?;
            let server = servers.get(name).ok_or_else(|| {
                Error::BadRequest(format!("no [[mcp]] entry named '{name}' with a url"))
            })?;
            list::over_http(server).await?
        } else {
            let timeout = entry.map_or(std::time::Duration::from_secs(60), |m| m.timeout);
            list::over_stdio(command, timeout).await?
        };
        let text = PinFile::of(name, &tools).to_json();
        return match out.as_ref().or(entry.and_then(|m| m.pins.as_ref())) {
            Some(path) => std::fs::write(path, text)
                .map_err(|e| Error::io(format!("writing {}", path.display()), e)),
            None => {
                let mut o = std::io::stdout().lock();
                (o.write_all(text.as_bytes()).and_then(|_| o.flush()))
                    .map_err(|e| Error::io("writing the pin file to stdout", e))
            }
        };
    }
    let name = a.name.as_deref().unwrap_or_default();
    let state = std::sync::Arc::new(crate::app::build(config).await?);
    let r = crate::proxy::mcp::stdio::run(state.clone(), name, &a.command).await;
    state.audit.flush().await?;
    r
}
