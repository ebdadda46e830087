//! A minimal HTTP/1.1 client for `POST /api/v1/runs`: a request written
//! once, the answer's status and length read by hand (a benchmark's client
//! shares the machine's CPUs with the server it measures).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};

/// POSTs `{"job": job}` on one connection until `next` reaches `n`;
/// every answer must be 201 with a JSON run, which is read to its end.
pub fn post_until(port: u16, job: &str, next: &AtomicUsize, n: usize) {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_nodelay(true).unwrap();
    let body = format!("{{\"job\":\"{job}\"}}");
    let request = format!(
        "POST /api/v1/runs HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    let mut answer = Vec::new();
    while next.fetch_add(1, Ordering::Relaxed) < n {
        writer.write_all(request.as_bytes()).unwrap();
        line.clear();
        reader.read_line(&mut line).unwrap();
        assert!(line.starts_with("HTTP/1.1 201 "), "{line:?}");
        let mut length = None;
        loop {
            line.clear();
            reader.read_line(&mut line).unwrap();
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = Some(value.trim().parse::<usize>().unwrap());
                }
            }
        }
        answer.resize(length.expect("a content-length"), 0);
        reader.read_exact(&mut answer).unwrap();
        assert!(answer.starts_with(b"{") && answer.ends_with(b"}"));
    }
}
