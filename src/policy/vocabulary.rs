//! The signal schema: every name a `when` may read, its type, how it is set
//! and what it means. One table, used by the CEL checker, `toolgate signals`
//! and the README's signal table (a test keeps that in step).

/// A signal's CEL type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    Bool,
    Int,
    Double,
    String,
    /// `list(string)`
    Strings,
    /// `list(double)`
    Numbers,
    /// `list(map)`: records (claims, contradictions, facts, spans).
    Records,
    /// `map(string, dyn)`: the arguments, any shape.
    Map,
}

impl Ty {
    pub fn name(self) -> &'static str {
        match self {
            Ty::Bool => "bool",
            Ty::Int => "int",
            Ty::Double => "double",
            Ty::String => "string",
            Ty::Strings => "list(string)",
            Ty::Numbers => "list(double)",
            Ty::Records => "list(map)",
            Ty::Map => "map(string, dyn)",
        }
    }
}

/// How a signal is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// Computed by toolgate from the request and the call.
    Deterministic,
    /// Given by an LLM sensor (`require = [...]`); a default until it answers.
    Assisted,
}

impl How {
    pub fn name(self) -> &'static str {
        match self {
            How::Deterministic => "deterministic",
            How::Assisted => "assisted",
        }
    }
}

/// One signal.
#[derive(Debug, Clone, Copy)]
pub struct SignalDef {
    pub name: &'static str,
    pub ty: Ty,
    pub how: How,
    pub about: &'static str,
}

const fn d(name: &'static str, ty: Ty, about: &'static str) -> SignalDef {
    SignalDef {
        name,
        ty,
        how: How::Deterministic,
        about,
    }
}

const fn a(name: &'static str, ty: Ty, about: &'static str) -> SignalDef {
    SignalDef {
        name,
        ty,
        how: How::Assisted,
        about,
    }
}

