//! The command line's grammar (clap derive): every command, its flags and
//! its help text. Exit codes are one map for every command: 0 ok, 1 the
//! thing checked is wrong (config, policy, a failed check), 2 usage.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::protocol::Protocol;

pub use crate::config::LogFormat;

/// Exit code when the thing checked is wrong (bad config or policy, a
/// failed check, nothing answering).
pub const EXIT_WRONG: u8 = 1;
/// Exit code for a command line that does not parse.
pub const EXIT_USAGE: u8 = 2;

/// toolgate: a tool-call firewall for AI agents.
///
/// Point an agent's `base_url` at toolgate; every tool call the model makes
/// passes its gates before the agent sees it. Exit codes: 0 ok, 1 the thing
/// checked is wrong (config, policy, a failed check), 2 usage.
#[derive(Debug, Parser)]
#[command(
    name = "toolgate",
    version,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    /// Log format on stderr (default: the config's `[log] format`, else text).
    #[arg(long, global = true, value_enum, value_name = "FORMAT")]
    pub log_format: Option<LogFormat>,
    #[command(subcommand)]
    pub command: Command,
}

/// A config file (none: the embedded default config).
#[derive(Debug, Clone, Args)]
pub struct ConfigArg {
    /// The config file (TOML); without it the embedded default config.
    #[arg(short, long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the proxy.
    Serve(ConfigArg),
    /// Validate the config, its policies, CEL conditions (type-checked
    /// against the signals) and schemas; errors are printed as
    /// `file:line[:col]: message`.
    Check(ConfigArg),
    /// The decision for one tool call: its verdict, deciding rule and
    /// every signal.
    Explain(ExplainArgs),
    /// The signals a policy's `when` may read: name, type, how it is set,
    /// meaning. With `--words`, the word lists, action families and
    /// detector patterns the signals read, each with its origin (the
    /// embedded ones and the policy directory's `words/*.toml`).
    Signals {
        /// As a Markdown table (the README's).
        #[arg(long)]
        markdown: bool,
        /// The words the signals read, instead of the signals.
        #[arg(long, conflicts_with = "markdown")]
        words: bool,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Policy helpers.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Evaluations.
    #[command(subcommand)]
    Eval(EvalCommand),
    /// Certificates.
    #[command(subcommand)]
    Certs(CertsCommand),
    /// toolgate between a scripted agent and a scripted model (loopback
    /// only, no API key): four decisions, explained.
    Demo,
    /// A scripted provider to put behind toolgate: answers Chat
    /// Completions, Responses and Messages requests (streamed or not) by
    /// the rules of a script, with no model and no key.
    Mock(MockArgs),
    /// A stdio MCP server behind the gates: `toolgate mcp --name crm --
    /// COMMAND ARGS…` (the agent runs this in the server's place).
    Mcp(McpArgs),
    /// Provenance facts.
    #[command(subcommand)]
    Facts(FactsCommand),
    /// The audit trail.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Exit 0 if a running toolgate's admin port answers /readyz.
    Health {
        /// The admin port.
        #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:9090")]
        addr: String,
    },
    /// Calls waiting for approval on a running toolgate (its admin port).
    Approvals(ApprovalsArgs),
    /// A shell completion script on stdout.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct McpArgs {
    #[command(subcommand)]
    pub pin: Option<McpCommand>,
    #[command(flatten)]
    pub config: ConfigArg,
    /// The server's name: the namespace its tools are gated under.
    #[arg(long, required = true)]
    pub name: Option<String>,
    /// The server's command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Writes a pin file of a server's tools as it lists them now: the
    /// `[[mcp]]` entry's URL, or the stdio command after `--`.
    Pin {
        #[command(flatten)]
        config: ConfigArg,
        /// The server's name (its `[[mcp]]` entry).
        #[arg(long)]
        name: String,
        /// Where to write it (else the entry's `pins`, else stdout).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// A stdio server's command and its arguments, after `--`.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
}

#[derive(Debug, Args)]
pub struct MockArgs {
    /// Where to listen (port 0: any free port; the address is printed).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:9901")]
    pub listen: String,
    /// The script (TOML rules; without it the built-in one: `email` gets a
    /// `comm.email` call, anything else `get_weather`).
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// Milliseconds between streamed events (overrides the script's
    /// `event_delay_ms`): a model that thinks between events.
    #[arg(long, value_name = "MS")]
    pub event_delay_ms: Option<u64>,
    /// Serve HTTPS with this certificate (PEM), offering HTTP/2 and
    /// HTTP/1.1 by ALPN as providers do; needs `--tls-key`.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of `--tls-cert`.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Print the built-in script and exit.
    #[arg(long)]
    pub print_script: bool,
}

#[derive(Debug, Args)]
pub struct ApprovalsArgs {
    /// The admin port.
    #[arg(
        long,
        value_name = "HOST:PORT",
        default_value = "127.0.0.1:9090",
        global = true
    )]
    pub addr: String,
    /// The environment variable holding the approval token (`[approval] token_env`).
    #[arg(
        long,
        value_name = "NAME",
        default_value = "TOOLGATE_APPROVAL_TOKEN",
        global = true
    )]
    pub token_env: String,
    #[command(subcommand)]
    pub action: ApprovalsAction,
}

