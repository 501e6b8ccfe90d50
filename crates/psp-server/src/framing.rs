//! HTTP/1 request framing, checked on the bytes before hyper reads them.
//!
//! hyper reads a request that has both `Content-Length` and `Transfer-Encoding` by its
//! `Transfer-Encoding` and drops the other header, and its head parser (httparse) takes a bare
//! LF for a line end. Where two receivers read such a request differently, one request can
//! become two (request smuggling); RFC 9112 (sections 2.2 and 6.1) lets a server refuse both,
//! and hyper has no option to. So [`FramingGuard`] sits between the connection and hyper:
//!
//! - it holds each HTTP/1 request head until the blank line that ends it, and refuses a head
//!   with a bare LF, with both framings, over the size limit, or one hyper would refuse
//!   anyway. A refused head never reaches hyper: hyper reads the end of the connection, and
//!   once it has written what it owed, the guard writes a 400 (431 when too large) with the
//!   contract's error body, and closes;
//! - it follows the body by hyper's own rules (`Content-Length`, or chunked as hyper's decoder
//!   reads it, trailers with a bare LF refused too) to know where the next head starts. A body
//!   whose chunked framing breaks is passed to hyper up to the first bad byte, then the
//!   connection ends: hyper answers as it does for a broken body (`request_body_invalid`);
//! - HTTP/2, recognised by its connection preface as hyper does, passes through untouched.
//!
//! The [`Framer`] is the byte-level state machine, with no I/O, so that it can be tested and
//! fuzzed alone; the guard feeds it what it reads.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use http::StatusCode;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::MAX_HEADERS;

/// An HTTP/2 connection starts with these bytes (RFC 9113 section 3.4); hyper's automatic
/// protocol detection compares the same 24.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// hyper's cap on the bytes of chunk extensions in one body (its `CHUNKED_EXTENSIONS_LIMIT`).
const CHUNK_EXTENSION_BYTES: u64 = 16 * 1024;

/// Buffers of the guard larger than this are given back once drained, so that an idle
/// keep-alive connection holds none (10,000 of them are kept open in benches/idle.sh).
const KEEP_BUFFER: usize = 4 * 1024;

/// Why a request was refused before hyper read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub status: StatusCode,
    pub code: &'static str,
    pub title: &'static str,
}

impl Refusal {
    const fn framing(title: &'static str) -> Refusal {
        Refusal {
            status: StatusCode::BAD_REQUEST,
            code: "request_framing_invalid",
            title,
        }
    }

    const fn too_large(title: &'static str) -> Refusal {
        Refusal {
            status: StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            code: "request_head_too_large",
            title,
        }
    }

    /// The whole HTTP/1.1 answer: status, the contract's error body, `Connection: close`.
    pub fn answer(&self, request_id: &str, link_base: &str) -> Vec<u8> {
        let body =
            super::error_body::contract_error_json(request_id, self.code, self.title, link_base);
        let mut out = format!(
            "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncache-control: no-store\r\n\
             x-request-id: {request_id}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
            self.status.as_u16(),
            self.status.canonical_reason().unwrap_or(""),
            body.len()
        )
        .into_bytes();
        out.extend_from_slice(&body);
        out
    }
}

const BARE_LF: Refusal =
    Refusal::framing("a line of the request head ends with LF alone, not CRLF");
const BOTH_FRAMINGS: Refusal =
    Refusal::framing("the request has both Content-Length and Transfer-Encoding");
const TE_NOT_CHUNKED: Refusal =
    Refusal::framing("Transfer-Encoding whose last coding is not chunked");
const TE_IN_HTTP10: Refusal = Refusal::framing("Transfer-Encoding in an HTTP/1.0 request");
const CONTENT_LENGTH_INVALID: Refusal =
    Refusal::framing("Content-Length that is not one decimal number, or two that differ");
const HEAD_TOO_LARGE: Refusal = Refusal::too_large("the request head is over the size limit");
const TOO_MANY_HEADERS: Refusal = Refusal::too_large("the request has more than 100 header lines");

