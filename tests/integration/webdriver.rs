//! A small W3C WebDriver client over HTTP for the dashboard's browser tests (and
//! `benches/dashboard.rs`, which includes this file): Debian's `chromedriver` driving
//! headless `chromium`, on a loopback port.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

/// The element reference key of the W3C protocol.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// How long a wait for the page may take before the test fails.
pub const PAGE_TIMEOUT: Duration = Duration::from_secs(20);

/// Chromium's flags: headless, and quiet on a closed network (no update checks, sync,
/// QUIC probes or first-run work that would otherwise stall it).
const CHROMIUM_ARGS: [&str; 10] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1440,900",
];

/// A running `chromedriver` with one browser session; both end on drop.
pub struct Browser {
    driver: tokio::process::Child,
    http: reqwest::Client,
    session: String,
    base: String,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ending the session ends the browser (chromedriver's child), which killing
        // chromedriver alone would leave running. Blocking: drop cannot await.
        use std::io::{Read, Write};
        let address = self.base.trim_start_matches("http://");
        if let Ok(mut stream) = std::net::TcpStream::connect(address) {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let request = format!(
                "DELETE /session/{} HTTP/1.1\r\nHost: {address}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                self.session
            );
            if stream.write_all(request.as_bytes()).is_ok() {
                let _ = stream.read_to_end(&mut Vec::new());
            }
        }
        let _ = self.driver.start_kill();
    }
}

impl Browser {
    /// Starts `chromedriver` on a port of its choosing and opens a session.
    pub async fn start() -> Browser {
        // reqwest is built without a default crypto provider; another test may have
        // installed it already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut driver = tokio::process::Command::new("chromedriver")
            .arg("--port=0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("chromedriver runs (Debian's chromium-driver; .ci/run installs it)");
        let stdout = driver.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let port = tokio::time::timeout(PAGE_TIMEOUT, async {
            while let Some(line) = lines.next_line().await.expect("chromedriver output") {
                if let Some(port) = line
                    .split("started successfully on port ")
                    .nth(1)
                    .map(|p| p.trim_end_matches('.').to_string())
                {
                    return port;
                }
            }
            panic!("chromedriver exited before it listened");
        })
        .await
        .expect("chromedriver listens in time");
        // Keep reading so chromedriver never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let profile = tempfile::tempdir().expect("a profile directory");
        let mut args: Vec<String> = CHROMIUM_ARGS.iter().map(|a| a.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium(), "args": args},
        }}});
        let answer: Value = http
            .post(format!("{base}/session"))
            .json(&capabilities)
            .send()
            .await
            .expect("chromedriver answers")
            .json()
            .await
            .expect("a JSON answer");
        let session = answer["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("a session: {answer}"))
            .to_string();
        Browser {
            driver,
            http,
            session,
            base,
            _profile: profile,
        }
    }

    async fn command(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}/session/{}{path}", self.base, self.session);
        let mut request = self.http.request(method, url);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer: Value = request
            .send()
            .await
            .expect("chromedriver answers")
            .json()
            .await
            .expect("a JSON answer");
        if answer["value"].get("error").is_some() {
            panic!("WebDriver {path}: {}", answer["value"]);
        }
        answer["value"].clone()
    }

    pub async fn goto(&self, url: &str) {
        self.command(reqwest::Method::POST, "/url", Some(json!({ "url": url })))
            .await;
    }

    /// Runs `script` (a function body; `arguments` holds `args`) and returns its value.
    pub async fn eval(&self, script: &str, args: Value) -> Value {
        self.command(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({ "script": script, "args": args })),
        )
        .await
    }

    /// Waits until `script` returns something other than null or false; returns it.
    pub async fn wait_for(&self, what: &str, script: &str, args: Value) -> Value {
        let deadline = Instant::now() + PAGE_TIMEOUT;
        loop {
            let value = self.eval(script, args.clone()).await;
            if !value.is_null() && value != json!(false) {
                return value;
            }
            if Instant::now() > deadline {
                let text = self.eval("return document.body.innerText", json!([])).await;
                panic!("the page did not show {what} in time; it shows:\n{text}");
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// [`Self::eval`] of a script that takes no arguments.
    pub async fn run(&self, script: &str) -> Value {
        self.eval(script, json!([])).await
    }

    /// [`Self::wait_for`] of a script that takes no arguments.
    pub async fn wait_until(&self, what: &str, script: &str) -> Value {
        self.wait_for(what, script, json!([])).await
    }

    /// Waits until the dashboard asks for its API token.
    pub async fn wait_token_prompt(&self) {
        self.wait_until(
            "the token prompt",
            "return document.getElementById('token-dialog').open",
        )
        .await;
    }

    /// Types `token` into the dashboard's token prompt and saves it.
    pub async fn enter_token(&self, token: &str) {
        self.type_into("#token-input", token).await;
        self.click("#token-save").await;
    }

    async fn element(&self, css: &str) -> String {
        let found = self
            .command(
                reqwest::Method::POST,
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        found[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("an element for {css}: {found}"))
            .to_string()
    }

    /// Clicks the element `css` selects, as a person would.
    pub async fn click(&self, css: &str) {
        let id = self.element(css).await;
        self.command(
            reqwest::Method::POST,
            &format!("/element/{id}/click"),
            Some(json!({})),
        )
        .await;
    }

    /// Types `text` into the element `css` selects, key by key.
    pub async fn type_into(&self, css: &str, text: &str) {
        let id = self.element(css).await;
        self.command(
            reqwest::Method::POST,
            &format!("/element/{id}/clear"),
            Some(json!({})),
        )
        .await;
        self.command(
            reqwest::Method::POST,
            &format!("/element/{id}/value"),
            Some(json!({ "text": text })),
        )
        .await;
    }

    /// Presses keys on whatever has the focus (WebDriver's special keys as `\u{e0..}`).
    pub async fn keys(&self, keys: &str) {
        let actions: Vec<Value> = keys
            .chars()
            .flat_map(|c| {
                let key = c.to_string();
                [
                    json!({"type": "keyDown", "value": key}),
                    json!({"type": "keyUp", "value": key}),
                ]
            })
            .collect();
        self.command(
            reqwest::Method::POST,
            "/actions",
            Some(json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]})),
        )
        .await;
    }

    /// Makes the page see `prefers-color-scheme` as `scheme` (`dark`, `light`), through
    /// the DevTools protocol chromedriver relays.
    pub async fn color_scheme(&self, scheme: &str) {
        self.command(
            reqwest::Method::POST,
            "/goog/cdp/execute",
            Some(json!({
                "cmd": "Emulation.setEmulatedMedia",
                "params": {"features": [{"name": "prefers-color-scheme", "value": scheme}]},
            })),
        )
        .await;
    }

    /// Saves a PNG of the window.
    pub async fn screenshot(&self, path: &Path) {
        use base64::Engine as _;
        let data = self
            .command(reqwest::Method::GET, "/screenshot", None)
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(data.as_str().expect("base64 PNG"))
            .expect("a PNG");
        std::fs::write(path, png).expect("write the screenshot");
    }
}

/// Debian's binary (`chromium`), as `.ci/run` installs it.
fn chromium() -> String {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("chromium")
        .to_string()
}