#[derive(Debug, Subcommand)]
pub enum ApprovalsAction {
    /// The calls waiting, oldest first.
    List {
        /// Print the API's JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approve one call.
    Approve {
        /// The approval id (from `list`).
        id: String,
        /// Who approves (default: $USER).
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
        /// Also approve the same tool with the same arguments for the rest of the session.
        #[arg(long)]
        session: bool,
    },
    /// Deny one call (the agent sees a neutral failure).
    Deny {
        /// The approval id (from `list`).
        id: String,
        /// Who denies (default: $USER).
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
    },
}

/// Reads `--protocol` as a [`Protocol`] label (`chat_completions`,
/// `responses`, `messages`; `-` for `_`), offering the labels to
/// completions and `--help`.
#[derive(Debug, Clone, Copy)]
pub struct ProtocolParser;

impl clap::builder::TypedValueParser for ProtocolParser {
    type Value = Protocol;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Protocol, clap::Error> {
        value
            .to_str()
            .and_then(Protocol::from_label)
            .ok_or_else(|| {
                let mut e = clap::Error::new(clap::error::ErrorKind::InvalidValue).with_cmd(cmd);
                use clap::error::{ContextKind, ContextValue};
                if let Some(a) = arg {
                    e.insert(ContextKind::InvalidArg, ContextValue::String(a.to_string()));
                }
                e.insert(
                    ContextKind::InvalidValue,
                    ContextValue::String(value.to_string_lossy().into_owned()),
                );
                e.insert(
                    ContextKind::ValidValue,
                    ContextValue::Strings(Protocol::ALL.iter().map(|p| p.label().into()).collect()),
                );
                e
            })
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            Protocol::ALL
                .into_iter()
                .map(|p| clap::builder::PossibleValue::new(p.label())),
        ))
    }
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// The tool's name.
    #[arg(long, value_name = "NAME", required_unless_present = "trail")]
    pub tool: Option<String>,
    /// Its arguments (a JSON object).
    #[arg(long, value_name = "JSON", default_value = "{}")]
    pub args: String,
    /// The agent's phase (as `x-toolgate-phase` would say).
    #[arg(long, value_name = "PHASE")]
    pub phase: Option<String>,
    /// The user's request the call answers.
    #[arg(long, value_name = "TEXT")]
    pub request: Option<String>,
    /// The agent's mission (as `x-toolgate-mission` would say).
    #[arg(long, value_name = "TEXT")]
    pub mission: Option<String>,
    /// The client principal.
    #[arg(long, value_name = "NAME")]
    pub principal: Option<String>,
    /// The wire format the call came in.
    #[arg(long, value_parser = ProtocolParser, default_value = "chat_completions")]
    pub protocol: Protocol,
    /// A request body (JSON, in `--protocol`'s format) whose conversation the
    /// call answers: provenance and taint read its texts, and its tools are
    /// the declared ones.
    #[arg(long, value_name = "FILE")]
    pub conversation: Option<PathBuf>,
    /// An audit trail (a rotated set oldest first): show what it recorded
    /// for `--request-id`'s calls instead, each with the other decision of
    /// its story (the model's proposal, the MCP call that carried it out).
    #[arg(long, value_name = "FILE", num_args = 1.., requires = "request_id", conflicts_with_all = ["tool", "conversation"])]
    pub trail: Vec<PathBuf>,
    /// The request whose recorded calls are shown (`request_id`).
    #[arg(long, value_name = "ID")]
    pub request_id: Option<String>,
    /// Only this call of it (`call_id`).
    #[arg(long, value_name = "ID", requires = "request_id")]
    pub call_id: Option<String>,
    /// Print the explanation as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// A starter tool catalog (TOML on stdout) from a request's tools.
    Scaffold {
        /// A JSON request body that declares tools.
        #[arg(long, value_name = "FILE")]
        from_request: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// The ten sentinel scenarios against the configured `[judge]`;
    /// exit 1 if any is misjudged.
    Sentinel(ConfigArg),
}