const HEADER_NAME_INVALID: Refusal = Refusal::framing("an invalid byte in a header name");
const HEADER_VALUE_INVALID: Refusal = Refusal::framing("an invalid byte in a header value");
const LINE_END_INVALID: Refusal = Refusal::framing("an invalid line end in the request head");
const TOKEN_INVALID: Refusal = Refusal::framing("an invalid byte in the request line");
const VERSION_INVALID: Refusal = Refusal::framing("an invalid HTTP version");
const REQUEST_LINE_INVALID: Refusal = Refusal::framing("an invalid request line");
/// A fragment is never part of a request (RFC 9110 section 7.1); hyper's URI parser drops it
/// where a proxy in front would forward it, so it is refused here, on every listener. (The
/// authoriser faces, which see the target as their proxy forwards it, refuse it as
/// `path_refused`.)
const FRAGMENT: Refusal = Refusal::framing("the request target contains a `#` fragment");

/// Every refusal the guard can answer, for the documents' tests.
pub const REFUSALS: &[Refusal] = &[
    BARE_LF,
    BOTH_FRAMINGS,
    TE_NOT_CHUNKED,
    TE_IN_HTTP10,
    CONTENT_LENGTH_INVALID,
    HEAD_TOO_LARGE,
    TOO_MANY_HEADERS,
    HEADER_NAME_INVALID,
    HEADER_VALUE_INVALID,
    LINE_END_INVALID,
    TOKEN_INVALID,
    VERSION_INVALID,
    REQUEST_LINE_INVALID,
    FRAGMENT,
];

/// The head could not be parsed: what httparse found.
fn malformed(e: httparse::Error) -> Refusal {
    match e {
        httparse::Error::HeaderName => HEADER_NAME_INVALID,
        httparse::Error::HeaderValue => HEADER_VALUE_INVALID,
        httparse::Error::NewLine => LINE_END_INVALID,
        httparse::Error::Token => TOKEN_INVALID,
        httparse::Error::Version => VERSION_INVALID,
        httparse::Error::Status => REQUEST_LINE_INVALID,
        httparse::Error::TooManyHeaders => TOO_MANY_HEADERS,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// The first bytes of the connection, until they differ from the HTTP/2 preface.
    Preface,
    /// Collecting a request head.
    Head,
    /// This many body bytes (`Content-Length`) before the next head.
    Length(u64),
    /// A chunked body.
    Chunked(Chunk),
    /// HTTP/2: everything goes through.
    Passthrough,
    /// Refused, cut or ended: nothing more goes to hyper.
    Closed,
}

/// Where a chunked body is, as hyper's decoder tracks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    Start,
    Size(u64),
    SizeSpace(u64),
    Extension(u64),
    SizeLf(u64),
    Data(u64),
    DataCr,
    DataLf,
    /// After the last chunk (or a trailer line): a CR ends the body, anything else starts a
    /// trailer line.
    EndCr,
    Trailer,
    TrailerLf,
    EndLf,
}

/// The byte-level state machine: [`Framer::feed`] takes what was read, and what hyper may
/// read comes out of [`Framer::output`].
#[derive(Debug)]
pub struct Framer {
    state: State,
    /// The head being collected (or the preface candidate).
    head: Vec<u8>,
    /// Where the current line of `head` starts.
    line_start: usize,
    /// Where the request line starts (after empty lines sent before it, which RFC 9112
    /// section 2.2 lets a server ignore, as hyper does).
    request_start: usize,
    max_head: usize,
    extension_bytes: u64,
    trailer_bytes: usize,
    trailer_lines: usize,
    ready: BytesMut,
    refusal: Option<Refusal>,
    /// Heads passed on so far: tells one head's deadline from the next's.
    heads: u64,
}

impl Framer {
    /// A framer for one connection; `max_head` is hyper's head buffer limit.
    pub fn new(max_head: usize) -> Framer {
        Framer {
            state: State::Preface,
            head: Vec::new(),
            line_start: 0,
            request_start: 0,
            max_head,
            extension_bytes: 0,
            trailer_bytes: 0,
            trailer_lines: 0,
            ready: BytesMut::new(),
            refusal: None,
            heads: 0,
        }
    }

