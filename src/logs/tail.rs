//! Where the last N lines of a CRI log start, found by reading backwards
//! from the end (the kubelet's `tail.FindTailLineStartIndex`), so a
//! `tailLines` request never scans a whole file.
//!
//! Invariant: the answer is a file offset at the start of a raw line, and
//! exactly N logical lines (full entries, or skipped non-CRI lines) end at
//! or after it, or it is 0 when the file has fewer. Lines are counted as
//! the decoder prints them: a line split into partial entries counts once
//! (the kubelet counts each fragment).

use super::ends_logical_line;

#[derive(Debug, Clone)]
pub struct TailScanner {
    want: u64,
    found: u64,
    /// File offset where the last chunk fed starts.
    pos: u64,
    /// The end of a raw line whose start lies before `pos`.
    carry: Vec<u8>,
    answer: Option<u64>,
}

impl TailScanner {
    /// For a file of `len` bytes and the last `lines` lines.
    pub fn new(len: u64, lines: u64) -> TailScanner {
        TailScanner {
            want: lines,
            found: 0,
            pos: len,
            carry: Vec::new(),
            answer: (lines == 0).then_some(len),
        }
    }

    /// The answer, once known.
    pub fn answer(&self) -> Option<u64> {
        self.answer
    }

    /// Where the next chunk to feed must end (the previous one's start).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Feeds the chunk that ends at [`TailScanner::position`]; returns the
    /// answer once known.
    pub fn feed_back(&mut self, chunk: &[u8]) -> Option<u64> {
        if self.answer.is_some() {
            return self.answer;
        }
        let start = self.pos - chunk.len() as u64;
        let mut end = chunk.len();
        while let Some(nl) = chunk[..end].iter().rposition(|b| *b == b'\n') {
            let line_start = start + nl as u64 + 1;
            if self.carry.is_empty() {
                self.count(&chunk[nl + 1..end], line_start);
            } else {
                let mut line = chunk[nl + 1..end].to_vec();
                line.extend_from_slice(&std::mem::take(&mut self.carry));
                self.count(&line, line_start);
            }
            if self.answer.is_some() {
                return self.answer;
            }
            end = nl;
        }
        let mut carry = chunk[..end].to_vec();
        carry.extend_from_slice(&self.carry);
        self.carry = carry;
        self.pos = start;
        None
    }

    /// The start of the file was reached: the first raw line is counted and
    /// the answer is final.
    pub fn finish(&mut self) -> u64 {
        if self.answer.is_none() {
            let first = std::mem::take(&mut self.carry);
            self.count(&first, 0);
        }
        self.answer.unwrap_or(0)
    }

    fn count(&mut self, line: &[u8], line_start: u64) {
        if line.is_empty() || !ends_logical_line(line) {
            return;
        }
        self.found += 1;
        if self.found > self.want {
            // This line is the one before the last `want`: they start after it.
            self.answer = Some(line_start + line.len() as u64 + 1);
        }
    }
}

#[cfg(test)]
#[path = "tail_tests.rs"]
mod tests;
