//! Converting one split's parquet files into one store per column.
//!
//! Rows are read in bounded batches and written whenever the buffered
//! records reach `max_records` or their bytes reach `max_bytes`, so memory
//! stays bounded whatever the dataset size. Image columns get a first pass
//! over their headers to choose Dense or Ragged.
//!
//! Only the selected columns are read (`columns` / `drop`). With
//! `drop_null_rows` / `drop_empty_rows`, a row holding a null or an empty
//! value in any selected column is left out of every column of the split,
//! so the stores stay aligned; the counts are reported.

use std::fs::File;
use std::path::PathBuf;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use indicatif::ProgressBar;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use serde_json::Value;

use super::decode::{RecordBuffer, decode_numeric};
use super::images::{self, ImageSurvey, PixelFormat};
use super::plan::{ColumnKind, ColumnPlan, hf_features, plan_column};
use super::rows::{empty_rows, kept_runs, null_rows};
use super::text::{TextEncoder, decode_text};
use super::{ColumnSource, HfColumn, HfSplit};
use loaderx_core::{Codec, CreateOptions, DType, DynDenseWriter, DynRaggedWriter, StoreKind};

use crate::error::Error;
use crate::output::StagedRoot;

/// Store, batching, selection and encoding settings shared by every split.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) codec: Codec,
    pub(crate) shards: usize,
    pub(crate) max_records: usize,
    pub(crate) max_bytes: usize,
    /// Keep only these columns, in this order (empty: all).
    pub(crate) columns: Vec<String>,
    /// Leave these columns out.
    pub(crate) drop: Vec<String>,
    /// How string columns are stored; `None` refuses them.
    pub(crate) text: Option<TextEncoder>,
    pub(crate) drop_null_rows: bool,
    pub(crate) drop_empty_rows: bool,
    /// Convert every image to this 8-bit format (`--image-mode`).
    pub(crate) image_mode: Option<PixelFormat>,
}

/// One split to convert: its local parquet files, in order.
#[derive(Debug, Clone)]
pub(crate) struct SplitSource {
    /// Split name (the output directory).
    pub(crate) name: String,
    /// True when the Hub's parquet conversion kept only part of it.
    pub(crate) partial: bool,
    /// Local files and the names used in messages.
    pub(crate) files: Vec<(PathBuf, String)>,
    /// Prefix for messages, e.g. `owner/name@sha`.
    pub(crate) context: String,
}

struct ParquetFile {
    path: PathBuf,
    label: String,
    meta: ArrowReaderMetadata,
}

impl ParquetFile {
    fn open(path: &PathBuf, label: &str) -> Result<ParquetFile, Error> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let meta = ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())
            .map_err(|e| source_error(label, format!("not a readable parquet file: {e}")))?;
        Ok(ParquetFile {
            path: path.clone(),
            label: label.to_owned(),
            meta,
        })
    }

    fn rows(&self) -> u64 {
        u64::try_from(self.meta.metadata().file_metadata().num_rows()).unwrap_or(0)
    }

    /// Average uncompressed bytes of a row, from the row-group statistics.
    fn row_bytes(&self) -> usize {
        let groups = self.meta.metadata().row_groups();
        let bytes: i64 = groups.iter().map(|g| g.total_byte_size()).sum();
        let rows: i64 = groups.iter().map(|g| g.num_rows()).sum();
        usize::try_from(bytes / rows.max(1)).unwrap_or(0).max(1)
    }

    fn batches(
        &self,
        batch_rows: usize,
        columns: Option<&[usize]>,
    ) -> Result<impl Iterator<Item = Result<RecordBatch, Error>> + '_, Error> {
        let file = File::open(&self.path).map_err(|e| Error::io(&self.path, e))?;
        let mut builder =
            ParquetRecordBatchReaderBuilder::new_with_metadata(file, self.meta.clone())
                .with_batch_size(batch_rows.max(1));
        if let Some(columns) = columns {
            let mask = ProjectionMask::roots(builder.parquet_schema(), columns.iter().copied());
            builder = builder.with_projection(mask);
        }
        let reader = builder
            .build()
            .map_err(|e| source_error(&self.label, format!("cannot read: {e}")))?;
        Ok(reader
            .map(move |b| b.map_err(|e| source_error(&self.label, format!("cannot decode: {e}")))))
    }
}