    /// Bytes hyper may read now.
    pub fn output(&mut self) -> &mut BytesMut {
        &mut self.ready
    }

    /// Gives back the output buffer once hyper has read it all, if it grew large.
    pub fn release_if_drained(&mut self) {
        if self.ready.is_empty() && self.ready.capacity() > KEEP_BUFFER {
            self.ready = BytesMut::new();
        }
    }

    /// Between two messages: waiting for a head (perhaps part collected), nothing passed on
    /// and waiting for hyper.
    fn between_messages(&self) -> bool {
        self.state == State::Head && self.ready.is_empty()
    }

    /// Gives back the buffers that hold nothing now (an idle connection keeps none).
    pub fn release_idle_buffers(&mut self) {
        if self.ready.is_empty() {
            self.ready = BytesMut::new();
        }
        if self.head.is_empty() {
            self.head = Vec::new();
        }
    }

    /// Nothing more will come out: hyper is to read the end of the connection.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed && self.ready.is_empty()
    }

    /// Part of a head (or of the HTTP/2 preface) is held, waiting for the rest.
    fn is_collecting(&self) -> bool {
        matches!(self.state, State::Preface | State::Head) && !self.head.is_empty()
    }

    /// The connection carries HTTP/2: bytes need no inspection.
    fn is_passthrough(&self) -> bool {
        self.state == State::Passthrough
    }

    /// Why a head was refused, once (the answer is written once).
    pub fn take_refusal(&mut self) -> Option<Refusal> {
        self.refusal.take()
    }

    /// The peer closed its side: a partial head is dropped (hyper would not answer it either).
    pub fn end_of_input(&mut self) {
        self.head = Vec::new();
        self.state = State::Closed;
    }

    /// Takes bytes read from the connection.
    pub fn feed(&mut self, mut input: &[u8]) {
        while !input.is_empty() {
            input = match self.state {
                State::Closed => return,
                State::Passthrough => {
                    self.ready.extend_from_slice(input);
                    return;
                }
                State::Preface => self.preface(input),
                State::Head => self.head(input),
                State::Length(n) => {
                    let take = usize::try_from(n).unwrap_or(usize::MAX).min(input.len());
                    self.ready.extend_from_slice(&input[..take]);
                    let left = n - take as u64;
                    self.state = if left == 0 {
                        State::Head
                    } else {
                        State::Length(left)
                    };
                    &input[take..]
                }
                State::Chunked(chunk) => self.chunked(chunk, input),
            };
        }
    }

    fn preface<'a>(&mut self, input: &'a [u8]) -> &'a [u8] {
        let take = (H2_PREFACE.len() - self.head.len()).min(input.len());
        self.head.extend_from_slice(&input[..take]);
        if !H2_PREFACE.starts_with(&self.head) {
            // HTTP/1: what was collected is the start of a head.
            let collected = std::mem::take(&mut self.head);
            self.state = State::Head;
            let rest = self.head(&collected);
            if !rest.is_empty() {
                // The head ended inside the collected bytes: pass the rest through again.
                let rest = rest.to_vec();
                self.feed(&rest);
            }
        } else if self.head.len() == H2_PREFACE.len() {
            self.ready.extend_from_slice(&self.head);
            self.head = Vec::new();
            self.state = State::Passthrough;
        }
        &input[take..]
    }

    /// Collects head bytes up to the blank line; returns what follows the head.
    fn head<'a>(&mut self, input: &'a [u8]) -> &'a [u8] {
        let base = self.head.len();
        let mut from = 0;
        while let Some(at) = memchr::memchr(b'\n', &input[from..]) {
            let i = from + at;
            let pos = base + i;
            let previous = if i > 0 {
                Some(input[i - 1])
            } else {
                self.head.last().copied()
            };
            if previous != Some(b'\r') {
                return self.refuse(BARE_LF);
            }
            if pos + 1 > self.max_head {
                return self.refuse(HEAD_TOO_LARGE);
            }
            if pos + 1 - self.line_start == 2 {
                if self.line_start == self.request_start {
                    // An empty line before the request line.
                    self.request_start = pos + 1;
                } else {
                    self.head.extend_from_slice(&input[..=i]);
                    self.end_of_head();
                    return &input[i + 1..];
                }
            }
            self.line_start = pos + 1;
            from = i + 1;
        }
        if base + input.len() > self.max_head {
            return self.refuse(HEAD_TOO_LARGE);
        }
        self.head.extend_from_slice(input);
        &[]
    }

    /// A complete head is in `self.head`: refuse it, or pass it on and follow its body.
    fn end_of_head(&mut self) {
        let framing = match read_framing(&self.head) {
            Ok(framing) => framing,
            Err(refusal) => {
                self.refuse(refusal);
                return;
            }
        };
        self.ready.extend_from_slice(&self.head);
        self.heads += 1;
        if self.head.capacity() > KEEP_BUFFER {
            self.head = Vec::new();
        } else {
            self.head.clear();
        }
        self.line_start = 0;
        self.request_start = 0;
        self.state = match framing {
            Framing::None | Framing::Length(0) => State::Head,
            Framing::Length(n) => State::Length(n),
            Framing::Chunked => {
                self.extension_bytes = 0;
                self.trailer_bytes = 0;
                self.trailer_lines = 0;
                State::Chunked(Chunk::Start)
            }
        };
    }

    fn refuse<'a>(&mut self, refusal: Refusal) -> &'a [u8] {
        self.refusal = Some(refusal);
        self.head = Vec::new();
        self.state = State::Closed;
        &[]
    }

    /// Follows a chunked body; returns what follows it. A byte hyper's decoder would refuse
    /// is passed on (hyper then fails the body itself) and ends the connection.
    fn chunked<'a>(&mut self, mut chunk: Chunk, input: &'a [u8]) -> &'a [u8] {
        let mut i = 0;
        while i < input.len() {
            if let Chunk::Data(n) = chunk {
                let take = usize::try_from(n)
                    .unwrap_or(usize::MAX)
                    .min(input.len() - i);
                self.ready.extend_from_slice(&input[i..i + take]);
                i += take;
                let left = n - take as u64;
                chunk = if left == 0 {
                    Chunk::DataCr
                } else {
                    Chunk::Data(left)
                };
                continue;
            }
            let b = input[i];
            self.ready.extend_from_slice(&[b]);
            i += 1;
            let digit = hex(b);
            let next = match (chunk, b) {
                (Chunk::Start, _) => digit.map(Chunk::Size),
                (Chunk::Size(n), _) if digit.is_some() => digit
                    .and_then(|d| n.checked_mul(16)?.checked_add(d))
                    .map(Chunk::Size),
                (Chunk::Size(n) | Chunk::SizeSpace(n), b' ' | b'\t') => Some(Chunk::SizeSpace(n)),
                (Chunk::Size(n) | Chunk::SizeSpace(n) | Chunk::Extension(n), b';') => {
                    Some(Chunk::Extension(n))
                }
                (Chunk::Size(n) | Chunk::SizeSpace(n) | Chunk::Extension(n), b'\r') => {
                    Some(Chunk::SizeLf(n))
                }
                (Chunk::Extension(_), b'\n') => None,
                (Chunk::Extension(n), _) => {
                    self.extension_bytes += 1;
                    (self.extension_bytes < CHUNK_EXTENSION_BYTES).then_some(Chunk::Extension(n))
                }
                (Chunk::SizeLf(0), b'\n') => Some(Chunk::EndCr),
                (Chunk::SizeLf(n), b'\n') => Some(Chunk::Data(n)),
                (Chunk::DataCr, b'\r') => Some(Chunk::DataLf),
                (Chunk::DataLf, b'\n') => Some(Chunk::Start),
                (Chunk::EndCr, b'\r') => Some(Chunk::EndLf),
                (Chunk::Trailer, b'\r') => Some(Chunk::TrailerLf),
                // Stricter than hyper, which keeps a bare LF inside the trailer line.
                (Chunk::EndCr | Chunk::Trailer, b'\n') => None,
                (Chunk::EndCr | Chunk::Trailer, _) => {
                    self.trailer_bytes += 1;
                    (self.trailer_bytes <= self.max_head).then_some(Chunk::Trailer)
                }
                (Chunk::TrailerLf, b'\n') => {
                    self.trailer_lines += 1;
                    (self.trailer_lines <= MAX_HEADERS).then_some(Chunk::EndCr)
                }
                (Chunk::EndLf, b'\n') => {
                    self.state = State::Head;
                    return &input[i..];
                }
                _ => None,
            };
            match next {
                Some(next) => chunk = next,
                None => {
                    // hyper reads the bad byte and fails the body; nothing after it is read.
                    self.state = State::Closed;
                    return &[];
                }
            }
        }
        self.state = State::Chunked(chunk);
        &[]
    }
}

