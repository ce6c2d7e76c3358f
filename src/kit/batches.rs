//! The plan's batches, held in memory or spilled to a file: a trajectory of any length is
//! parsed in bounded memory.
//!
//! A parse hands its batches to a [`Builder`] as it finishes them (in any order). Until the
//! batches it holds are estimated at more than its budget, the builder keeps them in memory;
//! past that, every batch it is given is encoded (MessagePack, named fields) into an
//! anonymous temporary file (in `$TMPDIR`, unlinked from the start, so nothing is left behind
//! even by a killed process), and memory keeps only each batch's [`Shape`] and place in the
//! file (about 32 bytes a batch). Readers take a batch at a time ([`Batches::get`],
//! [`Batches::iter`]); reading a spilled batch decodes it again, and fails only if the file
//! does (an I/O error of the temporary directory).
//!
//! The budget is [`DEFAULT_BUDGET`] bytes, or `PVISOR_PLAN_BUDGET` (bytes; `0` spills every
//! batch).

use super::{Batch, Locator};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::sync::Arc;

/// Bytes of batches (estimated; about half what they take) a plan keeps in memory before it
/// spills.
pub const DEFAULT_BUDGET: usize = 4 << 20;

/// The environment variable that overrides [`DEFAULT_BUDGET`].
pub const BUDGET_ENV: &str = "PVISOR_PLAN_BUDGET";

/// What the engine and the reports read of a batch without its calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// 1-based.
    pub index: usize,
    pub calls: usize,
    pub model_turn: usize,
    /// 1-based line of the batch's record.
    pub line: usize,
    pub complete: bool,
}

impl Shape {
    fn of(b: &Batch) -> Shape {
        Shape {
            index: b.index,
            calls: b.calls.len(),
            model_turn: b.model_turn,
            line: b.locator.line,
            complete: b.complete,
        }
    }
}

/// A spilled batch could not be read back.
#[derive(Debug, thiserror::Error)]
#[error("the plan's spill file: {0}")]
pub struct SpillError(String);

impl From<SpillError> for super::AdapterError {
    fn from(e: SpillError) -> Self {
        super::AdapterError::Io {
            path: std::env::temp_dir(),
            source: std::io::Error::other(e.0),
        }
    }
}

/// The batches of a plan (see the module doc).
#[derive(Clone)]
pub struct Batches(Store);

#[derive(Clone)]
enum Store {
    Memory(Vec<Batch>),
    Spilled(Arc<Spill>),
}

struct Spill {
    file: std::fs::File,
    /// Per batch: where its encoding starts in the file, its length and its shape.
    entries: Vec<(u64, u32, Shape)>,
}

impl Default for Batches {
    fn default() -> Self {
        Batches(Store::Memory(Vec::new()))
    }
}

impl From<Vec<Batch>> for Batches {
    fn from(v: Vec<Batch>) -> Self {
        Batches(Store::Memory(v))
    }
}

impl Batches {
    pub fn len(&self) -> usize {
        match &self.0 {
            Store::Memory(v) => v.len(),
            Store::Spilled(s) => s.entries.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the batches are in a spill file.
    pub fn spilled(&self) -> bool {
        matches!(self.0, Store::Spilled(_))
    }

    /// The shape of batch `i` (0-based), without reading it.
    pub fn shape(&self, i: usize) -> Option<Shape> {
        match &self.0 {
            Store::Memory(v) => v.get(i).map(Shape::of),
            Store::Spilled(s) => s.entries.get(i).map(|e| e.2),
        }
    }

    /// The shapes of every batch, in order.
    pub fn shapes(&self) -> impl Iterator<Item = Shape> + '_ {
        (0..self.len()).filter_map(|i| self.shape(i))
    }

    /// Batch `i` (0-based); `Ok(None)` past the last one.
    pub fn get(&self, i: usize) -> Result<Option<Cow<'_, Batch>>, SpillError> {
        match &self.0 {
            Store::Memory(v) => Ok(v.get(i).map(Cow::Borrowed)),
            Store::Spilled(s) => match s.entries.get(i) {
                Some(&(offset, len, _)) => s.read(offset, len).map(|b| Some(Cow::Owned(b))),
                None => Ok(None),
            },
        }
    }

