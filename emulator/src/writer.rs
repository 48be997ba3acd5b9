//! Output files written by a background thread, so a slow disk never stalls
//! the event loop (a buffered writer's `write(2)` of a full buffer can block
//! for milliseconds, which would make every packet due meanwhile late).
//!
//! The loop appends to an in-memory buffer; a full buffer is handed to the
//! writer thread through a channel and an empty one is taken back from a
//! small set that circulates between the two. `flush` hands over what is
//! buffered and waits until the thread has written it (SIGUSR1, exit).

use std::fs::File;
use std::io::{self, Write};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

const BUFFER_BYTES: usize = 1 << 20;
const BUFFERS: usize = 8;

enum Msg {
    Data(Vec<u8>),
    Flush(Sender<io::Result<()>>),
}

pub struct BackgroundWriter {
    buf: Vec<u8>,
    to_thread: Option<Sender<Msg>>,
    empties: Receiver<Vec<u8>>,
    thread: Option<JoinHandle<()>>,
    error: Option<io::Error>,
}

impl BackgroundWriter {
    pub fn new(mut file: File) -> BackgroundWriter {
        let (to_thread, rx) = channel::<Msg>();
        let (give_back, empties) = channel::<Vec<u8>>();
        for _ in 0..BUFFERS - 1 {
            let _ = give_back.send(Vec::with_capacity(BUFFER_BYTES));
        }
        let thread = std::thread::Builder::new()
            .name("tdl-writer".into())
            .spawn(move || {
                let mut failed: Option<io::Error> = None;
                for msg in rx {
                    match msg {
                        Msg::Data(mut b) => {
                            if failed.is_none() {
                                if let Err(e) = file.write_all(&b) {
                                    failed = Some(e);
                                }
                            }
                            b.clear();
                            let _ = give_back.send(b);
                        }
                        Msg::Flush(reply) => {
                            let r = match &failed {
                                Some(e) => Err(io::Error::new(e.kind(), e.to_string())),
                                None => file.flush(),
                            };
                            let _ = reply.send(r);
                        }
                    }
                }
            })
            .expect("spawn writer thread");
        BackgroundWriter {
            buf: Vec::with_capacity(BUFFER_BYTES),
            to_thread: Some(to_thread),
            empties,
            thread: Some(thread),
            error: None,
        }
    }

    fn hand_over(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        // Take an empty buffer; if all are in flight, wait for one (the disk is slower
        // than the traffic: block rather than grow without bound).
        let fresh = self.empties.recv().unwrap_or_else(|_| Vec::with_capacity(BUFFER_BYTES));
        let full = std::mem::replace(&mut self.buf, fresh);
        if let Some(tx) = &self.to_thread {
            let _ = tx.send(Msg::Data(full));
        }
    }
}

impl Write for BackgroundWriter {
    #[inline]
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.buf.len() + data.len() > BUFFER_BYTES {
            self.hand_over();
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.hand_over();
        if let Some(e) = &self.error {
            return Err(io::Error::new(e.kind(), e.to_string()));
        }
        let (tx, rx) = channel();
        if let Some(t) = &self.to_thread {
            let _ = t.send(Msg::Flush(tx));
        }
        match rx.recv() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                self.error = Some(io::Error::new(e.kind(), e.to_string()));
                Err(e)
            }
            Err(_) => Err(io::Error::other("writer thread is gone")),
        }
    }
}

impl Drop for BackgroundWriter {
    fn drop(&mut self) {
        let _ = self.flush();
        self.to_thread.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_written_reaches_the_file_in_order() {
        let path = std::env::temp_dir().join(format!("tdl-writer-{}", std::process::id()));
        {
            let mut w = BackgroundWriter::new(File::create(&path).unwrap());
            for i in 0..400_000u32 {
                writeln!(w, "{i}").unwrap();
            }
            w.flush().unwrap();
            let partial = std::fs::read_to_string(&path).unwrap();
            assert_eq!(partial.lines().count(), 400_000);
            write!(w, "tail").unwrap();
        } // drop flushes
        let s = std::fs::read_to_string(&path).unwrap();
        let mut lines = s.lines();
        for i in 0..400_000u32 {
            assert_eq!(lines.next().unwrap(), i.to_string());
        }
        assert_eq!(lines.next(), Some("tail"));
        std::fs::remove_file(&path).unwrap();
    }
}
