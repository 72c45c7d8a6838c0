//! The stage clock of the thread making a batch: one [`Instant`] at each
//! stage boundary, the time since the last one added to the stage being
//! left, so that a batch's stages add up to its wall time exactly.
//!
//! The loader [`begin`]s a batch on the thread that makes it and [`end`]s
//! it there; in between, the code of each stage (the loader's gather, the
//! engine's decompression and fetches, the vision steps) [`switch`]es to
//! its stage, or [`enter`]s it for a scope. On a thread that is not making
//! a batch (a rayon helper decoding in parallel, a gather outside any
//! loader) both are a thread-local flag read and nothing else. Boundaries
//! are per batch, per stream or per image, never per record of a tiny
//! record's hot loop.
//!
//! When a `tracing` subscriber wants the loader's stage spans (level
//! `TRACE`, target [`TARGET`]), each switch also closes the span of the
//! stage left and opens one for the stage entered, a child of the batch's
//! span; otherwise no span is ever made.

use std::cell::{Cell, RefCell};
use std::time::Instant;

use super::stage::{STAGES, Stage};

/// The `tracing` target of the loader's spans and events.
pub(crate) const TARGET: &str = "loaderx_core::loader";

struct Lap {
    /// A batch is being made on this thread.
    active: Cell<bool>,
    current: Cell<Stage>,
    since: Cell<Option<Instant>>,
    /// Nanoseconds per stage in this batch.
    ns: [Cell<u64>; STAGES],
    /// Stored bytes read in this batch (compressed bytes for compressed
    /// records).
    read_bytes: Cell<u64>,
    /// Bytes the gathers delivered into the batch.
    delivered: Cell<u64>,
    /// The batch's record indices are kept ([`note_indices`]).
    keep: Cell<bool>,
    indices: RefCell<Vec<u64>>,
    /// Stage spans are made (a subscriber wants them).
    spans: Cell<bool>,
    span: RefCell<Option<tracing::span::EnteredSpan>>,
}

thread_local! {
    static LAP: Lap = const {
        Lap {
            active: Cell::new(false),
            current: Cell::new(Stage::Sample),
            since: Cell::new(None),
            ns: [const { Cell::new(0) }; STAGES],
            read_bytes: Cell::new(0),
            delivered: Cell::new(0),
            keep: Cell::new(false),
            indices: RefCell::new(Vec::new()),
            spans: Cell::new(false),
            span: RefCell::new(None),
        }
    };
}

/// A batch begun on this thread ([`begin`]); [`end`] takes it back.
#[derive(Debug)]
#[must_use]
pub(crate) struct Token {
    start: Instant,
}

/// What one batch spent in each stage, on the thread that made it.
#[derive(Debug, Clone)]
pub(crate) struct Lapped {
    pub(crate) start: Instant,
    pub(crate) end: Instant,
    /// Nanoseconds per stage ([`Stage::index`]); they add up to
    /// `end - start`.
    pub(crate) ns: [u64; STAGES],
    pub(crate) read_bytes: u64,
    pub(crate) delivered: u64,
    /// The batch's record indices, when kept (else empty).
    pub(crate) indices: Vec<u64>,
}

/// `d` in nanoseconds, saturating (the recorder's unit).
pub(crate) fn nanos(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Adds the time from the last boundary to `now` to the stage being left,
/// which is returned, and makes `now` the last boundary.
fn charge(lap: &Lap, now: Instant) -> Stage {
    let left = lap.current.get();
    if let Some(since) = lap.since.get() {
        let c = &lap.ns[left.index()];
        c.set(
            c.get()
                .saturating_add(nanos(now.saturating_duration_since(since))),
        );
    }
    lap.since.set(Some(now));
    left
}

/// Starts timing a batch on this thread, in `stage`; with `spans`, stage
/// spans are made (children of the span entered now); with `keep`, the
/// batch's record indices are kept ([`note_indices`]). `None` (and nothing
/// changes) when this thread is making a batch already (a loader run
/// inside another's transform): the outer batch keeps the time.
pub(crate) fn begin(stage: Stage, spans: bool, keep: bool) -> Option<Token> {
    LAP.with(|lap| {
        if lap.active.get() {
            return None;
        }
        let start = Instant::now();
        lap.active.set(true);
        lap.current.set(stage);
        lap.since.set(Some(start));
        for c in &lap.ns {
            c.set(0);
        }
        lap.read_bytes.set(0);
        lap.delivered.set(0);
        lap.keep.set(keep);
        lap.spans.set(spans);
        if spans {
            open_span(lap, stage);
        }
        Some(Token { start })
    })
}

fn open_span(lap: &Lap, stage: Stage) {
    let mut span = lap.span.borrow_mut();
    // The stage left is closed first: the new one is its sibling.
    *span = None;
    *span = Some(tracing::trace_span!(target: TARGET, "stage", stage = stage.name()).entered());
}

/// Enters `stage` on this thread, the time since the last boundary counted
/// in the stage left, which is returned; `None` when no batch is being made
/// here.
pub(crate) fn switch(stage: Stage) -> Option<Stage> {
    LAP.with(|lap| {
        if !lap.active.get() {
            return None;
        }
        let left = charge(lap, Instant::now());
        lap.current.set(stage);
        if lap.spans.get() && left != stage {
            open_span(lap, stage);
        }
        Some(left)
    })
}

/// Switches back to the stage left when dropped ([`enter`]).
#[derive(Debug)]
#[must_use = "the stage lasts as long as the guard"]
pub(crate) struct Guard(Option<Stage>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(stage) = self.0 {
            switch(stage);
        }
    }
}

