use futures_util::StreamExt;

use super::*;

fn run(first: &[u8], then: Vec<Rendered>) -> Vec<Result<Bytes, String>> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    for m in then {
        let _ = tx.send(m);
    }
    drop(tx);
    let body = body_stream(Some(text::Piece::owned(first.to_vec())), rx, ());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(body.map(|r| r.map_err(|e| e.to_string())).collect())
}

#[test]
fn a_finished_render_ends_the_body_cleanly() {
    let got = run(
        b"head",
        vec![
            Rendered::Piece(text::Piece::owned(b"a".to_vec())),
            Rendered::Done,
        ],
    );
    assert_eq!(got, [Ok(Bytes::from("head")), Ok(Bytes::from("a"))]);
}

#[test]
fn a_render_that_stops_half_way_breaks_the_body() {
    // A panic drops the sender without Done: the body must not end as
    // if complete (a valid partial scrape would make series vanish).
    let got = run(
        b"head",
        vec![Rendered::Piece(text::Piece::owned(b"a".to_vec()))],
    );
    assert_eq!(got.len(), 3);
    assert!(got[2]
        .as_ref()
        .is_err_and(|e| e.contains("stopped before the end")));
}

/// `raw`, a canned answer written straight to a socket (the connection-cap
/// refusal, the plain-HTTP-to-HTTPS answer), is one complete HTTP/1.1
/// response: its body is exactly `Content-Length` bytes.
pub(crate) fn assert_complete_response(raw: &[u8]) {
    let text = std::str::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(body.len(), len, "{text}");
}
