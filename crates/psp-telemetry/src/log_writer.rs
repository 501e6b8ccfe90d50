//! The writer of `serve`'s JSON log lines: request threads append each formatted line to a
//! buffer, and a thread of its own writes the buffer out every [`FLUSH_INTERVAL`], or as soon
//! as it holds [`WAKE_AT`] bytes.
//!
//! The thread is woken by the clock, or by the line that crosses [`WAKE_AT`], not by every
//! line: under load, one `write` carries hundreds of lines and the request threads make no
//! system call for them. (The channel of `tracing-appender` it replaces woke its thread at
//! nearly every line; `strace` counted 0.7 `write`, 1 `sched_yield` and 0.4 `futex` calls per
//! gateway request for it.) No line is dropped: a buffer holding [`MAX_PENDING`] bytes makes
//! the writing thread wait until the writer has taken it, so memory stays bounded when the
//! output cannot keep up. Dropping the [`LogWriterGuard`] writes what is pending and stops
//! the thread.
//!
//! [`spawn`] takes formatted lines; [`spawn_formatting`] takes records that its thread
//! formats before writing them ([`super::json_lines`]: the JSON lines of `serve`, so that
//! formatting is off the request path).

use std::io::{self, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a line waits, at most, before the writer writes it (when the output keeps up).
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(10);
/// Pending bytes that wake the writer before its interval ends: above what the interval
/// gathers at 1,000 lines of 1 KB a millisecond (the endpoint's audit lines at 50,000 a
/// second fill 430 KB), so that under load the writer wakes by its clock, 100 times a
/// second, not every 75 lines as it did at 64 KiB.
pub const WAKE_AT: usize = 1024 * 1024;
/// The buffers' capacity at the start, and what they are given back down to after a burst.
const START_CAPACITY: usize = 64 * 1024;
/// Pending bytes at which a line waits for the writer: the most memory the lines hold.
pub const MAX_PENDING: usize = 8 * 1024 * 1024;

struct Pending {
    bytes: Vec<u8>,
    /// Set by the guard's drop: write what is pending and stop.
    closing: bool,
    /// What the writer is waiting for: a line only wakes it when it waits for one, so that
    /// lines make no system call while it writes or gathers.
    writer: Writer,
    /// Threads waiting for room ([`MAX_PENDING`]).
    waiting_for_room: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Writer {
    /// Writing, or about to take the lock: it looks at the buffer before it waits.
    Busy,
    /// Asleep until a line comes.
    AwaitingLine,
    /// Letting the lines of one interval gather, until [`WAKE_AT`] bytes.
    Gathering,
}

struct Shared {
    pending: Mutex<Pending>,
    /// Signalled when pending bytes cross [`WAKE_AT`], and on closing.
    wake: Condvar,
    /// Signalled when the writer has taken the pending bytes.
    taken: Condvar,
    /// Lines that woke the writer.
    #[cfg(test)]
    woken_by_lines: std::sync::atomic::AtomicUsize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Where request threads put their lines ([`tracing_subscriber::fmt::MakeWriter`]).
#[derive(Clone)]
pub struct LogWriter {
    shared: Arc<Shared>,
}

/// Keeps the writer thread; dropping it writes what is pending, then stops the thread.
#[must_use = "dropping the guard stops the log writer"]
pub struct LogWriterGuard {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// Turns the records taken from the buffer (whole records, as appended) into the bytes
/// written; runs on the writer's thread.
pub type Format = fn(records: &[u8], out: &mut Vec<u8>);

/// A writer of lines to `out`, and the guard of its thread (named `name`).
pub fn spawn<W: Write + Send + 'static>(
    name: &str,
    out: W,
) -> io::Result<(LogWriter, LogWriterGuard)> {
    spawn_with(name, out, None)
}

/// A writer of records to `out` that its thread turns into lines with `format` before
/// writing them; what [`spawn`] says of memory and waiting holds for the records' bytes.
pub fn spawn_formatting<W: Write + Send + 'static>(
    name: &str,
    out: W,
    format: Format,
) -> io::Result<(LogWriter, LogWriterGuard)> {
    spawn_with(name, out, Some(format))
}

fn spawn_with<W: Write + Send + 'static>(
    name: &str,
    out: W,
    format: Option<Format>,
) -> io::Result<(LogWriter, LogWriterGuard)> {
    let shared = Arc::new(Shared {
        pending: Mutex::new(Pending {
            bytes: Vec::with_capacity(START_CAPACITY),
            closing: false,
            writer: Writer::Busy,
            waiting_for_room: 0,
        }),
        wake: Condvar::new(),
        taken: Condvar::new(),
        #[cfg(test)]
        woken_by_lines: std::sync::atomic::AtomicUsize::new(0),
    });
    let thread = {
        let shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || write_out(&shared, out, format))?
    };
    Ok((
        LogWriter {
            shared: Arc::clone(&shared),
        },
        LogWriterGuard {
            shared,
            thread: Some(thread),
        },
    ))
}

