//! The policy gate with scripted sensors: assisted signals raise a verdict,
//! never lower it or overwrite a deterministic signal; a failing sensor
//! fails open or closed as its rule says.

use super::*;

/// A scripted sensor: returns `answer`, or fails.
struct Scripted(Result<Vec<Assisted>, crate::upstream::judge::Failure>);

impl Sensor for Scripted {
    fn name(&self) -> &'static str {
        "sentinel"
    }
    fn sense<'a>(
        &'a self,
        _: &'a Call,
        _: &'a Context,
        _: &'a Signals,
    ) -> BoxFuture<'a, Result<Vec<Assisted>, crate::upstream::judge::Failure>> {
        let r = self.0.clone();
        Box::pin(async move { r })
    }
}

fn says(name: &str, value: serde_json::Value, confidence: f64) -> Arc<dyn Sensor> {
    Arc::new(Scripted(Ok(vec![Assisted {
        name: name.into(),
        value,
        confidence,
    }])))
}

#[tokio::test]
async fn an_assisted_reject_raises_the_verdict() {
    let g = gates_with(
        SENTINEL_RULES,
        vec![says("sentinel.decision", json!("reject"), 0.95)],
    );
    let d = g.decide(&call("pay", "{}"), &ctx("execution")).await;
    assert_eq!(
        (
            d.verdict,
            d.outcome.reason.as_ref(),
            d.outcome.rule.as_deref()
        ),
        (Verdict::Reject, "assisted", Some("sentinel-rejects"))
    );
    let s = d.signals.unwrap();
    assert_eq!(
        s.get("sentinel.decision").unwrap().method,
        signals::Method::Assisted
    );
}

#[tokio::test]
async fn an_assisted_signal_cannot_overwrite_a_deterministic_one() {
    // The sensor claims the tool is irreversible; the deterministic class stands.
    let g = gates_with(
        SENTINEL_RULES,
        vec![says("tool.class", json!("irreversible"), 1.0)],
    );
    let d = g.decide(&call("pay", "{}"), &ctx("execution")).await;
    assert_eq!(d.verdict, Verdict::Allow);
    assert_eq!(
        d.signals.unwrap().get("tool.class").unwrap().value,
        json!("unclassified")
    );
}

#[tokio::test]
async fn an_assisted_signal_cannot_lower_severity() {
    let rules = format!("{SENTINEL_RULES}[[rule]]\nname = \"no-pay-planning\"\ntools = \"pay\"\nwhen = \"phase == 'planning'\"\nverdict = \"deny\"\nrequire = [\"sentinel\"]\n");
    let g = gates_with(
        &rules,
        vec![says("sentinel.decision", json!("approve"), 1.0)],
    );
    let d = g.decide(&call("pay", "{}"), &ctx("planning")).await;
    assert_eq!(d.verdict, Verdict::Deny);
}

#[tokio::test]
async fn a_low_confidence_answer_is_dropped() {
    let g = gates_with(
        SENTINEL_RULES,
        vec![says("sentinel.decision", json!("reject"), 0.5)],
    );
    let d = g.decide(&call("pay", "{}"), &ctx("execution")).await;
    assert_eq!(d.verdict, Verdict::Allow);
    assert!(d.signals.unwrap().get("sentinel.decision").is_none());
}

#[tokio::test]
async fn a_failing_sensor_leaves_the_deterministic_result_or_fails_closed() {
    let failing: Arc<dyn Sensor> = Arc::new(Scripted(Err(crate::upstream::judge::Failure::new(
        "timeout", "timeout",
    ))));
    let g = gates_with(SENTINEL_RULES, vec![failing]);
    let d = g.decide(&call("get", "{}"), &ctx("execution")).await;
    assert_eq!(
        d.verdict,
        Verdict::Allow,
        "fail = open keeps the deterministic allow"
    );
    let d = g.decide(&call("pay", "{}"), &ctx("execution")).await;
    assert_eq!(
        (
            d.verdict,
            d.outcome.reason.as_ref(),
            d.outcome.rule.as_deref()
        ),
        (Verdict::Reject, "sensor_failed", Some("judge-money"))
    );
}

#[tokio::test]
async fn an_unconfigured_sensor_is_skipped() {
    let g = gates(SENTINEL_RULES);
    assert_eq!(
        g.decide(&call("pay", "{}"), &ctx("execution"))
            .await
            .verdict,
        Verdict::Allow
    );
}

#[tokio::test]
async fn ask_sits_between_allow_and_reject_and_sensors_may_raise_it_only() {
    // A sensor's low-confidence doubt raises an allow to ask.
    let doubt = "[[rule]]\nname = \"judge\"\ntools = \"pay\"\nverdict = \"allow\"\nrequire = [\"sentinel\"]\n[[rule]]\nname = \"unsure-asks\"\nwhen = \"sentinel.decision == 'unsure'\"\nverdict = \"ask\"\n[[rule]]\nname = \"reject-rejects\"\nwhen = \"sentinel.decision == 'reject'\"\nverdict = \"reject\"\n";
    let g = gates_with(doubt, vec![says("sentinel.decision", json!("unsure"), 0.9)]);
    let d = g.decide(&call("pay", "{}"), &ctx("execution")).await;
    assert_eq!(
        (d.verdict, d.outcome.rule.as_deref()),
        (Verdict::Ask, Some("unsure-asks"))
    );
    // An ask rule still lets the sensors run, and a reject they find wins:
    // nobody is asked about a call that would be rejected.
    let asking =
        format!("{doubt}[[rule]]\nname = \"always-ask\"\ntools = \"pay\"\nverdict = \"pause\"\n");
    let g = gates_with(
        &asking,
        vec![says("sentinel.decision", json!("reject"), 0.9)],
    );
    let d = g.decide(&call("pay", "{}"), &ctx("execution")).await;
    assert_eq!(
        (d.verdict, d.outcome.reason.as_ref()),
        (Verdict::Reject, "assisted")
    );
    // A sensor's approval does not lower an ask.
    let g = gates_with(
        &asking,
        vec![says("sentinel.decision", json!("approve"), 1.0)],
    );
    let d = g.decide(&call("pay", "{}"), &ctx("execution")).await;
    assert_eq!(
        (d.verdict, d.outcome.rule.as_deref()),
        (Verdict::Ask, Some("always-ask"))
    );
    // A deny beats an ask.
    let denied =
        format!("{asking}[[rule]]\nname = \"no-pay\"\ntools = \"pay\"\nverdict = \"deny\"\n");
    let d = gates_with(&denied, Vec::new())
        .decide(&call("pay", "{}"), &ctx("execution"))
        .await;
    assert_eq!(d.verdict, Verdict::Deny);
}

#[test]
fn gates_are_prompt_unless_a_configured_sensor_or_a_person_may_be_waited_for() {
    // The default policy requires the sentinel; without one it is skipped.
    assert!(gates("").prompt());
    assert!(!gates_with("", vec![says("sentinel.decision", json!("approve"), 0.9)]).prompt());
    let asks = "[[rule]]\nname = \"asks\"\ntools = [\"pay\"]\nverdict = \"ask\"\n";
    assert!(!gates(asks).prompt());
}
