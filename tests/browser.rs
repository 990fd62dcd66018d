//! A small Chrome DevTools Protocol client for integration tests that drive Debian's headless Chromium.
//!
//! One websocket per browser; a background task reads it, hands each reply to the caller waiting on its
//! request id, and broadcasts every event so a page can wait for the events of its own session.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::time::{Instant, sleep, timeout};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

const CHROMIUM: &str = "/usr/bin/chromium";
/// How long Chromium may take to print its DevTools address, a command to get its reply, and a page to load.
const TIMEOUT: Duration = Duration::from_secs(30);
/// A screenshot comes back as one base64 message, which can pass tungstenite's 16 MiB frame default.
const MAX_MESSAGE: usize = 256 << 20;

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A headless Chromium, ended (process killed, profile dir removed) when dropped.
pub struct Browser {
    conn: Arc<Conn>,
    _process: Process,
}

/// Ends Chromium before its profile dir is removed (fields drop after `drop` runs), so that no process is still
/// writing into the dir being deleted. Also what cleans up when `launch` fails.
struct Process {
    child: Child,
    /// Disconnects when stderr reaches EOF, i.e. when every helper process (all inherit stderr) has exited.
    stderr_closed: std::sync::mpsc::Receiver<()>,
    _profile: tempfile::TempDir,
}

impl Drop for Process {
    /// Kills the browser process; its helpers (zygotes, renderers, network service, crashpad) then exit on
    /// their own within a fraction of a second, which this waits for (5 s at most), blocking the thread.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = self.stderr_closed.recv_timeout(Duration::from_secs(5));
    }
}

impl Browser {
    /// Starts Chromium on a fresh profile and connects to its browser websocket; errs, with Chromium's stderr,
    /// if it has not printed its DevTools address within 30 s.
    pub async fn launch() -> Result<Browser> {
        let profile = tempfile::Builder::new().prefix("cdp-chromium-").tempdir()?;
        let mut child = Command::new(CHROMIUM)
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"])
            .args(["--disable-background-networking", "--disable-component-update", "--disable-sync"])
            .arg("--remote-debugging-port=0")
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {CHROMIUM}"))?;
        let stderr = child.stderr.take().context("chromium's stderr was not piped")?;
        let (stderr_open, stderr_closed) = std::sync::mpsc::channel::<()>();
        let _process = Process { child, stderr_closed, _profile: profile };

        // A thread drains stderr for the browser's whole life: Chromium logs a lot (D-Bus errors here), and
        // would block on a full pipe. Lines are split by hand because the log is not guaranteed UTF-8.
        let (tx, mut lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            let _stderr_open = stderr_open;
            for line in BufReader::new(stderr).split(b'\n').map_while(Result::ok) {
                let _ = tx.send(String::from_utf8_lossy(&line).into_owned());
            }
        });
        let mut log = String::new();
        let found = timeout(TIMEOUT, async {
            while let Some(line) = lines.recv().await {
                if let Some(url) = line.strip_prefix("DevTools listening on ") {
                    return Some(url.trim().to_string());
                }
                log.push_str(&line);
                log.push('\n');
            }
            None
        })
        .await;
        let url = match found {
            Ok(Some(url)) => url,
            Ok(None) => bail!("chromium exited before DevTools listened; stderr:\n{log}"),
            Err(_) => bail!("chromium did not start within {TIMEOUT:?}; stderr:\n{log}"),
        };

        let config = WebSocketConfig::default().max_message_size(Some(MAX_MESSAGE)).max_frame_size(Some(MAX_MESSAGE));
        let (ws, _) = tokio_tungstenite::connect_async_with_config(url.as_str(), Some(config), false)
            .await
            .with_context(|| format!("connecting to {url}"))?;
        let (sink, stream) = ws.split();
        let (events, _) = broadcast::channel(4096);
        let conn = Arc::new(Conn {
            sink: tokio::sync::Mutex::new(sink),
            next_id: AtomicU64::new(1),
            pending: Mutex::new(Some(HashMap::new())),
            statuses: Mutex::new(HashMap::new()),
            events: events.downgrade(),
        });
        tokio::spawn(read_loop(conn.clone(), stream, events));
        Ok(Browser { conn, _process })
    }

    /// Opens a new tab and attaches to it with a flat session, whose id routes the page's commands and events.
    /// Enables Page (for load events) and Network (for `last_status` and `set_headers`).
    pub async fn new_page(&self) -> Result<Page> {
        let target = self.conn.call(None, "Target.createTarget", json!({ "url": "about:blank" })).await?;
        let target = target["targetId"].as_str().context("Target.createTarget gave no targetId")?.to_string();
        let attach = json!({ "targetId": target, "flatten": true });
        let attached = self.conn.call(None, "Target.attachToTarget", attach).await?;
        let session = attached["sessionId"].as_str().context("Target.attachToTarget gave no sessionId")?.to_string();
        let page = Page { conn: self.conn.clone(), session, target };
        page.call("Page.enable", json!({})).await?;
        page.call("Network.enable", json!({})).await?;
        Ok(page)
    }
}

