//! The injection detectors' patterns, each named `detector/part`, so a
//! find says which part of a detector made it (`explain` shows it) and the
//! corpus's leave-one-family-out test can measure each family without the
//! parts only that family needs.

/// One named pattern of one detector.
pub struct Pattern {
    pub detector: &'static str,
    pub name: &'static str,
    pub re: String,
}

fn p(detector: &'static str, name: &'static str, re: impl Into<String>) -> Pattern {
    Pattern {
        detector,
        name,
        re: re.into(),
    }
}

/// The phrase detectors (`ignore_instructions`, `addressed_to_model`,
/// `addressed_to_reader`): read in both readings of a result.
pub fn phrases() -> Vec<Pattern> {
    let ig = "ignore_instructions";
    let model = r"(ai|a\.i\.|assistant|llm|language model|model|agent|chatbot|bot|copilot|claude|gpt[\w.-]*|chatgpt|gemini|llama)s?";
    let am = "addressed_to_model";
    let rd = "addressed_to_reader";
    vec![
        // Phrases that tell a reader to drop its instructions, by language.
        p(
            ig,
            "ignore_instructions/en",
            concat!(
                r"\b(ignore|disregard|forget|override|bypass|abandon)\b[^.\n]{0,40}?",
                r"\b(instructions?|prompts?|directions|directives|guidelines|guardrails|programming|system message|",
                r"previous rules|prior rules|your rules|all rules|the rules above|safety rules|constraints|everything (above|before|else))\b",
            ),
        ),
        p(
            ig,
            "ignore_instructions/en_told",
            r"\b(forget|disregard|ignore)\s+(everything|all|anything|whatever)\s+(you\s+)?(were|was|have\s+been|'ve\s+been|had\s+been)\s+(told|taught|given|instructed|asked)\b",
        ),
        p(
            ig,
            "ignore_instructions/fr",
            concat!(
                r"\bignore[rz]?\s+(toutes?\s+)?(les|vos|tes)\s+(\w+\s+)?(instructions|consignes|directives)",
                r"|\boublie[rz]?\s+(toutes?\s+)?(les|vos|tes)\s+(\w+\s+)?(instructions|consignes)",
            ),
        ),
        p(
            ig,
            "ignore_instructions/es_it_pt",
            r"\bignor[ae]\w*\s+(todas?\s+)?(las|tus|sus|as|le|tutte\s+le)\s+(\w+\s+)?(instrucciones|indicaciones|instruções|istruzioni)",
        ),
        p(
            ig,
            "ignore_instructions/de",
            concat!(
                r"\bignorier\w*\s+(du\s+)?(alle\s+)?(\w+\s+)?(anweisungen|instruktionen|befehle|vorgaben)",
                r"|\bvergiss\w*\s+(alle\s+)?(\w+\s+)?(anweisungen|instruktionen)",
            ),
        ),
        p(
            ig,
            "ignore_instructions/nl",
            r"\bnegeer\s+(alle\s+)?(\w+\s+)?instructies",
        ),
        p(
            ig,
            "ignore_instructions/ru",
            r"(игнорир|забуд)\w*\s+(все\s+)?(\w+\s+)?(инструкции|указания|команды)",
        ),
        p(
            ig,
            "ignore_instructions/zh",
            r"(忽略|无视|忽视|忘记|忘掉)[^。\n]{0,8}(指令|指示|说明|提示)",
        ),
        p(
            ig,
            "ignore_instructions/ja",
            r"(指示|命令|指令)を(すべて|全て)?(無視|忘れ)",
        ),
        p(
            ig,
            "ignore_instructions/ko",
            r"(지시|명령|지침)[을를]?\s*(모두\s*)?무시",
        ),
        // Text aimed at the model itself.
        p(
            am,
            "addressed_to_model/note_to_model",
            format!(
                r"\b(attention|note|message|instructions?|important|urgent|notice|reminder)\b[^.\n]{{0,30}}\b(to|for)\s+(the\s+|any\s+|all\s+|you,?\s+)?(ai\s+)?{model}\b"
            ),
        ),
        p(
            am,
            "addressed_to_model/if_you_are_ai",
            r"\b(if|when|since)\s+you\s+are\s+(an?\s+)?(ai|assistant|language model|llm|ai agent|automated|bot|model)\b",
        ),
        p(
            am,
            "addressed_to_model/dear_model",
            format!(r"\b(dear|hey|hello|hi)\s+(ai\s+)?{model}\b"),
        ),
        p(
            am,
            "addressed_to_model/model_colon",
            r"(?m)^\s*(ai|assistant|agent|llm|model)\s*[:,]\s*(you|please|now|immediately|ignore|do not|don't|send|forward|delete|execute|run|call|transfer)\b",
        ),
        // A model called by name at the start of a sentence: "Assistant, wire …".
        p(
            am,
            "addressed_to_model/vocative",
            r"(?:^|[.!?:;]\s+|\n|')\s*(dear\s+|hey\s+|hi\s+|ok\s+)?(ai|assistant|agent|llm|chatbot|copilot|claude|chatgpt|gpt[\w.-]*)\s*,\s*(please\s+)?[a-z]{2,}",
        ),
        p(
            am,
            "addressed_to_model/reading_this",
            format!(
                r"\b{model}\s+(reading|processing|summari[sz]ing|parsing|viewing|seeing)\s+this\b"
            ),
        ),
        p(
            am,
            "addressed_to_model/to_you_model",
            format!(r"\bto\s+you,?\s+{model}\b"),
        ),
        p(
            am,
            "addressed_to_model/attention_model",
            format!(
                r"\b(attention|warning|notice|hey|listen),?\s+(all\s+|any\s+)?(ai\s+)?{model}\s*[:,!]"
            ),
        ),
        p(
            am,
            "addressed_to_model/to_the_model_reading",
            format!(
                r"\bto\s+(the|any|all|every)\s+(ai\s+)?{model}\s+(reading|processing|summari[sz]ing|parsing|viewing|seeing|handling)\b"
            ),
        ),
        p(
            am,
            "addressed_to_model/you_are_now",
            concat!(
                r"\byou are now (an? |in )?(new |different |unrestricted |unfiltered )?(ai|assistant|model|bot|agent|dan|unrestricted|unfiltered|jailbroken|free of|free from|no longer bound|no longer restricted)\b",
                r"|\bfrom now on,? you (are|must|shall|will (act|respond|answer|ignore|only|always|never|obey|follow|do))\b",
                r"|\byou must now (ignore|obey|follow|act|do|send|forward|delete|transfer|call|run|execute)\b",
            ),
        ),
        p(
            am,
            "addressed_to_model/new_instructions",
            r"\bnew instructions?\s*:|\b(new|updated) (task|objective|goal|directive)s?\s+for\s+(you|the (ai|assistant|model|agent))\b",
        ),
        p(
            am,
            "addressed_to_model/your_real_task",
            r"\byour (new|real|true|actual|updated) (instructions?|task|goal|objective|purpose|directive)s?\b",
        ),
        p(
            am,
            "addressed_to_model/before_you_solve",
            r"\bbefore you (can )?(solve|complete|do|finish|continue|answer|proceed|respond|reply|summari[sz]e)\b",
        ),
        p(
            am,
            "addressed_to_model/task_user_gave",
            r"\b(the )?task (that )?(i|the user) (gave|assigned|asked) you\b",
        ),
        p(
            am,
            "addressed_to_model/hide_from_user",
            r"\b(do not|don't|never) (tell|inform|mention|alert|notify|show) (this )?(to )?the user\b|\bwithout (telling|informing|notifying|asking|alerting) the user\b",
        ),
        p(
            am,
            "addressed_to_model/user_asked_you",
            r"\bthe user (has )?(already )?(asked|wants|instructed|authori[sz]ed|requested) you to\b",
        ),
        p(
            am,
            "addressed_to_model/mode",
            concat!(
                r"\b(unrestricted|dan|jailbreak|jailbroken) mode\b",
                r"|\b(you are|you're)( now)?( in| operating in| running in)? (developer|god|admin|debug|unrestricted|dan) mode\b",
                r"|\b(enter|activate|switch to|enable) (god|unrestricted|dan|jailbreak) mode\b",
                r"|\bjailbreak(en)? (prompt|instructions?)\b|\bjailbroken (ai|model|assistant|llm)\b",
            ),
        ),
        p(am, "addressed_to_model/information_tag", r"</?information>"),
        p(
            am,
            "addressed_to_model/admin_override",
            r"\b(system|admin|administrator|developer) (override|instruction|command|notice)s?\s*:",
        ),
        // A game or persona the model is to play (HackAPrompt's
        // "virtualization").
        p(
            am,
            "addressed_to_model/role_play",
            concat!(
                r"\blet'?s play a game\b[^\n]{0,80}\byou are\b",
                r"|\byou are (now )?[\w-]+,? an? [^.\n]{0,40}\b(with no|without( any)?) (limits|restrictions|rules|filters|guidelines)\b",
            ),
        ),
        // Text addressed to whoever (or whatever) reads or processes the
        // data: a note left for the reader, not for the person the data is
        // about.
        p(
            rd,
            "addressed_to_reader/note_for_whoever",
            concat!(
                r"\b(note|message|reminder|instructions?|request|notice|memo|p\.?s\.?)\b[^.\n]{0,20}?\b(for|to)\s+",
                r"(whoever|whomever|anyone|anybody|any\s+(system|tool|agent|program|process|automation|bot|reader)|",
                r"the\s+(one|system|process|tool|program|script|automation|bot|reader|processor|handler|crawler|scraper|integration|pipeline|agent|model))\s+",
                r"(who\s+|that\s+|which\s+)?(is\s+)?(reads?|reading|process\w*|handl\w*|pars\w*|summari[sz]\w*|view\w*|ingest\w*|index\w*|open\w*|gets?)\b",
            ),
        ),
        p(
            rd,
            "addressed_to_reader/to_whoever_reading",
            concat!(
                r"\bto\s+(whoever|whomever|the\s+(system|process|tool|agent|program|automation|bot|script))\s+(is\s+)?",
                r"(reading|processing|handling|parsing|summari[sz]ing|ingesting|indexing)\s+(this|these|the|it)\b",
            ),
        ),
        p(
            rd,
            "addressed_to_reader/processing_note",
            r"\b(processing|handling|automation|automated|machine|agent|crawler)\s+(note|instruction|directive|task)s?\s*:",
        ),
        p(
            rd,
            "addressed_to_reader/once_processed",
            r"\bonce\s+(this|it)\s+(is|has\s+been)\s+(read|processed|parsed|summari[sz]ed|ingested)\s*,",
        ),
        p(
            rd,
            "addressed_to_reader/reader_of_this",
            concat!(
                r"\b(note|message|reminder|instructions?|request|notice|memo)\b[^.\n]{0,20}?\b(for|to)\s+(the\s+|any\s+)?(reader|processor|handler)s?\s+of\s+",
                r"(this|these|the)\s+(record|data|file|export|log|entry|document|ticket|row|item|result)s?\b",
            ),
        ),
    ]
}