/// The writer thread: sleeps until a line comes, lets the lines of one interval gather (or
/// [`WAKE_AT`] bytes), takes them and writes them with one call, outside the lock. A failed
/// write is reported on stderr, once per failing run, and the lines of that write are lost
/// (there is nowhere else to put them). An idle writer sleeps without waking. With `format`,
/// the bytes taken are records, formatted here before the write.
fn write_out<W: Write>(shared: &Shared, mut out: W, format: Option<Format>) {
    let mut spare = Vec::with_capacity(START_CAPACITY);
    let mut formatted = Vec::new();
    let mut failing = false;
    loop {
        {
            let mut pending = shared.lock();
            while pending.bytes.is_empty() && !pending.closing {
                pending.writer = Writer::AwaitingLine;
                pending = shared.wake.wait(pending).unwrap_or_else(|p| p.into_inner());
            }
            if pending.bytes.len() < WAKE_AT && !pending.closing {
                pending.writer = Writer::Gathering;
                pending = shared
                    .wake
                    .wait_timeout(pending, FLUSH_INTERVAL)
                    .map(|(guard, _)| guard)
                    .unwrap_or_else(|p| p.into_inner().0);
            }
            pending.writer = Writer::Busy;
            std::mem::swap(&mut pending.bytes, &mut spare);
            if pending.waiting_for_room > 0 {
                shared.taken.notify_all();
            }
        }
        if spare.is_empty() {
            // Only when closing (the waits end on a line or on closing): nothing came since
            // the last write.
            return;
        }
        let bytes = match format {
            None => &spare,
            Some(format) => {
                formatted.clear();
                format(&spare, &mut formatted);
                &formatted
            }
        };
        match out.write_all(bytes).and_then(|()| out.flush()) {
            Ok(()) => failing = false,
            Err(e) if !failing => {
                failing = true;
                // Best effort, and never a panic (eprintln! panics when stderr fails, which
                // would leave the request threads waiting for a writer that is gone).
                let _ = writeln!(io::stderr(), "psp-gateway: cannot write log lines: {e}");
            }
            Err(_) => {}
        }
        spare.clear();
        // A burst grew the buffers: give them back.
        if spare.capacity() > 2 * WAKE_AT {
            spare = Vec::with_capacity(START_CAPACITY);
        }
        if formatted.capacity() > 4 * WAKE_AT {
            formatted = Vec::new();
        }
    }
}