/// A hexadecimal digit's value (a chunk size's digits).
fn hex(b: u8) -> Option<u64> {
    char::from(b).to_digit(16).map(u64::from)
}

/// How a request's body is delimited.
#[derive(Debug, PartialEq, Eq)]
enum Framing {
    None,
    Length(u64),
    Chunked,
}

/// Parses a complete head as hyper does (httparse, at most [`MAX_HEADERS`] lines) and reads
/// its body framing by hyper's rules, refusing what hyper refuses and what it would read
/// one way while another receiver reads it another.
fn read_framing(head: &[u8]) -> Result<Framing, Refusal> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(head) {
        Ok(httparse::Status::Complete(n)) if n == head.len() => {}
        // The blank line was found, so httparse cannot want more; refuse rather than guess.
        Ok(_) => return Err(malformed(httparse::Error::NewLine)),
        Err(e) => return Err(malformed(e)),
    }
    if request.path.is_some_and(|target| target.contains('#')) {
        return Err(FRAGMENT);
    }
    let mut transfer_encoding: Option<&[u8]> = None;
    let mut content_length: Option<Result<u64, ()>> = None;
    for header in request.headers.iter() {
        if header.name.eq_ignore_ascii_case("transfer-encoding") {
            transfer_encoding = Some(header.value);
        } else if header.name.eq_ignore_ascii_case("content-length") {
            let n = decimal(header.value).ok_or(());
            content_length = Some(match (content_length, n) {
                (None, n) => n,
                (Some(Ok(previous)), Ok(n)) if previous == n => Ok(n),
                _ => Err(()),
            });
        }
    }
    match (transfer_encoding, content_length) {
        (Some(_), Some(_)) => Err(BOTH_FRAMINGS),
        (Some(_), None) if request.version == Some(0) => Err(TE_IN_HTTP10),
        (Some(last), None) if is_chunked(last) => Ok(Framing::Chunked),
        (Some(_), None) => Err(TE_NOT_CHUNKED),
        (None, Some(Ok(n))) => Ok(Framing::Length(n)),
        (None, Some(Err(()))) => Err(CONTENT_LENGTH_INVALID),
        (None, None) => Ok(Framing::None),
    }
}