#[derive(Debug, Subcommand)]
pub enum CertsCommand {
    /// A development CA, a server certificate for localhost and 127.0.0.1,
    /// and a client certificate for mutual TLS.
    Dev {
        /// The directory to write them to.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Overwrite files that exist.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check the hash chain of audit files; exit 1 at the first broken line.
    Verify {
        /// The files, a rotated set oldest first
        /// (`audit.jsonl.2 audit.jsonl.1 audit.jsonl`).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// The environment variable holding the chain's key (`[audit]
        /// key_env`), for a keyed trail.
        #[arg(long, value_name = "NAME")]
        key_env: Option<String>,
        /// A head toolgate published (`SEQ:HASH`, from its log or `GET
        /// /audit/head`): that record must be in the trail, unchanged.
        #[arg(long, value_name = "SEQ:HASH")]
        head: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum FactsCommand {
    /// TraceFinding JSON files in DIR, merged as facts into FILE.
    Import {
        /// The directory of findings.
        dir: PathBuf,
        /// The facts file to merge into.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
}

impl Command {
    /// The config a command loads before it runs (`check` loads its own
    /// way, deferring what only the run-time place provides).
    pub fn config(&self) -> Option<&ConfigArg> {
        match self {
            Command::Serve(c) => Some(c),
            Command::Explain(e) => Some(&e.config),
            Command::Eval(EvalCommand::Sentinel(c)) => Some(c),
            Command::Signals { config, .. } => Some(config),
            Command::Mcp(McpArgs {
                pin: Some(McpCommand::Pin { config, .. }),
                ..
            }) => Some(config),
            Command::Mcp(m) => Some(&m.config),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_grammar_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn flags_parse_into_commands() {
        let cli = Cli::try_parse_from([
            "toolgate",
            "explain",
            "--tool",
            "t",
            "--protocol",
            "messages",
            "--json",
        ]);
        let explained = match &cli {
            Ok(Cli {
                command: Command::Explain(e),
                ..
            }) => Some((e.tool.as_deref(), e.protocol, e.json, e.args.as_str())),
            _ => None,
        };
        assert_eq!(
            explained,
            Some((Some("t"), Protocol::Messages, true, "{}")),
            "{cli:?}"
        );
        assert!(Cli::try_parse_from(["toolgate", "serve", "--bogus"]).is_err());
        let cli =
            Cli::try_parse_from(["toolgate", "--log-format", "json", "serve", "-c", "x.toml"]);
        assert!(matches!(
            cli,
            Ok(Cli {
                log_format: Some(LogFormat::Json),
                command: Command::Serve(ConfigArg { config: Some(_) })
            })
        ));
    }
}
