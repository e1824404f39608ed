//! Property: for every fixture and any re-chunking of its bytes, what the agent
//! receives is the same (with every tool allowed, and with the first denied).

use proptest::prelude::*;
use toolgate::call::Call;
use toolgate::protocol::{chat::stream::StreamRewriter, sync_driver::RunSync, Options};

use crate::accumulate::Acc;
use crate::support::*;

fn opts() -> Options {
    Options {
        neutral_message: "N".into(),
        max_event_bytes: 1 << 20,
        max_call_bytes: 1 << 20,
        max_held_bytes: 1 << 22,
        id_key: [0; 32],
        resume: false,
        neutral_result: "R".into(),
        refusal: false,
        text_calls: false,
    }
}

fn rewrite(input: &[u8], cuts: &[usize], deny: Option<&str>) -> Vec<u8> {
    let chunks = cut_at(input, cuts);
    let mut rw = StreamRewriter::new(&opts());
    let allow = |c: &Call| Some(c.name.as_str()) != deny;
    rw.run_sync(&chunks, allow).to_vec()
}

fn sse_fixtures() -> Vec<(String, Vec<u8>)> {
    chat_fixtures()
        .into_iter()
        .filter(|p| p.extension().unwrap() == "sse")
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().to_string(),
                std::fs::read(p).unwrap(),
            )
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_rechunking_gives_the_same_output(cuts in proptest::collection::vec(any::<usize>(), 0..40)) {
        if fixtures_dir().is_none() {
            prop_assert!(
                std::env::var("TOOLGATE_REQUIRE_FIXTURES").as_deref() != Ok("1"),
                "../shared/fixtures/sse is absent and TOOLGATE_REQUIRE_FIXTURES=1"
            );
            eprintln!("SKIPPED: ../shared/fixtures/sse is absent");
            return Ok(());
        }
        for (name, bytes) in sse_fixtures() {
            let first = Acc::from_sse(&bytes).all_calls().first().map(|c| c.name.clone());
            for deny in [None, first.as_deref()] {
                let whole = rewrite(&bytes, &[], deny);
                let cut = rewrite(&bytes, &cuts, deny);
                prop_assert!(whole == cut, "{} (deny {:?}) differs when cut at {:?}", name, deny, cuts);
            }
        }
    }

    #[test]
    fn byte_by_byte_equals_whole_on_crlf_and_cr_streams(seed in 0usize..1000) {
        let lf = [
            chunk(0, serde_json::json!({"content": format!("t{seed}")}), None),
            chunk(0, call_delta(0, "a", "x", "{\"k\":1}"), None),
            chunk(0, serde_json::json!({}), Some("tool_calls")),
            "data: [DONE]\n\n".to_string(),
        ]
        .concat();
        for text in [lf.clone(), lf.replace('\n', "\r\n"), lf.replace('\n', "\r")] {
            let b = text.as_bytes();
            let cuts: Vec<usize> = (0..b.len()).collect();
            let whole = Acc::from_sse(&rewrite(b, &[], None));
            let bytewise = Acc::from_sse(&rewrite(b, &cuts, None));
            prop_assert_eq!(whole.all_calls(), bytewise.all_calls());
            prop_assert_eq!(whole.all_calls().len(), 1);
            prop_assert_eq!(&whole.content, &bytewise.content);
        }
    }
}