/// Forged markers of roles, chat templates and tool output: read where
/// they stand (the first reading only).
pub fn markers() -> Vec<Pattern> {
    let rm = "role_marker";
    vec![
        p(
            rm,
            "role_marker/chat_template",
            r"<\|(im_start|im_end|system|user|assistant|start_header_id|end_header_id|eot_id|endoftext)\|>",
        ),
        p(
            rm,
            "role_marker/inst_sys",
            r"\[/?inst\]|<</?sys>>|\[/?system\]",
        ),
        p(
            rm,
            "role_marker/role_tag",
            r"</?(system|system_prompt|instructions|admin|tool_result|tool_output|tool_response|function_results|function_result|search_results)>",
        ),
        p(
            rm,
            "role_marker/heading",
            r"(?m)^\s*#{1,6}\s*(system|instructions?|new instructions?|system prompt)\s*:?\s*$",
        ),
        p(
            rm,
            "role_marker/system_line",
            r"(?m)^\s*(system|developer)\s*(message|prompt|instruction|note)?\s*:\s*(you|ignore|the assistant|assistant|from now|new|important|always|never|do not)\b",
        ),
        p(
            rm,
            "role_marker/end_of_output",
            r"\bend of (the )?(tool|function) (output|result|response)s?\b",
        ),
        p(
            rm,
            "role_marker/system_message_heading",
            r"#{1,6}\s*\(\s*system[_ ]?(message|prompt|instructions?)\s*\)",
        ),
        p(
            rm,
            "role_marker/admin_banner",
            r"(?m)^\s*={2,}\s*(admin|administrator|system|developer|operator)\s+(directive|instruction|override|command|message)s?\b",
        ),
        p(
            rm,
            "role_marker/bracket_notice",
            r"\[\s*(system|admin|administrator|operator)\s+(notice|directive|instruction|override|command)s?\b[^\]\n]{0,60}\]\s*\n\s*(required action|action required|instruction|directive|task)\s*:",
        ),
        p(
            rm,
            "role_marker/dashes_system",
            r"(?m)-{3,}\s*\n\s*(system|developer)\s*:\s*\S",
        ),
        // A fake end of the user's input, or start of another's, on a
        // banner line of its own (Tensor Trust's `%%% END USER INPUT %%%`).
        p(
            rm,
            "role_marker/input_boundary",
            concat!(
                r"(?m)^\s*(%{2,}|#{3,}|={3,}|-{3,}|\*{3,}|<{2,}|\[{2,})\s*(end|begin|start)\s+(of\s+)?(the\s+)?",
                r"((user|system|operator|admin|developer)\s+(input|prompt|instructions?|task|message|turn)|(input|prompt|instructions))s?",
                r"\s*(%{2,}|#{3,}|={3,}|-{3,}|\*{3,}|>{2,}|\]{2,})?\s*$",
            ),
        ),
        // A forged agent step: the ReAct format's action and its input.
        p(
            rm,
            "role_marker/react_step",
            r"(?m)^\s*action\s*:\s*[\w.-]+\s*\n\s*action\s+input\s*:",
        ),
    ]
}