    /// Batch `i` (0-based), which the caller knows exists (`Err` otherwise).
    pub fn at(&self, i: usize) -> Result<Cow<'_, Batch>, SpillError> {
        self.get(i)?
            .ok_or_else(|| SpillError(format!("no batch {} of {}", i + 1, self.len())))
    }

    /// Batches `range` (0-based, clamped to the plan), one at a time.
    pub fn range(
        &self,
        range: std::ops::Range<usize>,
    ) -> impl Iterator<Item = Result<Cow<'_, Batch>, SpillError>> + '_ {
        let end = range.end.min(self.len());
        (range.start.min(end)..end).map(move |i| self.at(i))
    }

    /// Every batch, one at a time.
    pub fn iter(&self) -> impl Iterator<Item = Result<Cow<'_, Batch>, SpillError>> + '_ {
        self.range(0..self.len())
    }

    /// The batches of a plan built in memory ([`Batches::from`] a `Vec`, what the adapters
    /// whose sessions are small build); `None` for a spilled plan.
    pub fn in_memory(&self) -> Option<&[Batch]> {
        match &self.0 {
            Store::Memory(v) => Some(v),
            Store::Spilled(_) => None,
        }
    }

    /// Every batch at once: borrowed when they are in memory, read back otherwise (for
    /// adapters whose sessions are small, and tests).
    pub fn loaded(&self) -> Result<Cow<'_, [Batch]>, SpillError> {
        match &self.0 {
            Store::Memory(v) => Ok(Cow::Borrowed(v)),
            Store::Spilled(_) => self
                .iter()
                .map(|b| b.map(Cow::into_owned))
                .collect::<Result<Vec<_>, _>>()
                .map(Cow::Owned),
        }
    }

    /// The number of leading complete batches.
    pub fn max_boundary(&self) -> usize {
        self.shapes().take_while(|s| s.complete).count()
    }

    /// The number of calls of batches `..n`.
    pub fn calls_before(&self, n: usize) -> usize {
        self.shapes().take(n).map(|s| s.calls).sum()
    }
}

impl Spill {
    fn read(&self, offset: u64, len: u32) -> Result<Batch, SpillError> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0u8; len as usize];
        self.file
            .read_exact_at(&mut buf, offset)
            .map_err(|e| SpillError(e.to_string()))?;
        rmp_serde::from_slice(&buf).map_err(|e| SpillError(e.to_string()))
    }
}

impl std::fmt::Debug for Batches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Store::Memory(v) => f.debug_list().entries(v).finish(),
            Store::Spilled(s) => write!(f, "Batches(spilled: {})", s.entries.len()),
        }
    }
}

impl PartialEq for Batches {
    /// Batch by batch, wherever they are (a batch that cannot be read is unequal).
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .zip(other.iter())
                .all(|(a, b)| matches!((a, b), (Ok(a), Ok(b)) if a == b))
    }
}

impl Serialize for Batches {
    /// As a list of batches, read one at a time.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeSeq};
        let mut seq = s.serialize_seq(Some(self.len()))?;
        for b in self.iter() {
            seq.serialize_element(&*b.map_err(S::Error::custom)?)?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for Batches {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<Batch>::deserialize(d).map(Batches::from)
    }
}

/// The budget in effect: `PVISOR_PLAN_BUDGET` when it is a number of bytes, else the default.
pub fn budget_from_env() -> usize {
    std::env::var(BUDGET_ENV)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DEFAULT_BUDGET)
}

/// Gathers a parse's batches, numbered from 1, given in any order.
pub struct Builder {
    budget: usize,
    held: usize,
    slots: Vec<Option<Batch>>,
    spill: Option<Spilling>,
}

struct Spilling {
    file: std::io::BufWriter<std::fs::File>,
    at: u64,
    entries: Vec<Option<(u64, u32, Shape)>>,
    buf: Vec<u8>,
}

impl Builder {
    /// A builder that spills past `budget` bytes of batches (estimated).
    pub fn new(budget: usize) -> Builder {
        Builder {
            budget,
            held: 0,
            slots: Vec::new(),
            spill: None,
        }
    }

    /// A builder with the budget of [`budget_from_env`].
    pub fn from_env() -> Builder {
        Builder::new(budget_from_env())
    }

    /// Batch `batch.index` is final. Indexes are 1-based and each is given once.
    pub fn put(&mut self, batch: Batch) -> std::io::Result<()> {
        let i = batch.index.checked_sub(1).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "batch index 0")
        })?;
        if let Some(s) = &mut self.spill {
            return s.write(i, &batch);
        }
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        self.held += estimate(&batch);
        self.slots[i] = Some(batch);
        if self.held > self.budget {
            self.start_spilling()?;
        }
        Ok(())
    }

    fn start_spilling(&mut self) -> std::io::Result<()> {
        let mut s = Spilling {
            file: std::io::BufWriter::with_capacity(1 << 20, tempfile::tempfile()?),
            at: 0,
            entries: Vec::new(),
            buf: Vec::new(),
        };
        for (i, b) in std::mem::take(&mut self.slots).into_iter().enumerate() {
            if let Some(b) = b {
                s.write(i, &b)?;
            }
        }
        self.held = 0;
        self.spill = Some(s);
        Ok(())
    }

    /// The batches; every index up to the highest given must have been given.
    pub fn finish(self) -> std::io::Result<Batches> {
        let missing = || {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a batch of the plan was never given",
            )
        };
        match self.spill {
            None => Ok(Batches(Store::Memory(
                self.slots
                    .into_iter()
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(missing)?,
            ))),
            Some(s) => {
                let file = s.file.into_inner().map_err(|e| e.into_error())?;
                let entries = s
                    .entries
                    .into_iter()
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(missing)?;
                Ok(Batches(Store::Spilled(Arc::new(Spill { file, entries }))))
            }
        }
    }
}