/// A `Content-Length` value as hyper reads it: decimal digits only, no sign, no list.
fn decimal(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |n, &b| {
        if b.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

/// hyper's test on the last `Transfer-Encoding` line: visible ASCII, and `chunked` its last
/// coding.
fn is_chunked(value: &[u8]) -> bool {
    let visible = value
        .iter()
        .all(|&b| b == b'\t' || (0x20..0x7f).contains(&b));
    visible
        && std::str::from_utf8(value).is_ok_and(|s| {
            s.rsplit(',')
                .next()
                .is_some_and(|coding| coding.trim().eq_ignore_ascii_case("chunked"))
        })
}

/// The connection as hyper sees it: reads pass through the [`Framer`]; writes go straight
/// to the connection, and a refusal's answer is written when hyper shuts the connection down
/// (after every answer hyper owed, so nothing interleaves; hyper's `half_close` is on so that
/// it finishes them).
///
/// A head is held until complete, so hyper's header-read timeout, which starts when hyper
/// sees a head begin, cannot run for it: the guard keeps the same deadline itself, and a head
/// not complete in time ends the connection without an answer, as hyper does.
pub struct FramingGuard<S> {
    inner: S,
    framer: Framer,
    link_base: std::sync::Arc<str>,
    header_timeout: Duration,
    /// The deadline of the head being collected, and which head it is for.
    deadline: Option<(u64, Pin<Box<tokio::time::Sleep>>)>,
    /// A refusal's answer and how much of it is written.
    answer: Option<(Vec<u8>, usize)>,
}

impl<S> FramingGuard<S> {
    pub fn new(
        inner: S,
        max_head: usize,
        header_timeout: Duration,
        link_base: std::sync::Arc<str>,
    ) -> Self {
        FramingGuard {
            inner,
            framer: Framer::new(max_head),
            link_base,
            header_timeout,
            deadline: None,
            answer: None,
        }
    }

    /// Every byte passed on so far ended a message and none is waiting for hyper: the next
    /// byte hyper reads begins a head (one may be part collected, not yet passed on).
    pub(crate) fn between_messages(&self) -> bool {
        self.framer.between_messages()
    }

    /// Gives back the guard's buffers that hold nothing now: the connection is idle.
    pub(crate) fn release_idle_buffers(&mut self) {
        self.framer.release_idle_buffers();
    }

    /// The connection began with the HTTP/2 preface (known once the first bytes are out).
    pub(crate) fn is_http2(&self) -> bool {
        self.framer.is_passthrough()
    }

    /// Nothing to read now: a held head past its deadline ends the connection.
    fn head_timed_out(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.framer.is_collecting() {
            self.deadline = None;
            return false;
        }
        let head = self.framer.heads;
        if self.deadline.as_ref().is_none_or(|(h, _)| *h != head) {
            self.deadline = Some((head, Box::pin(tokio::time::sleep(self.header_timeout))));
        }
        let Some((_, sleep)) = self.deadline.as_mut() else {
            return false;
        };
        if sleep.as_mut().poll(cx).is_ready() {
            tracing::debug!("request head not complete in time: connection closed");
            self.deadline = None;
            self.framer.end_of_input();
            return true;
        }
        false
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for FramingGuard<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            let ready = this.framer.output();
            if !ready.is_empty() {
                let n = ready.len().min(buf.remaining());
                buf.put_slice(&ready[..n]);
                ready.advance(n);
                this.framer.release_if_drained();
                return Poll::Ready(Ok(()));
            }
            if this.framer.is_closed() {
                if let Some(refusal) = this.framer.take_refusal() {
                    let id = super::new_request_id();
                    tracing::debug!(code = refusal.code, title = refusal.title, request_id = %id,
                        "request refused before hyper read it");
                    this.answer = Some((refusal.answer(&id, &this.link_base), 0));
                }
                return Poll::Ready(Ok(()));
            }
            if this.framer.is_passthrough() {
                return Pin::new(&mut this.inner).poll_read(cx, buf);
            }
            // Read into hyper's own buffer (no buffer of the guard's stays with an idle
            // connection), then take the bytes back out for the framer to judge.
            let before = buf.filled().len();
            match Pin::new(&mut this.inner).poll_read(cx, buf) {
                Poll::Pending if this.head_timed_out(cx) => continue,
                Poll::Pending => return Poll::Pending,
                Poll::Ready(result) => result?,
            }
            if buf.filled().len() == before {
                this.framer.end_of_input();
            } else {
                this.framer.feed(&buf.filled()[before..]);
                buf.set_filled(before);
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for FramingGuard<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some((answer, written)) = &mut this.answer {
            ready!(crate::poll_write_rest(&mut this.inner, cx, answer, written))?;
            ready!(Pin::new(&mut this.inner).poll_flush(cx))?;
            this.answer = None;
        }
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: usize = 64 * 1024;

    /// Feeds `input` in pieces of `step` bytes; what hyper would read, and the refusal.
    fn run(input: &[u8], step: usize) -> (Vec<u8>, Option<Refusal>, bool) {
        let mut f = Framer::new(LIMIT);
        for piece in input.chunks(step.max(1)) {
            f.feed(piece);
        }
        let out = f.output().split().to_vec();
        let closed = f.state == State::Closed;
        (out, f.take_refusal(), closed)
    }

    /// The same outcome whatever the read sizes.
    fn every_step(input: &[u8]) -> (Vec<u8>, Option<Refusal>, bool) {
        let whole = run(input, input.len());
        for step in [1, 2, 3, 7, 64] {
            assert_eq!(run(input, step), whole, "step {step}: {input:?}");
        }
        whole
    }

    #[test]
    fn plain_requests_pass_through_whole_and_pipelined() {
        let two = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /c HTTP/1.1\r\nHost: x\r\n\r\n";
        let (out, refusal, closed) = every_step(two);
        assert_eq!(out, two.to_vec());
        assert_eq!(refusal, None);
        assert!(!closed);
    }

    #[test]
    fn a_chunked_body_with_extensions_and_trailers_passes_and_the_next_head_is_read() {
        let input = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5;a=b\r\nhello\r\n6 \r\n world\r\n0\r\nX-T: 1\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n";
        let (out, refusal, _) = every_step(input);
        assert_eq!(out, input.to_vec());
        assert_eq!(refusal, None);
    }

    #[test]
    fn a_fragment_in_the_request_target_is_refused_with_the_path_code() {
        for target in [
            "/v1/accounts#/../../v1/payments",
            "/v1/accounts?x=1#y",
            "/#",
        ] {
            let input = format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n");
            let (out, refusal, closed) = every_step(input.as_bytes());
            assert_eq!(
                (out, refusal, closed),
                (Vec::new(), Some(FRAGMENT), true),
                "{target}"
            );
            assert_eq!(FRAGMENT.code, "request_framing_invalid");
        }
        // `%23` is an encoded character of the path, not a fragment.
        let input = b"GET /v1/a%23b HTTP/1.1\r\nHost: x\r\n\r\n";
        assert_eq!(every_step(input).1, None);
    }

    #[test]
    fn leading_empty_lines_are_allowed_as_hyper_allows_them() {
        let input = b"\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n";
        let (out, refusal, _) = every_step(input);
        assert_eq!((out, refusal), (input.to_vec(), None));
    }

    #[test]
    fn the_http2_preface_passes_untouched() {
        let mut input = H2_PREFACE.to_vec();
        input.extend_from_slice(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00 anything \n\n");
        let (out, refusal, closed) = every_step(&input);
        assert_eq!((out, refusal, closed), (input, None, false));
    }

    #[test]
    fn ambiguous_or_malformed_heads_are_refused_and_nothing_of_them_is_passed() {
        let cases: [(&[u8], Refusal); 9] = [
            (b"GET / HTTP/1.1\nHost: x\r\n\r\n", BARE_LF),
            (b"GET / HTTP/1.1\r\nHost: x\n\r\n", BARE_LF),
            (b"GET / HTTP/1.1\r\nHost: x\r\n\n", BARE_LF),
            (
                b"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
                BOTH_FRAMINGS,
            ),
            (
                b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
                BOTH_FRAMINGS,
            ),
            (
                b"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
                CONTENT_LENGTH_INVALID,
            ),
            (
                b"POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n",
                CONTENT_LENGTH_INVALID,
            ),
            (
                b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
                TE_NOT_CHUNKED,
            ),
            (
                b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
                TE_IN_HTTP10,
            ),
        ];
        for (input, expected) in cases {
            let (out, refusal, closed) = every_step(input);
            assert_eq!(
                refusal,
                Some(expected),
                "{}",
                String::from_utf8_lossy(input)
            );
            assert!(
                out.is_empty() && closed,
                "{}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn a_refused_head_after_a_good_one_stops_after_the_good_one() {
        let good = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        let mut input = good.to_vec();
        input.extend_from_slice(b"GET /smuggled HTTP/1.1\nHost: x\r\n\r\n");
        let (out, refusal, _) = every_step(&input);
        assert_eq!((out, refusal), (good.to_vec(), Some(BARE_LF)));
    }

    #[test]
    fn a_head_is_refused_at_the_limit_plus_one_byte_and_accepted_at_the_limit() {
        let head = |len: usize| {
            let start = b"GET / HTTP/1.1\r\nX: ";
            let mut h = start.to_vec();
            h.resize(len - 4, b'a');
            h.extend_from_slice(b"\r\n\r\n");
            h
        };
        let (out, refusal, _) = run(&head(LIMIT), 4096);
        assert_eq!((out.len(), refusal), (LIMIT, None));
        let (out, refusal, _) = run(&head(LIMIT + 1), 4096);
        assert_eq!((out.len(), refusal), (0, Some(HEAD_TOO_LARGE)));
        // No line end at all: refused once past the limit, not buffered for ever.
        let (_, refusal, _) = run(&vec![b'a'; LIMIT + 1], 4096);
        assert_eq!(refusal, Some(HEAD_TOO_LARGE));
    }

    #[test]
    fn more_than_a_hundred_header_lines_are_too_many() {
        let mut input = b"GET / HTTP/1.1\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            input.extend_from_slice(format!("x-{i}: v\r\n").as_bytes());
        }
        input.extend_from_slice(b"\r\n");
        assert_eq!(run(&input, 512).1, Some(TOO_MANY_HEADERS));
    }

    #[test]
    fn a_broken_chunked_body_is_passed_to_its_first_bad_byte_then_ends() {
        let head = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for (body, passed) in [
            (&b"5\nhello\r\n0\r\n\r\nGET /smuggled"[..], 2),
            (b"5\r\nhelloXX0\r\n\r\nGET /smuggled", 9),
            (b"1ffffffffffffffff0\r\nx", 17),
            (b"0\r\nX-T: 1\nGET /smuggled HTTP/1.1\r\n\r\n", 10),
            (b"5;ext\nhello", 6),
        ] {
            let mut input = head.clone();
            input.extend_from_slice(body);
            let (out, refusal, closed) = every_step(&input);
            assert_eq!(refusal, None, "a body error has no answer of its own");
            assert!(closed);
            assert_eq!(
                out,
                input[..head.len() + passed].to_vec(),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    /// Requests built from pieces that matter to framing, and some that break it.
    fn requestish() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let pieces: Vec<&'static [u8]> = vec![
            b"GET / HTTP/1.1",
            b"POST /a HTTP/1.0",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            b"\r\n",
            b"\n",
            b"\r",
            b"Host: x",
            b"Content-Length: 3",
            b"Content-Length: 0",
            b"Transfer-Encoding: chunked",
            b"Transfer-Encoding: gzip",
            b"0",
            b"5",
            b"abc",
            b";ext=1",
            b" ",
            b":",
            b"X-T: 1",
        ];
        proptest::collection::vec(proptest::sample::select(pieces), 0..48).prop_map(|p| p.concat())
    }

    proptest::proptest! {
        /// hyper only ever reads a prefix of what the client sent (the guard never rewrites
        /// or reorders), and the read sizes do not change the outcome.
        #[test]
        fn hyper_reads_a_prefix_of_the_input_whatever_the_read_sizes(
            input in requestish(),
            step in 1usize..32,
        ) {
            let whole = run(&input, input.len());
            proptest::prop_assert!(input.starts_with(&whole.0));
            proptest::prop_assert_eq!(run(&input, step), whole);
        }

        #[test]
        fn arbitrary_bytes_give_a_prefix_too(
            input in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256),
            step in 1usize..32,
        ) {
            let whole = run(&input, input.len());
            proptest::prop_assert!(input.starts_with(&whole.0));
            proptest::prop_assert_eq!(run(&input, step), whole);
        }
    }

    #[test]
    fn the_answer_is_one_http_response_with_the_contract_body() {
        let answer = BOTH_FRAMINGS.answer("id-1", "/docs/errors#");
        let text = String::from_utf8(answer).expect("text");
        let (head, body) = text.split_once("\r\n\r\n").expect("head");
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        assert!(head.contains("connection: close"), "{head}");
        let json: serde_json::Value = serde_json::from_str(body).expect("json");
        assert_eq!(json["errors"][0]["code"], "request_framing_invalid");
        assert_eq!(json["errors"][0]["id"], "id-1");
        assert_eq!(
            json["errors"][0]["link"],
            "/docs/errors#request_framing_invalid"
        );
    }
}