/// The browser connection shared by the browser, its pages and the reader task.
struct Conn {
    sink: tokio::sync::Mutex<SplitSink<Ws, Message>>,
    next_id: AtomicU64,
    /// Reply slots by request id; `None` once the connection is gone, so no new caller waits for nothing.
    pending: Mutex<Option<HashMap<u64, oneshot::Sender<Value>>>>,
    /// Last main-document HTTP status by (session id, frame id); a page's main frame id is its target id.
    statuses: Mutex<HashMap<(String, String), u16>>,
    /// Weak, so that the reader task owns the only sender and its end wakes every waiter with `Closed`.
    events: broadcast::WeakSender<Value>,
}

/// Locks ignoring poison: every critical section here is a single map operation, which cannot leave it torn.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Conn {
    /// Sends one command (to a page's session if given) and returns its `result`, or its `error` as an Err.
    async fn call(&self, session: Option<&str>, method: &str, params: Value) -> Result<Value> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut request = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = session {
            request["sessionId"] = session.into();
        }
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).as_mut().context("browser connection closed")?.insert(id, tx);
        if let Err(e) = self.sink.lock().await.send(Message::text(request.to_string())).await {
            self.forget(id);
            return Err(anyhow!(e).context(format!("sending {method}")));
        }
        let mut reply = match timeout(TIMEOUT, rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => bail!("{method}: browser connection closed"),
            Err(_) => {
                self.forget(id);
                bail!("{method}: no reply within {TIMEOUT:?}");
            }
        };
        match reply.get("error") {
            Some(error) => bail!("{method}: {error}"),
            None => Ok(reply["result"].take()),
        }
    }

    /// Drops the reply slot of a request that will not be waited for any more.
    fn forget(&self, id: u64) {
        if let Some(pending) = lock(&self.pending).as_mut() {
            pending.remove(&id);
        }
    }

    fn subscribe(&self) -> Result<broadcast::Receiver<Value>> {
        Ok(self.events.upgrade().context("browser connection closed")?.subscribe())
    }
}

/// Routes replies to their callers, records main-document statuses, and broadcasts events until the socket ends.
async fn read_loop(conn: Arc<Conn>, mut stream: SplitStream<Ws>, events: broadcast::Sender<Value>) {
    while let Some(Ok(message)) = stream.next().await {
        let Message::Text(text) = message else { continue };
        let Ok(message) = serde_json::from_str::<Value>(&text) else { continue };
        if let Some(id) = message["id"].as_u64() {
            if let Some(tx) = lock(&conn.pending).as_mut().and_then(|pending| pending.remove(&id)) {
                let _ = tx.send(message);
            }
            continue;
        }
        let params = &message["params"];
        if message["method"] == "Network.responseReceived" && params["type"] == "Document" {
            let (session, frame) = (message["sessionId"].as_str(), params["frameId"].as_str());
            let status = params["response"]["status"].as_u64().and_then(|s| u16::try_from(s).ok());
            if let (Some(session), Some(frame), Some(status)) = (session, frame, status) {
                lock(&conn.statuses).insert((session.to_string(), frame.to_string()), status);
            }
        }
        let _ = events.send(message);
    }
    // Dropping the reply slots fails every waiting call at once; dropping `events` ends every event wait.
    lock(&conn.pending).take();
}

/// One tab of the browser, addressed through its flat session.
pub struct Page {
    conn: Arc<Conn>,
    session: String,
    target: String,
}

impl Page {
    async fn call(&self, method: &str, params: Value) -> Result<Value> {
        self.conn.call(Some(&self.session), method, params).await
    }

    /// Waits (30 s at most) for the next `method` event of this page's session on a receiver subscribed
    /// before the action that causes it, so the event cannot slip by between the action and the wait.
    async fn wait_event(&self, events: &mut broadcast::Receiver<Value>, method: &str) -> Result<Value> {
        let wait = async {
            loop {
                match events.recv().await {
                    Ok(event) if event["method"] == method && event["sessionId"] == self.session.as_str() => {
                        return Ok(event);
                    }
                    Err(broadcast::error::RecvError::Closed) => bail!("browser connection closed"),
                    _ => {}
                }
            }
        };
        timeout(TIMEOUT, wait).await.map_err(|_| anyhow!("no {method} within {TIMEOUT:?}"))?
    }

