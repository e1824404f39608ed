//! One call, one story: the model's proposal of a call and the agent's MCP
//! call that carries it out are joined in the trail (`proposed_in`,
//! `proposed_call`), `explain --trail` shows both, and the join holds when
//! the two requests land on different replicas sharing Redis.

use super::*;

/// The model (behind the gate's mock) proposes `crm.delete_contact` for
/// contact c1 on `proposer`, under the name Claude Code gives it.
async fn propose(proposer: &Gate) {
    let url = format!("{}/v1/chat/completions", proposer.url);
    let auth = format!("Bearer {TOKEN_A}");
    let body = chat_request(true, &["mcp__crm__delete_contact"]);
    let a = send(
        "POST",
        &url,
        &[
            ("content-type", "application/json"),
            ("authorization", &auth),
        ],
        body.to_string(),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
}

fn proposal_stream() -> Reply {
    Reply::sse(one_call_stream(
        "mcp__crm__delete_contact",
        r#"{"contact_id": "c1"}"#,
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_models_proposal_and_the_mcp_call_are_one_story() {
    let Some(server) = start_server().await else {
        return;
    };
    let mock = start_mock(vec![proposal_stream()]).await;
    let gate = start_at(&mock.base_url(), &server, ALLOW_ALL, "").await;
    propose(&gate).await;
    // The agent carries it out on the MCP route (with other calls around it).
    let Some(r) = check(&gate, TOKEN_A, "plain", "").await else {
        return;
    };
    assert_eq!(r["delete"]["error"], false, "{r:#}");
    let audit = gate.audit_flushed().await;
    let model = audit
        .iter()
        .find(|a| a["tool"] == "mcp__crm__delete_contact")
        .unwrap();
    let mcp = audit
        .iter()
        .find(|a| a["tool"] == "crm.delete_contact" && a["verdict"].is_string())
        .unwrap();
    assert_eq!(mcp["proposed_in"], model["request_id"], "{mcp}");
    assert_eq!(mcp["proposed_call"], model["call_id"], "{mcp}");
    // `explain` reads both decisions back from the trail.
    let v: Value = serde_json::from_str(&explained(&gate, &mcp["request_id"], true)).unwrap();
    let d = &v["decisions"][0];
    assert_eq!(d["decision"]["tool"], "crm.delete_contact", "{v:#}");
    assert_eq!(
        d["proposed_by"]["tool"], "mcp__crm__delete_contact",
        "{v:#}"
    );
    assert_eq!(d["proposed_by"]["request_id"], model["request_id"]);
    let text = explained(&gate, &model["request_id"], false);
    assert!(
        text.contains("carried out on the MCP route in: request"),
        "{text}"
    );
    // A call the model never proposed stands alone.
    let lookup = audit
        .iter()
        .find(|a| a["tool"] == "crm.lookup_contact")
        .unwrap();
    assert!(lookup.get("proposed_in").is_none(), "{lookup}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_story_holds_across_replicas_sharing_redis() {
    let Some(server) = start_server().await else {
        return;
    };
    let port = crate::bin::free_port();
    let Some(redis_up) = crate::shared_state::redis(port).await else {
        return;
    };
    let mock = start_mock(vec![proposal_stream()]).await;
    let shared = crate::shared_state::shared_records(port);
    let a = start_at(&mock.base_url(), &server, ALLOW_ALL, &shared).await;
    let b = start_at(&mock.base_url(), &server, ALLOW_ALL, &shared).await;
    propose(&a).await;
    // Written in the background: wait for it to land.
    for _ in 0..50 {
        if crate::shared_state::keys(port, "toolgate:proposed:*").await == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let Some(r) = check(&b, TOKEN_A, "plain", "").await else {
        return;
    };
    assert_eq!(r["delete"]["error"], false, "{r:#}");
    let on_a = a.audit_flushed().await;
    let model = decision(&on_a, "mcp__crm__delete_contact", "allow");
    let on_b = b.audit_flushed().await;
    let mcp = decision(&on_b, "crm.delete_contact", "allow");
    assert_eq!(mcp["proposed_in"], model["request_id"], "{mcp}");
    assert_eq!(mcp["proposed_call"], model["call_id"], "{mcp}");
    // Redis gone: the join is lost, never the call.
    drop(redis_up);
    let c = start_at(&mock.base_url(), &server, ALLOW_ALL, &shared).await;
    let Some(r) = check(&c, TOKEN_A, "plain", "").await else {
        return;
    };
    assert_eq!(r["delete"]["error"], false, "{r:#}");
    let on_c = c.audit_flushed().await;
    let alone = decision(&on_c, "crm.delete_contact", "allow");
    assert!(alone.get("proposed_in").is_none(), "{alone}");
}