enum Writer {
    Dense(DynDenseWriter),
    Ragged(DynRaggedWriter),
}

impl Writer {
    fn len(&self) -> u64 {
        match self {
            Writer::Dense(w) => w.len(),
            Writer::Ragged(w) => w.len(),
        }
    }

    fn close(self) -> Result<(), Error> {
        Ok(match self {
            Writer::Dense(w) => w.close(),
            Writer::Ragged(w) => w.close(),
        }?)
    }
}

enum Decoder {
    Numeric(Vec<Option<usize>>),
    Image {
        format: PixelFormat,
        shape: Option<Vec<usize>>,
        /// Convert 8-bit images of any mode to `format`.
        convert: bool,
    },
    Text(TextEncoder),
}

struct Column {
    plan: ColumnPlan,
    decoder: Decoder,
    writer: Writer,
    buffer: RecordBuffer,
    summary: HfColumn,
}

fn column_error(ctx: &str, column: &str, detail: impl Into<String>) -> Error {
    Error::Column {
        context: ctx.to_owned(),
        column: column.to_owned(),
        row: None,
        detail: detail.into(),
    }
}

fn row_error(ctx: &str, column: &str, row: u64, detail: impl Into<String>) -> Error {
    Error::Column {
        context: ctx.to_owned(),
        column: column.to_owned(),
        row: Some(row),
        detail: detail.into(),
    }
}

fn source_error(file: &str, detail: impl Into<String>) -> Error {
    Error::Source {
        file: file.to_owned(),
        detail: detail.into(),
    }
}

fn same_fields(a: &SchemaRef, b: &SchemaRef) -> bool {
    a.fields().len() == b.fields().len()
        && a.fields()
            .iter()
            .zip(b.fields().iter())
            .all(|(x, y)| x.name() == y.name() && x.data_type() == y.data_type())
}

/// The names of the columns to convert, in output order: `columns` (or
/// every column) minus `drop`. Unknown names are errors listing the columns.
fn select_columns(ctx: &str, all: &[String], settings: &Settings) -> Result<Vec<String>, Error> {
    for (flag, names) in [("--columns", &settings.columns), ("--drop", &settings.drop)] {
        if let Some(bad) = names.iter().find(|n| !all.contains(n)) {
            return Err(Error::UnknownColumn {
                context: ctx.to_owned(),
                flag,
                column: bad.clone(),
                available: all.to_vec(),
            });
        }
    }
    let mut out: Vec<String> = Vec::new();
    let wanted = if settings.columns.is_empty() {
        all
    } else {
        settings.columns.as_slice()
    };
    for name in wanted {
        if !settings.drop.contains(name) && !out.contains(name) {
            out.push(name.clone());
        }
    }
    if out.is_empty() {
        return Err(Error::invalid(format!(
            "{ctx}: --columns and --drop leave no column to convert"
        )));
    }
    Ok(out)
}

