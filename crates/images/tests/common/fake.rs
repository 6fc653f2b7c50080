//! A hostile registry for tests: a plain-HTTP server on loopback whose every answer a test's
//! handler writes by hand (one request per connection, each on its own thread), remembering the
//! requests it was sent.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// One request as it came: its target and its headers (names lowercase).
#[derive(Clone, Debug)]
pub struct Request {
    pub path: String,
    pub headers: Vec<(String, String)>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

pub struct Fake {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    pub requests: Arc<Mutex<Vec<Request>>>,
}

impl Fake {
    /// The requests so far.
    pub fn seen(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

type Handler = dyn Fn(&Request, &mut TcpStream) + Send + Sync;

/// Starts a server answering each request with `handler`.
pub fn start_fake(handler: impl Fn(&Request, &mut TcpStream) + Send + Sync + 'static) -> Fake {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    let handler: Arc<Handler> = Arc::new(handler);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let handler = handler.clone();
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                let mut headers = Vec::new();
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                        break;
                    }
                    if let Some((k, v)) = h.split_once(':') {
                        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
                    }
                }
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                let req = Request { path, headers };
                seen.lock().unwrap().push(req.clone());
                handler(&req, &mut conn);
            });
        }
    });
    Fake { addr, requests }
}

/// Writes a whole answer (`status` as in "200 OK") and closes the connection.
pub fn respond(s: &mut TcpStream, status: &str, headers: &[(&str, &str)], body: &[u8]) {
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(body);
}

/// Writes an answer whose body never ends (no length: it would end when the connection closes),
/// until the client hangs up.
pub fn endless(s: &mut TcpStream, status: &str, headers: &[(&str, &str)]) {
    let mut head = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    if s.write_all(head.as_bytes()).is_err() {
        return;
    }
    let chunk = vec![b'a'; 64 << 10];
    while s.write_all(&chunk).is_ok() {}
}
