//! The streams of a weighted mixture: every source's stores of one name
//! read end to end, and the [`Mixture`] that allocates records among them.

use std::path::Path;

use super::Stream;
use crate::dense::DynDense;
use crate::error::Error;
use crate::ragged::DynRagged;
use crate::sampler::{Mixture, MixtureStop, SamplerMode};
use crate::store::Store;

/// One source of a [`MixtureStreams`]: named stores (every source names
/// the same streams), a weight and how its records are drawn.
///
/// ```
/// use loaderx_core::{Codec, DenseWriter, MixtureSource, SamplerMode, Store};
///
/// let dir = tempfile::tempdir()?;
/// let mut w = DenseWriter::<u8>::create(dir.path().join("x"), &[], Codec::Raw)?;
/// w.append_slice(&[1, 2, 3], 3)?;
/// w.close()?;
/// let code = MixtureSource::new("code", 0.25)
///     .stream("x", Store::open(dir.path().join("x"))?)
///     .mode(SamplerMode::Sequential);
/// assert_eq!(code.name(), "code");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct MixtureSource {
    name: String,
    weight: f64,
    mode: SamplerMode,
    streams: Vec<(String, Store)>,
}

impl MixtureSource {
    /// A source named `name` (for errors and [`MixtureStreams::names`]) of
    /// relative weight `weight`, drawn `Cyclic` (a fresh permutation of
    /// its records per pass of the source), with no stream yet.
    pub fn new(name: impl Into<String>, weight: f64) -> MixtureSource {
        MixtureSource {
            name: name.into(),
            weight,
            mode: SamplerMode::Cyclic,
            streams: Vec::new(),
        }
    }

    /// A source of every store directly under `dir` (a converted split,
    /// as [`Store::open_dir`] finds them), named after their directories.
    ///
    /// # Errors
    ///
    /// As [`Store::open_dir`].
    pub fn open_dir(
        name: impl Into<String>,
        weight: f64,
        dir: impl AsRef<Path>,
    ) -> Result<MixtureSource, Error> {
        let mut source = MixtureSource::new(name, weight);
        source.streams = Store::open_dir(dir)?;
        Ok(source)
    }

    /// A source of a multi-part [`Dataset`](crate::Dataset)'s streams.
    pub fn dataset(name: impl Into<String>, weight: f64, dataset: crate::Dataset) -> MixtureSource {
        let mut source = MixtureSource::new(name, weight);
        source.streams = dataset.into_streams();
        source
    }

    /// Adds the stream `name`, read from `store`.
    pub fn stream(mut self, name: impl Into<String>, store: impl Into<Store>) -> MixtureSource {
        self.streams.push((name.into(), store.into()));
        self
    }

    /// How the source's records are drawn: `Cyclic` (the default) or
    /// `Sequential` (in order, pass after pass).
    pub fn mode(mut self, mode: SamplerMode) -> MixtureSource {
        self.mode = mode;
        self
    }

    /// The source's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The streams of a weighted mixture: stream `n` is every source's store
/// `n` read end to end (source `s` holding indices
/// `mixture().starts()[s] ..`), and the [`Mixture`] allocating the records
/// of a run among the sources. Give it to a loader with
/// [`DataLoaderBuilder::mixture`](crate::DataLoaderBuilder::mixture).
/// Cloning is cheap (the stores are shared).
#[derive(Clone)]
pub struct MixtureStreams {
    names: Vec<String>,
    streams: Vec<(String, Stream)>,
    mixture: Mixture,
}

impl MixtureStreams {
    /// Joins `sources` (in order) into one set of streams, with `stop`
    /// setting the length of the mixture's pass.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// naming the source and stream: no source; a source without streams,
    /// with a stream name used twice, or with streams of different
    /// lengths; a source lacking a stream another has, or holding it as
    /// another kind, element type or record shape (a Ragged stream of
    /// another shape-header width too); and as [`Mixture::new`] for the
    /// weights, modes and lengths.
    pub fn new(sources: Vec<MixtureSource>, stop: MixtureStop) -> Result<MixtureStreams, Error> {
        let Some(first) = sources.first() else {
            return Err(Error::invalid("a mixture needs at least one source"));
        };
        let stream_names: Vec<String> = first.streams.iter().map(|(n, _)| n.clone()).collect();
        let mut lens = Vec::with_capacity(sources.len());
        let mut modes = Vec::with_capacity(sources.len());
        let mut weights = Vec::with_capacity(sources.len());
        let mut names = Vec::with_capacity(sources.len());
        let mut parts: Vec<Vec<Store>> = stream_names.iter().map(|_| Vec::new()).collect();
        for source in sources {
            let name = source.name;
            let in_source =
                |detail: String| Error::invalid(format!("mixture source {name:?}: {detail}"));
            let mine: Vec<&String> = source.streams.iter().map(|(n, _)| n).collect();
            if mine.is_empty() {
                return Err(in_source("no stream".to_owned()));
            }
            for (i, n) in mine.iter().enumerate() {
                if mine[..i].contains(n) {
                    return Err(in_source(format!("stream name {n:?} used twice")));
                }
            }
            if let Some(missing) = stream_names.iter().find(|n| !mine.contains(n)) {
                return Err(in_source(format!(
                    "lacks stream {missing:?}, which the first source has"
                )));
            }
            if let Some(extra) = mine.iter().find(|n| !stream_names.contains(n)) {
                return Err(in_source(format!(
                    "has stream {extra:?}, which the first source lacks"
                )));
            }
            let len = source.streams[0].1.len();
            if let Some((n, s)) = source.streams.iter().find(|(_, s)| s.len() != len) {
                return Err(in_source(format!(
                    "stream {n:?} holds {} records, stream {:?} {len}",
                    s.len(),
                    source.streams[0].0
                )));
            }
            lens.push(len);
            modes.push(source.mode);
            weights.push(source.weight);
            for (n, store) in source.streams {
                if let Some(k) = stream_names.iter().position(|x| *x == n) {
                    parts[k].push(store);
                }
            }
            names.push(name);
        }
        let sizes: Vec<(u64, f64)> = lens.iter().copied().zip(weights).collect();
        let mixture = Mixture::new(&sizes, &modes, stop)?;
        let mut streams = Vec::with_capacity(stream_names.len());
        for (n, stores) in stream_names.into_iter().zip(parts) {
            let path = std::path::PathBuf::from(format!("mixture:{n}"));
            let (mut dense, mut ragged) = (Vec::new(), Vec::new());
            for store in stores {
                match store {
                    Store::Dense(d) => dense.push(d),
                    Store::Ragged(r) => ragged.push(r),
                }
            }
            let stream: Stream = match (dense.is_empty(), ragged.is_empty()) {
                (false, true) => DynDense::concat(&path, dense)?.into(),
                (true, false) => DynRagged::concat(&path, ragged)?.into(),
                _ => {
                    return Err(Error::invalid(format!(
                        "mixture stream {n:?} is Dense in {} sources and Ragged in {}",
                        dense.len(),
                        ragged.len()
                    )));
                }
            };
            streams.push((n, stream));
        }
        Ok(MixtureStreams {
            names,
            streams,
            mixture,
        })
    }

    /// The sources' names, in order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The joined streams, by name.
    pub fn streams(&self) -> &[(String, Stream)] {
        &self.streams
    }

    /// The allocation of records among the sources.
    pub fn mixture(&self) -> &Mixture {
        &self.mixture
    }
}
