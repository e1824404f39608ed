//! The approvals page in a real headless browser (Debian's chromium driven
//! over WebDriver by chromedriver): a waiting call appears with its
//! arguments shown as text, and its approve button releases it.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::accumulate::Acc;
use crate::approval::{answer_with, approval_config, list, ASK, TOKEN};
use crate::support::*;

/// The W3C WebDriver element key.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
/// Arguments that would run script if the page wrote them as HTML.
const HOSTILE: &str = r#"{"memo":"<img src=x onerror=\"document.title='owned'\">","amount":5}"#;

struct Driver {
    child: Child,
    base: String,
    session: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The path of `name` on `PATH`, if it is installed.
pub fn tool(name: &str) -> Option<String> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .map(|p| p.display().to_string())
}

async fn wd(method: &str, url: &str, body: Value) -> Value {
    let a = send(
        method,
        url,
        &[("content-type", "application/json")],
        body.to_string(),
    )
    .await;
    assert!(
        a.status.is_success(),
        "{method} {url}: {} {}",
        a.status,
        a.text()
    );
    a.json()["value"].clone()
}

impl Driver {
    /// chromedriver with a headless chromium session, or `None` (a skip,
    /// never in CI) when they are not installed.
    async fn start() -> Option<Driver> {
        let (Some(driver), Some(browser)) = (
            tool("chromedriver"),
            tool("chromium").or_else(|| tool("chromium-browser")),
        ) else {
            assert!(
                std::env::var("CI").is_err(),
                "CI must provide chromium and chromedriver (Debian: chromium chromium-driver)"
            );
            eprintln!("SKIPPED: no chromium/chromedriver (Debian: apt-get install chromium chromium-driver)");
            return None;
        };
        let port = crate::bin::free_port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let mut d = Driver {
            child,
            base,
            session: String::new(),
        };
        for _ in 0..200 {
            if try_get(&format!("{}/status", d.base)).await == Some(200) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let caps = json!({"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": browser,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
        }}}});
        let v = wd("POST", &format!("{}/session", d.base), caps).await;
        d.session = v["sessionId"].as_str().unwrap().to_string();
        Some(d)
    }

    fn url(&self, rest: &str) -> String {
        format!("{}/session/{}{rest}", self.base, self.session)
    }

    async fn find(&self, css: &str) -> Option<String> {
        let a = send(
            "POST",
            &self.url("/elements"),
            &[("content-type", "application/json")],
            json!({"using": "css selector", "value": css}).to_string(),
        )
        .await;
        a.json()["value"].as_array()?.first()?[ELEMENT]
            .as_str()
            .map(str::to_string)
    }

    /// Waits up to 10 s for an element the page adds.
    async fn wait_for(&self, css: &str) -> String {
        for _ in 0..200 {
            if let Some(e) = self.find(css).await {
                return e;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{css} never appeared");
    }

    async fn script(&self, js: &str) -> Value {
        wd(
            "POST",
            &self.url("/execute/sync"),
            json!({"script": js, "args": []}),
        )
        .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_a_waiting_call_and_its_approve_button_releases_it() {
    let Some(browser) = Driver::start().await else {
        return;
    };
    let mock = start_mock(vec![answer_with(&[("pay", "call_1", HOSTILE)])]).await;
    let gate = start_gate(&mock.base_url(), ASK, &approval_config(60.0)).await;
    // The page itself needs no token; the API calls it makes do.
    let page = send("GET", &format!("{}/approvals/ui", gate.admin), &[], "").await;
    assert_eq!(page.status, 200);
    assert!(page.headers["content-security-policy"]
        .to_str()
        .unwrap()
        .contains("script-src 'self'"));
    wd(
        "POST",
        &browser.url("/url"),
        json!({"url": format!("{}/approvals/ui#token={TOKEN}", gate.admin)}),
    )
    .await;
    let by = browser.wait_for("#by").await;
    assert_eq!(
        browser.script("return location.hash").await,
        "",
        "the token left the address bar"
    );

    let mut body = chat_request(true, &["pay"]);
    body["messages"] = json!([{"role": "user", "content": "pay it"}]);
    let waiting = crate::approval::spawn_chat(&gate, body);
    // The page picks the call up by itself (no reload).
    let button = browser
        .wait_for("li.pending button.approve:not(.approve-session)")
        .await;
    let shown = browser.script("return [document.querySelector('li.pending h2').textContent, document.querySelector('li.pending pre.arguments').textContent, document.querySelectorAll('li.pending img').length, document.title]").await;
    assert_eq!(shown[0], "pay");
    assert!(
        shown[1].as_str().unwrap().contains("<img src=x onerror="),
        "{shown}"
    );
    assert_eq!(shown[2], 0, "arguments were written as HTML");
    assert_ne!(shown[3], "owned");
    // Without a name nothing is answered, and the page says why until the
    // name is given (its refresh every 2 s does not write over it).
    wd(
        "POST",
        &browser.url(&format!("/element/{button}/click")),
        json!({}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let status = browser
        .script("return document.getElementById('status').textContent")
        .await;
    assert!(
        status.as_str().unwrap_or("").contains("Enter your name"),
        "{status}"
    );
    assert_eq!(list(&gate).await.len(), 1, "nothing was answered");
    wd(
        "POST",
        &browser.url(&format!("/element/{by}/value")),
        json!({"text": "ana"}),
    )
    .await;
    wd(
        "POST",
        &browser.url(&format!("/element/{button}/click")),
        json!({}),
    )
    .await;

    let a = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("the call was never released")
        .unwrap();
    let calls = Acc::from_sse(&a.body).all_calls();
    assert_eq!(calls.len(), 1, "{}", a.text());
    assert_eq!(calls[0].arguments, HOSTILE);
    assert!(list(&gate).await.is_empty());
    // The page drops the answered call.
    for _ in 0..100 {
        if browser.find("li.pending").await.is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        browser.find("li.pending").await.is_none(),
        "the answered call is still shown"
    );
    let rec = gate.audit_flushed().await;
    let r = rec.iter().find(|r| r["gate"] == "approval").unwrap();
    assert_eq!(
        (
            &r["approval"]["channel"],
            &r["approval"]["by"],
            &r["approval"]["decision"]
        ),
        (&json!("ui"), &json!("ana"), &json!("approve"))
    );
    let _ = send("DELETE", &browser.url(""), &[], "").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_a_clipped_argument_and_hidden_characters_as_they_are() {
    let Some(browser) = Driver::start().await else {
        return;
    };
    // A right-to-left override makes "echo \u{202e}fdp.exe" read as
    // "echo exe.pdf"; the arguments run past what the page shows.
    let args =
        json!({"memo": "echo \u{202e}fdp.exe\u{202c} and\u{200b}more to acme\u{E0100}attacker-acct", "pad": "x".repeat(20_000)})
            .to_string();
    let args: &'static str = Box::leak(args.into_boxed_str());
    let calls: &'static [(&str, &str, &str)] = Box::leak(Box::new([("pay", "call_1", args)]));
    let mock = start_mock(vec![answer_with(calls)]).await;
    let gate = start_gate(&mock.base_url(), ASK, &approval_config(60.0)).await;
    wd(
        "POST",
        &browser.url("/url"),
        json!({"url": format!("{}/approvals/ui#token={TOKEN}", gate.admin)}),
    )
    .await;
    browser.wait_for("#by").await;
    let mut body = chat_request(false, &["pay"]);
    body["messages"] = json!([{"role": "user", "content": "pay it"}]);
    let _waiting = crate::approval::spawn_chat(&gate, body);
    browser.wait_for("li.pending p.clipped").await;
    let shown = browser
        .script(
            "return [document.querySelector('li.pending p.clipped').textContent, \
             Array.from(document.querySelectorAll('li.pending pre.arguments span.hidden-char')).map(s => s.textContent), \
             document.querySelector('li.pending pre.arguments').textContent.includes('\\u202e')]",
        )
        .await;
    let clipped = shown[0].as_str().unwrap();
    assert!(clipped.contains(&args.len().to_string()), "{shown}");
    assert_eq!(
        shown[1],
        json!(["⟨U+202E⟩", "⟨U+202C⟩", "⟨U+200B⟩", "⟨U+E0100⟩"]),
        "{shown}"
    );
    assert_eq!(shown[2], false, "the override itself is not in the text");
}