impl Spilling {
    fn write(&mut self, i: usize, b: &Batch) -> std::io::Result<()> {
        use std::io::Write;
        self.buf.clear();
        rmp_serde::encode::write_named(&mut self.buf, b).map_err(std::io::Error::other)?;
        let len = u32::try_from(self.buf.len())
            .map_err(|_| std::io::Error::other("a batch of over 4 GiB"))?;
        self.file.write_all(&self.buf)?;
        if self.entries.len() <= i {
            self.entries.resize(i + 1, None);
        }
        self.entries[i] = Some((self.at, len, Shape::of(b)));
        self.at += len as u64;
        Ok(())
    }
}

/// About what a batch takes in memory.
fn estimate(b: &Batch) -> usize {
    fn value(v: &serde_json::Value) -> usize {
        use serde_json::Value;
        32 + match v {
            Value::String(s) => s.len(),
            Value::Array(a) => a.iter().map(value).sum(),
            Value::Object(o) => o.iter().map(|(k, v)| 40 + k.len() + value(v)).sum(),
            _ => 0,
        }
    }
    fn locator(l: &Locator) -> usize {
        l.native_id.as_ref().map_or(0, |s| 24 + s.len())
    }
    96 + locator(&b.locator)
        + b.calls
            .iter()
            .map(|c| {
                160 + c.call_id.len()
                    + c.tool.len()
                    + value(&c.input)
                    + locator(&c.locator)
                    + c.original
                        .as_ref()
                        .map_or(0, |o| o.text.len() + o.native.as_ref().map_or(0, value))
            })
            .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kit::{Observation, ToolCall};
    use serde_json::json;

    fn batch(index: usize, calls: usize, complete: bool) -> Batch {
        Batch {
            index,
            calls: (0..calls)
                .map(|c| ToolCall {
                    call_id: format!("call_{index}_{c}"),
                    tool: "exec_command".into(),
                    input: json!({"cmd": "true", "n": index, "big": u64::MAX, "neg": -3,
                                  "f": 1.0, "g": 0.1, "nested": [{"é": null}, [], {}]}),
                    original: complete.then(|| Observation {
                        text: format!("out {index} \u{1F600}"),
                        is_error: c % 2 == 1,
                        native: (c == 1).then(|| json!([{"type": "input_text", "text": "x"}])),
                    }),
                    locator: Locator {
                        line: 10 * index + c,
                        native_id: (c == 0).then(|| format!("call_{index}_{c}")),
                    },
                })
                .collect(),
            model_turn: index + 1,
            locator: Locator {
                line: 10 * index,
                native_id: None,
            },
            complete,
        }
    }

    fn build(budget: usize, order: &[usize], total: usize) -> Batches {
        let mut b = Builder::new(budget);
        for &i in order {
            b.put(batch(i, 1 + i % 3, i < total)).unwrap();
        }
        b.finish().unwrap()
    }

    #[test]
    fn a_spilled_plan_reads_back_what_was_given_in_any_order() {
        let n = 40;
        let forward: Vec<usize> = (1..=n).collect();
        let mut shuffled = forward.clone();
        shuffled.reverse();
        shuffled.swap(3, 17);
        let memory = build(usize::MAX, &forward, n);
        assert!(!memory.spilled());
        for (budget, order) in [(0, &forward), (0, &shuffled), (5_000, &shuffled)] {
            let spilled = build(budget, order, n);
            assert!(spilled.spilled(), "budget {budget}");
            assert_eq!(spilled.len(), n);
            assert_eq!(spilled, memory);
            assert_eq!(spilled.loaded().unwrap(), memory.loaded().unwrap());
            // The exact JSON values, numbers included, come back.
            assert_eq!(
                serde_json::to_string(&spilled).unwrap(),
                serde_json::to_string(&memory).unwrap()
            );
            assert_eq!(spilled.max_boundary(), n - 1);
            assert_eq!(spilled.calls_before(5), memory.calls_before(5));
            assert_eq!(
                spilled.shapes().collect::<Vec<_>>(),
                memory.shapes().collect::<Vec<_>>()
            );
            let some: Vec<_> = spilled.range(3..7).map(|b| b.unwrap().index).collect();
            assert_eq!(some, vec![4, 5, 6, 7]);
            assert!(spilled.get(n).unwrap().is_none());
        }
    }

    #[test]
    fn a_missing_batch_is_refused() {
        let mut b = Builder::new(0);
        b.put(batch(2, 1, true)).unwrap();
        assert!(b.finish().is_err());
        let mut b = Builder::new(usize::MAX);
        b.put(batch(2, 1, true)).unwrap();
        assert!(b.finish().is_err());
        assert!(Builder::new(0).put(batch(0, 1, true)).is_err());
    }
}