    /// Navigates and waits for `Page.loadEventFired` (30 s at most). Errs if no HTTP response came (e.g.
    /// connection refused); an HTTP error status does not err, `last_status` tells it. A same-document
    /// navigation (only the #fragment changes) fires no load event, so it returns at once.
    pub async fn goto(&self, url: &str) -> Result<()> {
        let mut events = self.conn.subscribe()?;
        let navigated = self.call("Page.navigate", json!({ "url": url })).await?;
        // A failed navigation commits Chrome's error page, whose load is awaited too, lest a later wait take it.
        if navigated.get("loaderId").is_some() {
            self.wait_event(&mut events, "Page.loadEventFired").await.with_context(|| format!("loading {url}"))?;
        }
        match navigated["errorText"].as_str() {
            // Chrome's word for a 4xx/5xx without a body, which it replaces by its error page.
            None | Some("" | "net::ERR_HTTP_RESPONSE_CODE_FAILURE") => Ok(()),
            Some(error) => bail!("navigating to {url}: {error}"),
        }
    }

    /// Evaluates `expression` in the page, awaiting a promise; returns its value as JSON (`Null` for undefined).
    /// A thrown exception becomes an Err with its description.
    pub async fn eval(&self, expression: &str) -> Result<Value> {
        let params = json!({ "expression": expression, "returnByValue": true, "awaitPromise": true });
        let mut result = self.call("Runtime.evaluate", params).await?;
        if let Some(details) = result.get("exceptionDetails") {
            let text = details["exception"]["description"].as_str().or(details["text"].as_str());
            bail!("`{expression}` threw: {}", text.unwrap_or("an exception"));
        }
        Ok(result["result"]["value"].take())
    }

    /// Polls `eval(expression)` every 100 ms until it is JSON `true`; errs after `timeout` with the last value.
    /// An exception counts as "not yet", since the page may still be building what the expression reads.
    pub async fn wait_for(&self, expression: &str, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let last = match self.eval(expression).await {
                Ok(Value::Bool(true)) => return Ok(()),
                Ok(value) => value.to_string(),
                Err(e) => format!("{e:#}"),
            };
            if Instant::now() >= deadline {
                bail!("`{expression}` not true after {timeout:?}; last: {last}");
            }
            sleep(Duration::from_millis(100)).await;
        }
    }

    /// Clicks the first element matching the CSS `selector` with `element.click()`; errs if none matches.
    pub async fn click(&self, selector: &str) -> Result<()> {
        // A JSON string is a valid JS string literal, so any selector is quoted safely.
        let selector = serde_json::to_string(selector)?;
        let script = format!(
            "(() => {{ const e = document.querySelector({selector}); \
             if (!e) throw new Error('no element matches ' + {selector}); e.click(); }})()"
        );
        self.eval(&script).await.map(drop)
    }

    /// Clicks like `click`, then waits for the load that the click starts (e.g. submitting a form). The wait
    /// registers before the click, so a fast load is not missed; but it takes the page's next load event, so a
    /// navigation started earlier and still loading would end it early.
    pub async fn click_and_wait_for_load(&self, selector: &str) -> Result<()> {
        let mut events = self.conn.subscribe()?;
        self.click(selector).await?;
        self.wait_event(&mut events, "Page.loadEventFired")
            .await
            .with_context(|| format!("load after clicking {selector}"))?;
        Ok(())
    }

    /// Sets the viewport to `width` x `height` CSS px at scale 1 and hides scrollbars (both stay so for later
    /// calls), then returns a PNG of the whole page: `width` wide, and taller than `height` if the page is.
    pub async fn screenshot_png(&self, width: u32, height: u32) -> Result<Vec<u8>> {
        let metrics = json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": false });
        // Before the override, which otherwise keeps a scrollbar's 15 px out of a scrollable page's shot.
        self.call("Emulation.setScrollbarsHidden", json!({ "hidden": true })).await?;
        self.call("Emulation.setDeviceMetricsOverride", metrics).await?;
        let shot =
            self.call("Page.captureScreenshot", json!({ "format": "png", "captureBeyondViewport": true })).await?;
        decode_base64(shot["data"].as_str().context("Page.captureScreenshot gave no data")?)
    }

    /// The HTTP status of this page's last main-document response, if any arrived.
    pub async fn last_status(&self) -> Option<u16> {
        lock(&self.conn.statuses).get(&(self.session.clone(), self.target.clone())).copied()
    }
}

/// Decodes standard base64 (padding optional), as CDP sends binary data; it saves a dependency.
fn decode_base64(text: &str) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes().filter(|&c| c != b'=') {
        let sextet = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => bail!("invalid base64 byte {c:#04x}"),
        };
        acc = (acc << 6) | u32::from(sextet);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8); // the 8 bits just completed; older ones are cut off
        }
    }
    Ok(out)
}