/// Plans the selected columns of a split from its first file's schema.
fn plan_columns(
    ctx: &str,
    file: &ParquetFile,
    settings: &Settings,
) -> Result<Vec<ColumnPlan>, Error> {
    let schema = file.meta.schema();
    let features = hf_features(schema.metadata().get("huggingface").map(String::as_str))
        .map_err(|e| source_error(&file.label, e))?;
    let mut all: Vec<String> = Vec::new();
    for field in schema.fields() {
        let name = field.name();
        if all.contains(name) {
            return Err(column_error(ctx, name, "the column name appears twice"));
        }
        all.push(name.clone());
    }
    if all.is_empty() {
        return Err(source_error(ctx, "the split has no columns"));
    }
    let leave_out = |name: &str| format!("; leave the column out with --drop {name}");
    let mut plans = Vec::new();
    for name in select_columns(ctx, &all, settings)? {
        let (index, field) = schema
            .column_with_name(&name)
            .ok_or_else(|| column_error(ctx, &name, "missing from the schema"))?;
        let feature = features.as_ref().and_then(|f: &Value| f.get(&name));
        let kind = plan_column(field, feature)
            .map_err(|e| column_error(ctx, &name, format!("{e}{}", leave_out(&name))))?;
        if kind == ColumnKind::Text && settings.text.is_none() {
            return Err(column_error(
                ctx,
                &name,
                format!(
                    "strings cannot be stored in a numeric store as they are; store their UTF-8 \
                     bytes with --text bytes or token ids with --tokenizer REF{}",
                    leave_out(&name)
                ),
            ));
        }
        plans.push(ColumnPlan { name, index, kind });
    }
    Ok(plans)
}

/// Which rows of `part` to leave out, and why: `(mask, nulls, empties)`;
/// `None` when no row is dropped.
fn rows_to_drop(
    columns: &[Column],
    part: &RecordBatch,
    settings: &Settings,
) -> Option<(Vec<bool>, u64, u64)> {
    if !settings.drop_null_rows && !settings.drop_empty_rows {
        return None;
    }
    let mut mask = vec![false; part.num_rows()];
    let (mut nulls, mut empties) = (0u64, 0u64);
    for (enabled, find, count) in [
        (
            settings.drop_null_rows,
            null_rows as fn(&dyn arrow_array::Array) -> Vec<bool>,
            &mut nulls,
        ),
        (settings.drop_empty_rows, empty_rows, &mut empties),
    ] {
        if !enabled {
            continue;
        }
        for c in columns {
            let Some(array) = part.column_by_name(&c.plan.name) else {
                continue;
            };
            for (i, hit) in find(array.as_ref()).into_iter().enumerate() {
                if hit && !mask[i] {
                    mask[i] = true;
                    *count += 1;
                }
            }
        }
    }
    (nulls + empties > 0).then_some((mask, nulls, empties))
}