/// Every signal, in the order `toolgate signals` prints them.
pub const SIGNALS: &[SignalDef] = &[
    d("tool.name", Ty::String, "the tool's name in caseless form (NFKC, case-folded, invisible characters removed: `Comm.Send` is `comm.send`)"),
    d("tool.namespace", Ty::String, "the text before the first explicit separator (`comm` in `comm.x`, `comm__x`, `comm/x`), or a `[policy] namespace_prefixes` entry followed by `_` or `-` (`comm_x`); `get_weather` has none (`\"\"`)"),
    d("tool.class", Ty::String, "the catalog class (`read_only`, `creates_state`, `modifies_state`, `irreversible`, `costs_money`, `external_io`) or `unclassified`"),
    d("tool.declared", Ty::Bool, "the request declared a tool under exactly this name (one that differs only by case, width or invisible characters is undeclared)"),
    d("tool.definition_changed", Ty::Bool, "the request declares this tool with another definition (description, schema) than the session first declared it with; for an MCP call, its server listed it last with another definition than its pin (rejected unless a rule that reads this signal decides it)"),
    d("phase", Ty::String, "the request's phase (`x-toolgate-phase`, a `/phase/{name}/` prefix, `[policy] default_phase`, else `unknown`)"),
    d("principal", Ty::String, "the `[[client]]` the request authenticated as; `anonymous` without clients"),
    d("session", Ty::String, "`x-toolgate-session`, else a hash of the system prompt and first user message"),
    d("agent", Ty::String, "`x-toolgate-agent`, else the principal"),
    d("args", Ty::Map, "the call's parsed arguments (`{}` when empty); any shape, read with `has()` or `.?`"),
    d("schema.valid", Ty::Bool, "the arguments satisfy the declared `parameters` and the catalog's stricter schema"),
    d("schema.errors", Ty::Strings, "why they do not (JSON pointers and messages)"),
    d("rate.exceeded", Ty::Bool, "a `[[limit]]` on this tool is exceeded (the call is then rejected)"),
    d("rate.error", Ty::String, "why a `[[limit]]`'s shared count could not be read (`[state] backend = \"redis\"` unreachable; set only then): with `on_error = \"fail_closed\"` the call is rejected as `state_unavailable`"),
    d("command.dangerous", Ty::Strings, "kinds of obviously destructive command line in any string argument (or free-form input): `pipe_to_shell`, `recursive_delete_root`, `reverse_shell`, `disk_wipe`, `fork_bomb`"),
    d("detect.urls", Ty::Strings, "URLs in any string argument"),
    d("detect.domains", Ty::Strings, "host names of those URLs and e-mail addresses, lower case"),
    d("detect.emails", Ty::Strings, "e-mail addresses in any string argument"),
    d("detect.paths", Ty::Strings, "file paths in any string argument"),
    d("detect.traversal", Ty::Bool, "a path climbs out with `..`"),
    d("detect.secrets", Ty::Strings, "kinds of credential found (`openai_key`, `aws_access_key`, `github_token`, `jwt`, `private_key`, …)"),
    d("detect.money", Ty::Numbers, "amounts of money in any string argument"),
    d("provenance.args_from_tool_results", Ty::Strings, "JSON pointers of string arguments (8+ characters) found only in tool results"),
    d("provenance.args_from_user", Ty::Strings, "JSON pointers of string arguments (8+ characters) found in the user's messages"),
    d("provenance.args_from_system", Ty::Strings, "JSON pointers of string arguments (8+ characters) found in system or developer text"),
    d("provenance.entities", Ty::Records, "every entity in the arguments (URLs, domains (host names, digits and hyphens included), e-mail addresses, phone numbers, IBANs and payment cards whose checksums hold, account numbers, file paths, ids and numbers of any length, free text included) as `{kind, path, sources}` (kind: `url`, `domain`, `email`, `phone`, `iban`, `card`, `account`, `path`, `number`, `id`); sources: `user`, `system`, `tool_result:<call id>`, none when the model wrote it; matched by token"),
    d("provenance.entities_only_from_tool_results", Ty::Records, "`{kind, path}` of the entities found in tool results and not in the user's or system text"),
    d("provenance.args_from_record_prose", Ty::Strings, "JSON pointers of arguments whose value (or an id, number, address, link or domain in it) a free-text field of a JSON record in a tool result names (a note, a comment, an address line; a string of three words or more, or of several lines): not a field taken whole, not the record's own fields (an order's note naming its own order), not a value in the user's or system text; read from structure alone, no word list"),
    d("provenance.args_from_described_record", Ty::Strings, "JSON pointers of arguments whose value is a whole field (or an id key) of a JSON record in a tool result that the user's latest message describes: the record holds a value with a word (4+ characters) of that message (`the keyboard from my last order`: the order whose item is a keyboard); words the agent passed to a look-up (a name and zip given to identify oneself) describe nothing, so identifying oneself delegates one's own record's fields to no call; a value named only in a record's free text is never a field of it"),
    d("provenance.described_by_tool_results", Ty::Strings, "JSON pointers of arguments a tool result describes together with the call's action: the value (or an entity in a longer value; an account number also in groups of four) within 160 bytes of a word of the tool's name or of its kind (`wire`, `pay` or `transfer` for `send_money`, `remove` for `delete_file`), in any of its forms or one typing slip away, in the result as written or with escapes undone and glued words split (in a JSON record, only in its free-text fields, and not a value that is one of the record's own fields); object words such as `file` or `email` in a tool's name are not actions; reads no trigger phrase"),
    d("provenance.described_spans", Ty::Records, "`{path, call_id}` of each argument in `provenance.described_by_tool_results`: which tool result described it"),
    d("provenance.args_from_unpicked_record", Ty::Strings, "JSON pointers of arguments whose value is one of records listed side by side in a tool result (a JSON list, a table's rows, id-keyed entries, `name (4.8)` entries) other than the one the user's latest message picks: by a property (`my most recent invoice`, `the cheapest plan`: the one record with the most or least of the property the user names, or of the only one they all measure, of their dates when the words pick by time) or by the user's words in it (`my daughter's line`); empty when the user picked none"),
    d("provenance.args_from_pointed_source", Ty::Strings, "JSON pointers of arguments the user delegated: the value occurs in a tool result whose source the user's latest message named (a word or a whole value of the call that read it, or a word of its tool's name that is not the action's: `the cost report` for `get_cost_report`), that message names the call's action (a word of the tool's name or of its kind: `pay` for `send_money`; a word of the name after its verb that is of no known kind, such as `slack` in `invite_user_to_slack`, only in a message that asks to read nothing), and the result names no other address, link, account or phone number the call leaves out beside an action word (an id, name or amount must stand beside a word of the user's: in a record, in another field of the object it belongs to, never its field names; or be of the one listed record with the most or the least of the property the user picks it by, `the best rated one`; an id of letters and digits must be the one nearest it); an address, link, account or phone also counts from a source not named when it is the value of its kind nearest to a word of the user's (in a record: the one in each object whose other fields hold that word), wherever that word stands"),
    d("provenance.action_requested", Ty::Bool, "the user's latest message asks for the call's action: a word of the tool's name (its verb, or another of its words when the message asks to read nothing) or of its kind (`pay` for `send_money`), or of the catalog's `actions`; false without a user message"),
    d("provenance.pointed_spans", Ty::Records, "`{path, call_id, by}` of each argument in `provenance.args_from_pointed_source`: the tool result it came from, and how the user pointed to it (`value`, `argument` or `tool_name`: how the user named its source; `nearest`: the value of its kind nearest to the user's word in a source not named)"),
    d("provenance.args_from_suspected_injection", Ty::Strings, "JSON pointers of arguments (strings or numbers) that carry text from a suspected injection span: the whole value (8+ characters) or an entity in it (an id or number of any length, an address, URL or domain), matched by token"),
    d("context.history_complete", Ty::Bool, "false when the model read, before the call, what toolgate never read: earlier turns of a conversation continued by reference (`previous_response_id`, a Messages thread's continue) that toolgate does not remember (an expired record; one another replica served without shared state, or whose record did not open); what the provider stored and the request names (a Responses `item_reference`, a Gemini `cachedContent`); or what the provider fetched for the answer: the output of a tool it runs (web search or fetch, file search, code execution, a remote MCP server; not tool search) earlier in the answer or in a turn the request continues, Gemini grounding (`googleSearch`, `urlContext`, `fileSearch`, ...), a chat request's web search (`web_search_options`, OpenRouter's `web` plugin or `:online` model). The provenance and taint signals then read only what toolgate read; true for a conversation sent whole or one whose earlier turns are remembered (read as though sent whole)"),
    d("context.unread_results", Ty::Bool, "a tool result the model reads, in the request or an earlier turn continued by reference, holds what toolgate does not read as text: an image (a screenshot), a document, a file or audio (a part of such a type, or Gemini's `inlineData`/`fileData` in a function response). What it says is out of the provenance and taint signals' sight"),
    d("context.injection_suspected", Ty::Bool, "a tool result in the request holds text that addresses the model with instructions (see `context.injection_spans`); the injection sensor may raise it, never clear it"),
    d("context.injection_spans", Ty::Records, "the suspected spans: `{result, call_id, detector, pattern}`, detector one of `ignore_instructions`, `addressed_to_model`, `addressed_to_reader`, `role_marker`, `fence_marker`, `tag_characters`, `hidden_comment`, `markdown_exfil`; pattern names the detector's part that matched (`addressed_to_model/dear_model`)"),
    d("output.external", Ty::Bool, "the call is an external communication (`external_comm` in the catalog)"),
    d("output.claims", Ty::Records, "claims in its outgoing text"),
    d("output.contradictions", Ty::Records, "registered facts its outgoing text contradicts"),
    d("output.facts", Ty::Records, "registered facts relevant to its outgoing text (external calls only)"),
    d("output.registry", Ty::String, "the fact registry's version (external calls only)"),
    d("output.text", Ty::String, "the outgoing text (external calls only)"),
    a("output.verdict", Ty::String, "the fact checker's `pass` or `block`; `none` until it answers"),
    a("output.reasons", Ty::Strings, "its reasons, when `include_reason` is on"),
    a("output.confidence", Ty::Double, "its confidence; `0.0` until it answers"),
    a("output.latency_ms", Ty::Int, "how long it took"),
    a("output.cache_hit", Ty::Bool, "answered from the judge's cache"),
    d("output.error", Ty::String, "why the fact checker failed (set only when it did)"),
    d("sentinel.error", Ty::String, "why the sentinel failed (set only when it did)"),
    a("injection.suspected", Ty::Bool, "the injection sensor's answer: a tool result in the request carries instructions for the model (`require = [\"injection\"]`; when true it also raises `context.injection_suspected`)"),
    a("injection.reason", Ty::String, "its reason, when `include_reason` is on"),
    a("injection.confidence", Ty::Double, "its confidence"),
    a("injection.latency_ms", Ty::Int, "how long it took"),
    a("injection.cache_hit", Ty::Bool, "answered from the judge's cache"),
    d("injection.error", Ty::String, "why the injection sensor failed (set only when it did)"),
    a("sentinel.decision", Ty::String, "the sentinel's `approve` or `reject`; `none` until it answers"),
    a("sentinel.reason", Ty::String, "its reason, when `include_reason` is on"),
    a("sentinel.confidence", Ty::Double, "its confidence; `0.0` until it answers"),
    a("sentinel.latency_ms", Ty::Int, "how long it took"),
    a("sentinel.cache_hit", Ty::Bool, "answered from the judge's cache"),
];