impl LogWriter {
    /// Appends one line (or one record, for a formatting writer), whole.
    pub(super) fn append(&self, line: &[u8]) {
        let mut pending = self.shared.lock();
        while pending.bytes.len() >= MAX_PENDING && !pending.closing {
            self.shared.wake.notify_one();
            pending.waiting_for_room += 1;
            pending = self
                .shared
                .taken
                .wait(pending)
                .unwrap_or_else(|p| p.into_inner());
            pending.waiting_for_room -= 1;
        }
        let before = pending.bytes.len();
        pending.bytes.extend_from_slice(line);
        // A line wakes the sleeping writer, which then gathers for an interval; the line
        // crossing WAKE_AT ends the gathering early. A writer that is busy is not woken (it
        // looks at the buffer before it sleeps): no system call.
        let wake = match pending.writer {
            Writer::AwaitingLine => true,
            Writer::Gathering => before < WAKE_AT && pending.bytes.len() >= WAKE_AT,
            Writer::Busy => false,
        };
        if wake {
            pending.writer = Writer::Busy;
            self.shared.wake.notify_one();
            #[cfg(test)]
            self.shared
                .woken_by_lines
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.append(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;
    fn make_writer(&'a self) -> LogWriter {
        self.clone()
    }
}

impl Drop for LogWriterGuard {
    fn drop(&mut self) {
        self.shared.lock().closing = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// An output that keeps what it is given, counts its writes, and can be made slow.
    #[derive(Clone, Default)]
    struct Out {
        bytes: Arc<Mutex<Vec<u8>>>,
        writes: Arc<std::sync::atomic::AtomicUsize>,
        delay: Duration,
    }

    impl Write for Out {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            std::thread::sleep(self.delay);
            self.writes
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.bytes.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn line(i: usize) -> Vec<u8> {
        format!("{{\"n\":{i},\"pad\":\"{}\"}}\n", "x".repeat(i % 200)).into_bytes()
    }

    #[test]
    fn every_line_from_every_thread_is_written_whole_in_few_writes() {
        let out = Out::default();
        let (writer, guard) = spawn("test-log", out.clone()).expect("thread");
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let mut w = writer.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000 {
                        w.write_all(&line(t * 100_000 + i)).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        drop(guard);
        let bytes = out.bytes.lock().unwrap().clone();
        let text = String::from_utf8(bytes).expect("whole lines");
        let mut got: Vec<usize> = text
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("a whole line");
                v["n"].as_u64().unwrap() as usize
            })
            .collect();
        got.sort_unstable();
        let mut want: Vec<usize> = (0..4)
            .flat_map(|t| (0..20_000).map(move |i| t * 100_000 + i))
            .collect();
        want.sort_unstable();
        assert_eq!(got, want);
        let writes = out.writes.load(std::sync::atomic::Ordering::Relaxed);
        assert!(writes < 80_000 / 10, "{writes} writes for 80,000 lines");
    }

    /// A line wakes the writer only when it sleeps, or to end its gathering at WAKE_AT; never
    /// while it writes (each wake is a system call on the request path). The output takes
    /// 20 ms a write and the lines come faster than that, so the writer finds lines waiting
    /// after each write and is almost never asleep when one comes: the old rule (a wake for
    /// the first line after each write, busy or not) woke it twice a write.
    #[test]
    fn lines_do_not_wake_a_busy_writer() {
        let out = Out {
            delay: Duration::from_millis(20),
            ..Out::default()
        };
        let (mut writer, guard) = spawn("test-log", out.clone()).expect("thread");
        let line = [b'x'; 1000];
        let start = Instant::now();
        let mut lines = 0;
        while start.elapsed() < Duration::from_millis(500) {
            writer.write_all(&line).unwrap();
            lines += 1;
            if lines % 50 == 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        let woken = writer
            .shared
            .woken_by_lines
            .load(std::sync::atomic::Ordering::Relaxed);
        drop(guard);
        let writes = out.writes.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(out.bytes.lock().unwrap().len(), lines * 1000);
        assert!(
            woken <= writes / 2 + 1,
            "{woken} wakes for {writes} writes of {lines} lines"
        );
        assert!(writes < lines / 10, "{writes} writes for {lines} lines");
    }

    #[test]
    fn a_quiet_line_is_written_within_the_interval_and_the_rest_at_drop() {
        let out = Out::default();
        let (mut writer, guard) = spawn("test-log", out.clone()).expect("thread");
        writer.write_all(b"one\n").unwrap();
        let start = Instant::now();
        while out.bytes.lock().unwrap().is_empty() {
            assert!(start.elapsed() < Duration::from_secs(5), "never written");
            std::thread::sleep(Duration::from_millis(1));
        }
        writer.write_all(b"two\n").unwrap();
        drop(guard);
        assert_eq!(&*out.bytes.lock().unwrap(), b"one\ntwo\n");
    }

    #[test]
    fn a_slow_output_makes_writers_wait_and_bounds_the_memory_held() {
        // Each write of the output takes 50 ms; the threads write 40 MiB. The pending bytes
        // never pass MAX_PENDING plus one line: the writers waited, and nothing was dropped.
        let out = Out {
            delay: Duration::from_millis(50),
            ..Out::default()
        };
        let (writer, guard) = spawn("test-log", out.clone()).expect("thread");
        let mut chunk = vec![b'x'; 64 * 1024 - 1];
        chunk.push(b'\n');
        let peak = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (mut w, chunk, peak) = (writer.clone(), chunk.clone(), Arc::clone(&peak));
                std::thread::spawn(move || {
                    for _ in 0..320 {
                        w.write_all(&chunk).unwrap();
                        let held = w.shared.lock().bytes.len();
                        peak.fetch_max(held, std::sync::atomic::Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        drop(guard);
        let peak = peak.load(std::sync::atomic::Ordering::Relaxed);
        assert!(peak <= MAX_PENDING + 64 * 1024, "{peak} bytes held");
        assert!(peak >= MAX_PENDING, "the writers never had to wait: {peak}");
        assert_eq!(out.bytes.lock().unwrap().len(), 2 * 320 * 64 * 1024);
    }
}