/// The header pass over every image column.
fn survey_images(
    ctx: &str,
    files: &[ParquetFile],
    plans: &[ColumnPlan],
    settings: &Settings,
) -> Result<Vec<(usize, ImageSurvey, u64)>, Error> {
    use rayon::prelude::*;
    let image_cols: Vec<&ColumnPlan> = plans
        .iter()
        .filter(|p| matches!(p.kind, ColumnKind::Image { .. }))
        .collect();
    if image_cols.is_empty() {
        return Ok(Vec::new());
    }
    // Rows the conversion will drop must not decide the image layout: the
    // survey reads every selected column when rows may be dropped.
    let dropping = settings.drop_null_rows || settings.drop_empty_rows;
    let mut indices: Vec<usize> = if dropping {
        plans.iter().map(|p| p.index).collect()
    } else {
        image_cols.iter().map(|p| p.index).collect()
    };
    indices.sort_unstable();
    // (column index, survey, decoded bytes)
    let mut surveys: Vec<(usize, ImageSurvey, u64)> = image_cols
        .iter()
        .map(|p| (p.index, ImageSurvey::default(), 0))
        .collect();
    let mut row = 0u64;
    for file in files {
        let batch_rows = (settings.max_bytes / 4 / file.row_bytes()).clamp(1, settings.max_records);
        for batch in file.batches(batch_rows, Some(&indices))? {
            let batch = batch?;
            let drop = if dropping {
                let mut drop = vec![false; batch.num_rows()];
                for p in plans {
                    if let Some(a) = batch.column_by_name(&p.name) {
                        let masks = [
                            settings.drop_null_rows.then(|| null_rows(a.as_ref())),
                            settings.drop_empty_rows.then(|| empty_rows(a.as_ref())),
                        ];
                        for m in masks.into_iter().flatten() {
                            for (d, hit) in drop.iter_mut().zip(m) {
                                *d |= hit;
                            }
                        }
                    }
                }
                drop
            } else {
                vec![false; batch.num_rows()]
            };
            for (k, plan) in image_cols.iter().enumerate() {
                let column = batch
                    .column_by_name(&plan.name)
                    .ok_or_else(|| column_error(ctx, &plan.name, "missing from a batch"))?;
                for (start, end) in kept_runs(&drop) {
                    let first = row + start as u64;
                    let run = column.slice(start, end - start);
                    let encoded = images::encoded_images(run.as_ref(), first)
                        .map_err(|e| column_error(ctx, &plan.name, e))?;
                    let probed: Vec<Result<(PixelFormat, Vec<usize>), String>> = encoded
                        .par_iter()
                        .enumerate()
                        .map(|(i, b)| images::probe(b, first + i as u64))
                        .collect();
                    let (_, survey, bytes) = &mut surveys[k];
                    for (i, p) in probed.into_iter().enumerate() {
                        let (format, shape) = p
                            .and_then(|(format, shape)| {
                                let to = format
                                    .converted(settings.image_mode)
                                    .map_err(|e| format!("row {}: {e}", first + i as u64))?;
                                Ok((to, to.shape(shape[1] as u32, shape[0] as u32)))
                            })
                            .map_err(|e| column_error(ctx, &plan.name, e))?;
                        *bytes += (shape.iter().product::<usize>() * format.dtype.size()) as u64;
                        survey
                            .add(first + i as u64, format, shape)
                            .map_err(|e| column_error(ctx, &plan.name, e))?;
                    }
                }
            }
            row += batch.num_rows() as u64;
        }
    }
    Ok(surveys)
}

fn describe(
    kind: StoreKind,
    dtype: DType,
    shape: Option<&[usize]>,
    ndim: usize,
    source: ColumnSource,
) -> HfColumn {
    HfColumn {
        name: String::new(),
        kind,
        dtype,
        item_shape: shape.map(<[usize]>::to_vec),
        ndim,
        source,
    }
}