/// Enters `stage` for as long as the returned guard lives, then goes back
/// to the stage it left (for stages nested in another's code: a
/// decompression inside a read).
pub(crate) fn enter(stage: Stage) -> Guard {
    Guard(switch(stage))
}

/// Counts `bytes` stored bytes read for the batch being made on this thread.
pub(crate) fn add_read(bytes: u64) {
    LAP.with(|lap| {
        if lap.active.get() {
            lap.read_bytes
                .set(lap.read_bytes.get().saturating_add(bytes));
        }
    });
}

/// Counts `bytes` delivered into the batch being made on this thread.
pub(crate) fn add_delivered(bytes: u64) {
    LAP.with(|lap| {
        if lap.active.get() {
            lap.delivered.set(lap.delivered.get().saturating_add(bytes));
        }
    });
}

/// Keeps `indices`, the records of the batch being made on this thread,
/// when [`begin`] was asked to (for a slow batch's record ids).
pub(crate) fn note_indices(indices: &[u64]) {
    LAP.with(|lap| {
        if lap.active.get() && lap.keep.get() {
            lap.indices.borrow_mut().extend_from_slice(indices);
        }
    });
}

/// Ends the batch `token` began: its time per stage.
pub(crate) fn end(token: Token) -> Lapped {
    LAP.with(|lap| {
        let end = Instant::now();
        charge(lap, end);
        lap.active.set(false);
        lap.since.set(None);
        if lap.spans.get() {
            lap.span.borrow_mut().take();
            lap.spans.set(false);
        }
        let mut ns = [0u64; STAGES];
        for (n, c) in ns.iter_mut().zip(&lap.ns) {
            *n = c.get();
        }
        Lapped {
            start: token.start,
            end,
            ns,
            read_bytes: lap.read_bytes.get(),
            delivered: lap.delivered.get(),
            indices: std::mem::take(&mut *lap.indices.borrow_mut()),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_stages_of_a_batch_add_up_to_its_wall_time() {
        let token = begin(Stage::Sample, false, true).unwrap();
        assert!(
            begin(Stage::Read, false, false).is_none(),
            "one batch at a time"
        );
        note_indices(&[4, 2]);
        add_delivered(7);
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(switch(Stage::Read), Some(Stage::Sample));
        {
            let _g = enter(Stage::Decompress);
            std::thread::sleep(Duration::from_millis(3));
        }
        add_read(10);
        std::thread::sleep(Duration::from_millis(1));
        let lapped = end(token);
        let wall = nanos(lapped.end - lapped.start);
        assert_eq!(lapped.ns.iter().sum::<u64>(), wall);
        assert!(lapped.ns[Stage::Sample.index()] >= 2_000_000);
        assert!(lapped.ns[Stage::Decompress.index()] >= 3_000_000);
        assert!(lapped.ns[Stage::Read.index()] >= 1_000_000);
        assert_eq!(lapped.read_bytes, 10);
        assert_eq!(lapped.delivered, 7);
        assert_eq!(lapped.indices, [4, 2]);
        // Outside a batch: nothing happens.
        assert_eq!(switch(Stage::Read), None);
        drop(enter(Stage::Decode));
        add_read(5);
        let token = begin(Stage::Sample, false, false).unwrap();
        note_indices(&[1]);
        let lapped = end(token);
        assert_eq!(lapped.read_bytes, 0);
        assert!(lapped.indices.is_empty(), "not kept");
    }
}
