//! Any Arrow [`RecordBatchReader`] to stores: a polars or DataFusion
//! stream, a Lance scanner, batches built in memory.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use arrow_array::RecordBatchReader;
use arrow_ipc::writer::FileWriter;

use super::{SplitTables, TableOptions, TableSource, TableSummary, convert_tables};
use crate::error::Error;
use crate::ipc::IpcTable;
use crate::output::Staging;

/// The spool directory beside `out`, `.<out>.spool-<pid>-<n>`: removed
/// when dropped, and held by its writer like a staged root (see
/// [`crate::output`]), so a later conversion to `out` removes it when its
/// writer was killed.
fn spool_dir(out: &Path) -> Result<Staging, Error> {
    Staging::create(out, "spool")
}

/// Writes `reader`'s batches to the Arrow IPC file `path`.
fn spool_batches<R: RecordBatchReader>(reader: R, split: &str, path: &Path) -> Result<(), Error> {
    let label = format!("split {split:?} (record batch stream)");
    let file = File::create(path).map_err(|e| Error::io(path, e))?;
    let schema = reader.schema();
    let mut writer = FileWriter::try_new(BufWriter::with_capacity(1 << 20, file), &schema)
        .map_err(|e| Error::Source {
            file: label.clone(),
            detail: format!("cannot spool its schema: {e}"),
        })?;
    for (k, batch) in reader.enumerate() {
        let batch = batch.map_err(|e| Error::Source {
            file: label.clone(),
            detail: format!("batch {k}: {e}"),
        })?;
        // The IPC writer does not check a batch against the schema: a
        // batch of other columns or types would be reinterpreted.
        let fields = batch.schema_ref().fields().clone();
        if fields.len() != schema.fields().len() {
            return Err(Error::Source {
                file: label,
                detail: format!(
                    "batch {k} has {} columns, the stream's schema {}",
                    fields.len(),
                    schema.fields().len()
                ),
            });
        }
        for (got, want) in fields.iter().zip(schema.fields().iter()) {
            if got.name() != want.name() || !got.data_type().equals_datatype(want.data_type()) {
                return Err(Error::Source {
                    file: label,
                    detail: format!(
                        "batch {k}: column {:?} of type {} where the stream's schema has {:?} of type {}",
                        got.name(),
                        got.data_type(),
                        want.name(),
                        want.data_type()
                    ),
                });
            }
        }
        writer.write(&batch).map_err(|e| Error::Source {
            file: label.clone(),
            detail: format!("batch {k}: cannot spool it: {e}"),
        })?;
    }
    writer.finish().map_err(|e| Error::Source {
        file: label.clone(),
        detail: format!("cannot finish the spool: {e}"),
    })?;
    let inner = writer.into_inner().map_err(|e| Error::Source {
        file: label,
        detail: format!("cannot finish the spool: {e}"),
    })?;
    inner
        .into_inner()
        .map_err(|e| Error::io(path, e.into_error()))?
        .sync_all()
        .map_err(|e| Error::io(path, e))
}

/// Converts record-batch streams, one per split (`(name, reader)`, in
/// order), to stores under `out` (`out/<split>/<store>/`, or a part of each
/// split with [`TableOptions::part`]) by the table layer's column rules
/// ([module documentation](super)): any
/// [`RecordBatchReader`] converts, so a polars `DataFrame` (through the
/// Arrow C stream interface), a DataFusion stream, a Lance scanner or
/// batches built in memory need no files.
///
/// Column meanings beyond the Arrow types (`Image`, `Audio`, `ClassLabel`)
/// come from the schema's `huggingface` metadata, as in files `datasets`
/// writes. Each stream is read once, into an Arrow IPC file beside `out`
/// (`.<out>.spool-<pid>-…`, removed afterwards, also when the conversion
/// fails; what a killed process leaves is removed by the next conversion
/// to `out`): the layer
/// needs a split's row count and a first pass over its images' headers
/// before it writes, and a stream can be read only once. Memory stays at
/// about one batch of the stream and one write batch of decoded records.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{ArrayRef, Float32Array, Int64Array, RecordBatch, RecordBatchIterator};
/// use loaderx_convert::table::{TableOptions, convert_record_batches};
///
/// let batch = RecordBatch::try_from_iter([
///     ("x", Arc::new(Float32Array::from(vec![0.5, 1.5, 2.5])) as ArrayRef),
///     ("label", Arc::new(Int64Array::from(vec![0, 1, 0])) as ArrayRef),
/// ])?;
/// let schema = batch.schema();
/// let reader = RecordBatchIterator::new([Ok(batch)], schema);
/// let out = std::env::temp_dir().join(format!("loaderx-doc-batches-{}", std::process::id()));
/// let summary = convert_record_batches(vec![("train", reader)], &out, &TableOptions::new())?;
/// assert_eq!(summary.splits[0].records, 3);
/// let labels = loaderx_core::Store::open(out.join("train/label"))?;
/// assert_eq!(labels.len(), 3);
/// # std::fs::remove_dir_all(&out)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// [`Error::Source`] when a stream fails or cannot be spooled (naming the
/// split and the batch); otherwise as
/// [`convert_parquet`](crate::local::convert_parquet).
pub fn convert_record_batches<R: RecordBatchReader>(
    splits: Vec<(&str, R)>,
    out: impl AsRef<Path>,
    options: &TableOptions,
) -> Result<TableSummary, Error> {
    let out = out.as_ref();
    options.check()?;
    let names: Vec<String> = splits.iter().map(|(name, _)| (*name).to_owned()).collect();
    for name in &names {
        crate::output::safe_component("split", name)?;
    }
    let mut dir = None;
    let open = || {
        let spool = spool_dir(out)?;
        let mut tables = Vec::with_capacity(splits.len());
        for (k, (name, reader)) in splits.into_iter().enumerate() {
            let path = spool.path().join(format!("{k}.arrow"));
            let label = format!("split {name:?} (record batch stream)");
            let result =
                spool_batches(reader, name, &path).and_then(|()| IpcTable::open(&path, &label));
            match result {
                Ok(table) => tables.push(SplitTables {
                    name: name.to_owned(),
                    partial: false,
                    tables: vec![Box::new(table) as Box<dyn TableSource>],
                }),
                Err(e) => {
                    drop(spool);
                    return Err(e);
                }
            }
        }
        dir = Some(spool);
        Ok(tables)
    };
    let summary = convert_tables(&names, open, out, options, "record batches", Vec::new());
    drop(dir);
    summary
}