/// The signal of this exact name.
pub fn signal(name: &str) -> Option<&'static SignalDef> {
    SIGNALS.iter().find(|s| s.name == name)
}

/// Whether some signal's name starts with `prefix.`.
pub fn is_group(prefix: &str) -> bool {
    SIGNALS.iter().any(|s| {
        s.name
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('.'))
    })
}

/// The table as Markdown (for the README and `toolgate signals --markdown`).
pub fn markdown() -> String {
    let mut out = String::from("| signal | type | set | meaning |\n| --- | --- | --- | --- |\n");
    for s in SIGNALS {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            s.name,
            s.ty.name(),
            s.how.name(),
            s.about.replace('|', "\\|")
        ));
    }
    out
}

/// The table as aligned text (`toolgate signals`).
pub fn text() -> String {
    let width = SIGNALS.iter().map(|s| s.name.len()).max().unwrap_or(0);
    let ty = SIGNALS.iter().map(|s| s.ty.name().len()).max().unwrap_or(0);
    let mut out = String::new();
    for s in SIGNALS {
        out.push_str(&format!(
            "{:width$}  {:ty$}  {:13}  {}\n",
            s.name,
            s.ty.name(),
            s.how.name(),
            s.about.replace('`', "")
        ));
    }
    out
}

/// The names closest to `wanted` (by edit distance), best first, for "did you mean".
pub fn closest<'a>(wanted: &str, names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (wanted.chars().count() / 3).max(2);
    names
        .map(|n| (distance(wanted, n), n))
        .filter(|(d, n)| *d <= limit || n.ends_with(&format!(".{wanted}")))
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

/// Levenshtein distance over chars.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_groups_are_found() {
        let mut names: Vec<&str> = SIGNALS.iter().map(|s| s.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), SIGNALS.len());
        assert!(is_group("tool") && is_group("provenance") && !is_group("args"));
        assert_eq!(signal("tool.class").map(|s| s.ty), Some(Ty::String));
    }

    #[test]
    fn suggestions_are_near_names_or_the_full_name_of_a_leaf() {
        let names = || SIGNALS.iter().map(|s| s.name);
        assert_eq!(
            closest("args_from_tool_results", names()),
            Some("provenance.args_from_tool_results")
        );
        assert_eq!(closest("tool.nmae", names()), Some("tool.name"));
        assert_eq!(closest("zzzzzzzz", names()), None);
    }
}
