//! Interactive latency over `corral serve`'s WebSocket: one `cat` started with a `run` message,
//! then lines typed one at a time; each sample is the time from sending a `stdin` message to the
//! `stdout` message that carries the line back. A pause between lines lets the server settle in
//! its idle state (the program blocked on input), as with a person typing.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

use crate::stats::{Report, Samples};

/// Measures `lines` round trips against `url` (`ws://HOST:PORT/ws`) with `token`.
pub fn measure(url: &str, token: &str, lines: usize, report: &mut Report) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let samples = rt.block_on(echo_round_trips(url, token, lines))?;
    report.summary("ws_echo", &samples);
    Ok(())
}

async fn echo_round_trips(url: &str, token: &str, lines: usize) -> anyhow::Result<Samples> {
    let mut req = url.into_client_request()?;
    req.headers_mut()
        .insert("Authorization", format!("Bearer {token}").parse()?);
    let (mut ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .with_context(|| format!("connecting to {url}"))?;
    let run = json!({"type": "run", "cmd": ["/bin/cat"], "limits": {"wall_time": "60s"}});
    ws.send(Message::text(run.to_string())).await?;
    let mut samples = Samples::with_capacity(lines);
    // Line 0 is not timed: it waits for the sandbox and `cat` to start.
    for i in 0..=lines {
        tokio::time::sleep(Duration::from_millis(30)).await;
        let line = format!("line {i}\n");
        let sent = Instant::now();
        let msg = json!({"type": "stdin", "data": line});
        ws.send(Message::text(msg.to_string())).await?;
        let mut got = String::new();
        while !got.contains(&line) {
            match next_json(&mut ws).await? {
                v if v["type"] == "stdout" => got.push_str(v["data"].as_str().unwrap_or("")),
                v if v["type"] == "exit" || v["type"] == "error" => {
                    bail!("the run ended before echoing line {i}: {v}")
                }
                _ => {} // `stdin` (the program waits for input) and the like
            }
        }
        if i > 0 {
            samples.push(sent.elapsed().as_secs_f64() * 1000.0);
        }
    }
    ws.send(Message::text(
        json!({"type": "stdin", "eof": true}).to_string(),
    ))
    .await?;
    loop {
        let v = next_json(&mut ws).await?;
        if v["type"] == "exit" {
            if v["status"] != "ok" {
                bail!("cat ended with {v}");
            }
            break;
        }
    }
    let _ = ws.close(None).await;
    Ok(samples)
}

async fn next_json<S>(ws: &mut S) -> anyhow::Result<Value>
where
    S: StreamExt<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    let deadline = Duration::from_secs(30);
    loop {
        let msg = tokio::time::timeout(deadline, ws.next())
            .await
            .map_err(|_| anyhow!("no WebSocket message for 30 s"))?
            .ok_or_else(|| anyhow!("the server closed the WebSocket"))??;
        if let Message::Text(t) = msg {
            return Ok(serde_json::from_str(t.as_str())?);
        }
    }
}
