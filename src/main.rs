//! The `toolgate` command line: parse arguments, load config, run.

use std::path::PathBuf;
use std::process::ExitCode;

use toolgate::config::Config;
use toolgate::error::Error;
use toolgate::policy::PolicySet;

/// Exit code for bad configuration (EX_USAGE).
const EXIT_CONFIG: u8 = 64;

const USAGE: &str = "\
toolgate: a tool-call firewall for AI agents

usage:
  toolgate serve [--config FILE]   run the proxy (no FILE: the embedded default config)
  toolgate check [--config FILE]   validate config and policies; print file:line: message
  toolgate --version
";

enum Command {
    Serve(Option<PathBuf>),
    Check(Option<PathBuf>),
}

fn parse(args: &[String]) -> Result<Command, String> {
    let (cmd, rest) = args.split_first().ok_or("no command given")?;
    let mut config = None;
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--config" | "-c" => {
                config = Some(PathBuf::from(it.next().ok_or("--config needs a file")?));
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    match cmd.as_str() {
        "serve" => Ok(Command::Serve(config)),
        "check" => Ok(Command::Check(config)),
        other => Err(format!("unknown command `{other}`")),
    }
}

fn load(path: Option<&PathBuf>) -> Result<Config, Error> {
    match path {
        Some(p) => Config::load(p),
        None => Config::embedded(),
    }
}

fn report(e: &Error) {
    eprintln!("{e}");
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
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TOOLGATE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    match cmd {
        Command::Check(path) => {
            let checked = load(path.as_ref())
                .and_then(|c| PolicySet::load(c.policy.dir.as_deref()).map(|p| (c, p)));
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
            let config = match load(path.as_ref()) {
                Ok(c) => c,
                Err(e) => {
                    report(&e);
                    return ExitCode::from(EXIT_CONFIG);
                }
            };
            let rt = match tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("toolgate: cannot start the runtime: {e}");
                    return ExitCode::FAILURE;
                }
            };
            match rt.block_on(toolgate::run(config)) {
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