/// Converts one split into `root/<split>/<column>/`.
pub(crate) fn convert_split(
    root: &StagedRoot,
    split: &SplitSource,
    settings: &Settings,
    progress: &ProgressBar,
) -> Result<HfSplit, Error> {
    let ctx = format!("{} split {:?}", split.context, split.name);
    let files = split
        .files
        .iter()
        .map(|(path, label)| ParquetFile::open(path, label))
        .collect::<Result<Vec<_>, Error>>()?;
    let Some(first) = files.first() else {
        return Err(source_error(&ctx, "the split has no parquet files"));
    };
    for f in &files[1..] {
        if !same_fields(first.meta.schema(), f.meta.schema()) {
            return Err(source_error(
                &f.label,
                format!("its columns differ from those of {}", first.label),
            ));
        }
    }
    let plans = plan_columns(&ctx, first, settings)?;
    let total: u64 = files.iter().map(ParquetFile::rows).sum();

    if plans
        .iter()
        .any(|p| matches!(p.kind, ColumnKind::Image { .. }))
    {
        progress.set_message(format!("{}: image headers", split.name));
    }
    let surveys = survey_images(&ctx, &files, &plans, settings)?;
    progress.set_message(split.name.clone());

    let options = CreateOptions::new(settings.codec).data_shards(settings.shards);
    let mut decoded_row_bytes = 0usize;
    let mut columns = Vec::with_capacity(plans.len());
    for plan in plans {
        let path = root.store_path(&split.name, &plan.name)?;
        let (decoder, mut summary) = match &plan.kind {
            ColumnKind::Numeric { dtype, dims } => {
                let summary = match plan.kind.fixed_shape() {
                    Some(shape) => describe(
                        StoreKind::Dense,
                        *dtype,
                        Some(&shape),
                        shape.len(),
                        ColumnSource::Numeric,
                    ),
                    None => describe(
                        StoreKind::Ragged,
                        *dtype,
                        None,
                        dims.len(),
                        ColumnSource::Numeric,
                    ),
                };
                (Decoder::Numeric(dims.clone()), summary)
            }
            ColumnKind::Text => {
                let Some(encoder) = settings.text.clone() else {
                    return Err(column_error(&ctx, &plan.name, "no text encoding chosen"));
                };
                let (dtype, source) = match &encoder {
                    TextEncoder::Bytes => (DType::U8, ColumnSource::TextBytes),
                    TextEncoder::Tokens(_) => (DType::U32, ColumnSource::Tokens),
                };
                let summary = describe(StoreKind::Ragged, dtype, None, 1, source);
                (Decoder::Text(encoder), summary)
            }
            ColumnKind::Image { mode } => {
                let (survey, bytes) = surveys
                    .iter()
                    .find(|(i, _, _)| *i == plan.index)
                    .map(|(_, s, b)| (s.clone(), *b))
                    .unwrap_or_default();
                decoded_row_bytes += usize::try_from(bytes / total.max(1)).unwrap_or(usize::MAX);
                let format = match survey.format {
                    Some((format, _)) => format,
                    // No images at all: an empty ragged u8 store.
                    None => settings.image_mode.unwrap_or(PixelFormat {
                        dtype: DType::U8,
                        channels: 1,
                        mode: "L",
                    }),
                };
                if let Some(want) = mode
                    && settings.image_mode.is_none()
                    && survey.format.is_some()
                    && want != format.mode
                {
                    return Err(column_error(
                        &ctx,
                        &plan.name,
                        format!(
                            "the Image feature asks for mode {want} but the images are {}; \
                             converting would change pixel values",
                            format.mode
                        ),
                    ));
                }
                let shape = survey.dense_shape().map(<[usize]>::to_vec);
                let summary = match &shape {
                    Some(s) => describe(
                        StoreKind::Dense,
                        format.dtype,
                        Some(s),
                        s.len(),
                        ColumnSource::Image,
                    ),
                    None => describe(
                        StoreKind::Ragged,
                        format.dtype,
                        None,
                        format.ndim(),
                        ColumnSource::Image,
                    ),
                };
                (
                    Decoder::Image {
                        format,
                        shape,
                        convert: settings.image_mode.is_some(),
                    },
                    summary,
                )
            }
        };
        summary.name = plan.name.clone();
        let writer = match &summary.item_shape {
            Some(shape) => Writer::Dense(DynDenseWriter::create(
                &path,
                summary.dtype,
                shape,
                &options,
            )?),
            None => Writer::Ragged(DynRaggedWriter::create(
                &path,
                summary.dtype,
                summary.ndim,
                &options,
            )?),
        };
        columns.push(Column {
            buffer: RecordBuffer::new(summary.ndim),
            plan,
            decoder,
            writer,
            summary,
        });
    }

    let mut projection: Vec<usize> = columns.iter().map(|c| c.plan.index).collect();
    projection.sort_unstable();
    let mut buffered = 0usize;
    let mut read = 0u64;
    let mut kept = 0u64;
    let (mut dropped_null, mut dropped_empty) = (0u64, 0u64);
    for file in &files {
        let row_bytes = file.row_bytes().saturating_add(decoded_row_bytes).max(1);
        let batch_rows = (settings.max_bytes / 4 / row_bytes).clamp(1, settings.max_records);
        for batch in file.batches(batch_rows, Some(&projection))? {
            let batch = batch?;
            let mut offset = 0;
            while offset < batch.num_rows() {
                let take = (batch.num_rows() - offset).min(settings.max_records - buffered);
                let part = batch.slice(offset, take);
                let runs = match rows_to_drop(&columns, &part, settings) {
                    Some((mask, nulls, empties)) => {
                        dropped_null += nulls;
                        dropped_empty += empties;
                        kept_runs(&mask)
                    }
                    None => vec![(0, take)],
                };
                for (start, end) in runs {
                    let run = part.slice(start, end - start);
                    for c in &mut columns {
                        decode_part(&ctx, c, &run, read + start as u64)?;
                    }
                    buffered += end - start;
                    kept += (end - start) as u64;
                }
                offset += take;
                read += take as u64;
                progress.inc(take as u64);
                let bytes: usize = columns.iter().map(|c| c.buffer.bytes()).sum();
                if buffered >= settings.max_records || bytes >= settings.max_bytes {
                    flush(&ctx, &mut columns)?;
                    buffered = 0;
                }
            }
        }
    }
    flush(&ctx, &mut columns)?;

    let mut summaries = Vec::with_capacity(columns.len());
    for c in columns {
        let len = c.writer.len();
        if len != kept || read != total || kept + dropped_null + dropped_empty != total {
            return Err(column_error(
                &ctx,
                &c.plan.name,
                format!(
                    "record counts disagree: the files declare {total} rows, {read} were read, \
                     {} dropped and {len} written",
                    dropped_null + dropped_empty
                ),
            ));
        }
        c.writer
            .close()
            .map_err(|e| column_error(&ctx, &c.plan.name, e.to_string()))?;
        summaries.push(c.summary);
    }
    Ok(HfSplit {
        name: split.name.clone(),
        records: kept,
        source_rows: total,
        dropped_null_rows: dropped_null,
        dropped_empty_rows: dropped_empty,
        partial: split.partial,
        columns: summaries,
    })
}

