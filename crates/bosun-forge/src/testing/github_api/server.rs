//! The fake's HTTP/1.1 server: std's sockets, one thread per connection,
//! keep-alive, `Content-Length` and chunked bodies. Written here on
//! `httparse` rather than taken from a server crate because "down" must
//! close every connection unanswered, new and kept-alive alike, and come
//! back on the same port, which the small synchronous server crates do not
//! offer. (The port stays bound while down: closing it and binding it again
//! can fail, when the system has given the port to another socket
//! meanwhile.)

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// A request as read off the connection.
pub(super) struct Incoming {
    pub method: String,
    /// The request target: path and query.
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Incoming {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// An answer to write back.
pub(super) struct Outgoing {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

type Handler = Arc<dyn Fn(Incoming) -> Outgoing + Send + Sync>;

/// Headers past this size are refused (400), as any server caps them.
const MAX_HEAD: usize = 64 * 1024;

/// An idle kept-alive connection is closed after this long.
const IDLE: Duration = Duration::from_secs(10);

struct Control {
    addr: SocketAddr,
    /// Down: connections are closed without an answer.
    down: AtomicBool,
    /// Stopped (dropped): the accept loop ends.
    stopped: AtomicBool,
    handler: Handler,
    accept: Mutex<Option<JoinHandle<()>>>,
}

/// A running server; stopped when dropped.
pub(super) struct Server {
    control: Arc<Control>,
}

impl Server {
    /// Serves `handler` on 127.0.0.1, a port of the system's choosing.
    pub fn start(handler: Handler) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let control = Arc::new(Control {
            addr: listener.local_addr().unwrap(),
            down: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            handler,
            accept: Mutex::new(None),
        });
        *control.accept.lock().unwrap() = Some(accept_loop(listener, control.clone()));
        Server { control }
    }

    /// The address served.
    pub fn addr(&self) -> SocketAddr {
        self.control.addr
    }

    /// Down: every connection, new or kept alive, is closed at its next
    /// request without an answer (the client sees the connection end, as
    /// with a forge that cannot be reached); up: answered again.
    pub fn set_down(&self, down: bool) {
        self.control.down.store(down, Ordering::SeqCst);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.control.down.store(true, Ordering::SeqCst);
        self.control.stopped.store(true, Ordering::SeqCst);
        if let Some(handle) = self
            .control
            .accept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            // The accept loop sees `stopped` once it accepts: this
            // connection wakes it.
            let _ = TcpStream::connect(self.control.addr);
            let _ = handle.join();
        }
    }
}

fn accept_loop(listener: TcpListener, control: Arc<Control>) -> JoinHandle<()> {
    thread::spawn(move || {
        for stream in listener.incoming() {
            if control.stopped.load(Ordering::SeqCst) {
                return;
            }
            let Ok(stream) = stream else { continue };
            if control.down.load(Ordering::SeqCst) {
                let _ = stream.shutdown(Shutdown::Both);
                continue;
            }
            let control = control.clone();
            thread::spawn(move || serve(stream, &control));
        }
    })
}

/// Answers the requests of one connection until it closes, idles out, or
/// the server goes down.
fn serve(stream: TcpStream, control: &Control) {
    let _ = stream.set_read_timeout(Some(IDLE));
    let _ = stream.set_nodelay(true);
    let mut conn = Connection {
        stream,
        buf: Vec::new(),
    };
    loop {
        let request = match conn.next() {
            Ok(Some(request)) => request,
            Ok(None) => return,
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                let _ = conn.write(&Outgoing {
                    status: 400,
                    headers: vec![("Connection".into(), "close".into())],
                    body: b"Bad Request".to_vec(),
                });
                return;
            }
            Err(_) => return,
        };
        if control.down.load(Ordering::SeqCst) {
            let _ = conn.stream.shutdown(Shutdown::Both);
            return;
        }
        let close = request
            .header("connection")
            .is_some_and(|c| c.eq_ignore_ascii_case("close"));
        let answer = (control.handler)(request);
        if conn.write(&answer).is_err() || close {
            return;
        }
    }
}

struct Connection {
    stream: TcpStream,
    /// Bytes read past the last request.
    buf: Vec<u8>,
}

impl Connection {
    /// The next request, `None` at the end of the connection.
    fn next(&mut self) -> io::Result<Option<Incoming>> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut parsed = httparse::Request::new(&mut headers);
            let invalid = |e: String| io::Error::new(io::ErrorKind::InvalidData, e);
            match parsed
                .parse(&self.buf)
                .map_err(|e| invalid(e.to_string()))?
            {
                httparse::Status::Complete(head) => {
                    let method = parsed.method.unwrap_or_default().to_owned();
                    let target = parsed.path.unwrap_or_default().to_owned();
                    let headers: Vec<(String, String)> = parsed
                        .headers
                        .iter()
                        .map(|h| {
                            (
                                h.name.to_owned(),
                                String::from_utf8_lossy(h.value).into_owned(),
                            )
                        })
                        .collect();
                    let find = |name: &str| {
                        headers
                            .iter()
                            .find(|(n, _)| n.eq_ignore_ascii_case(name))
                            .map(|(_, v)| v.clone())
                    };
                    let body = if find("transfer-encoding")
                        .is_some_and(|t| t.to_ascii_lowercase().contains("chunked"))
                    {
                        let rest = self.buf.split_off(head);
                        self.buf.clear();
                        let mut body = Vec::new();
                        chunked_transfer::Decoder::new(io::Cursor::new(rest).chain(&self.stream))
                            .read_to_end(&mut body)?;
                        body
                    } else {
                        let length: usize = match find("content-length") {
                            Some(l) => l.trim().parse().map_err(|_| invalid(l))?,
                            None => 0,
                        };
                        while self.buf.len() < head + length {
                            if self.fill()? == 0 {
                                return Ok(None);
                            }
                        }
                        let body = self.buf[head..head + length].to_vec();
                        self.buf.drain(..head + length);
                        body
                    };
                    return Ok(Some(Incoming {
                        method,
                        target,
                        headers,
                        body,
                    }));
                }
                httparse::Status::Partial => {
                    if self.buf.len() > MAX_HEAD {
                        return Err(invalid("headers too large".into()));
                    }
                    if self.fill()? == 0 {
                        return Ok(None);
                    }
                }
            }
        }
    }

    fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0; 16 * 1024];
        let n = self.stream.read(&mut chunk)?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    fn write(&mut self, answer: &Outgoing) -> io::Result<()> {
        let reason = http::StatusCode::from_u16(answer.status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("");
        let mut head = format!("HTTP/1.1 {} {reason}\r\n", answer.status);
        for (name, value) in &answer.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", answer.body.len()));
        // One write: two would wait on Nagle's algorithm and the client's
        // delayed ACK (40 ms a request).
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&answer.body);
        self.stream.write_all(&bytes)?;
        self.stream.flush()
    }
}