/// Decodes the rows of `part` (split rows from `first_row` on) into the
/// column's buffer.
fn decode_part(ctx: &str, c: &mut Column, part: &RecordBatch, first_row: u64) -> Result<(), Error> {
    let array = part
        .column_by_name(&c.plan.name)
        .ok_or_else(|| column_error(ctx, &c.plan.name, "missing from a batch"))?;
    let before = c.buffer.len();
    match &c.decoder {
        Decoder::Numeric(dims) => decode_numeric(array.as_ref(), dims, first_row, &mut c.buffer)
            .map_err(|e| column_error(ctx, &c.plan.name, e))?,
        Decoder::Image {
            format,
            shape,
            convert,
        } => images::encoded_images(array.as_ref(), first_row)
            .and_then(|enc| {
                images::decode_into(
                    &enc,
                    first_row,
                    *format,
                    shape.as_deref(),
                    *convert,
                    &mut c.buffer,
                )
            })
            .map_err(|e| column_error(ctx, &c.plan.name, e))?,
        Decoder::Text(encoder) => decode_text(array.as_ref(), first_row, encoder, &mut c.buffer)
            .map_err(|(row, e)| row_error(ctx, &c.plan.name, row, e))?,
    }
    if matches!(c.writer, Writer::Ragged(_)) {
        for i in before..c.buffer.len() {
            let (shape, bytes) = c.buffer.record(i);
            if bytes.is_empty() {
                return Err(row_error(
                    ctx,
                    &c.plan.name,
                    first_row + (i - before) as u64,
                    format!(
                        "the record is empty (shape {shape:?}); Ragged stores cannot hold empty \
                         records (--drop-empty-rows leaves such rows out)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Writes every column's buffered records.
fn flush(ctx: &str, columns: &mut [Column]) -> Result<(), Error> {
    for c in columns.iter_mut() {
        if c.buffer.len() == 0 {
            continue;
        }
        let result = match &mut c.writer {
            Writer::Dense(w) => w.append_bytes(&c.buffer.data, c.buffer.len()),
            Writer::Ragged(w) => w.append_bytes(c.buffer.iter()),
        };
        result.map_err(|e| column_error(ctx, &c.plan.name, e.to_string()))?;
        c.buffer.clear();
    }
    Ok(())
}
