//! Arrow IPC files and Parquet files through arrow-rs, 256 records per
//! record batch / row group. A gather decodes every group it touches once
//! (in parallel), then copies the records out.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{Array, ArrayRef, BinaryArray, FixedSizeBinaryArray, RecordBatch};
use arrow_ipc::reader::FileDecoder;
use arrow_ipc::writer::{FileWriter, IpcWriteOptions};
use arrow_ipc::{Block, CompressionType};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use loaderx_core::Codec;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use rayon::prelude::*;

use super::{Backend, Gathered, Result, allocated, elements_of, output, scatter, value_of};
use crate::workload::Workload;

/// Records per record batch or row group, as the Python original measured.
pub const GROUP: usize = 256;

/// Which columnar file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Arrow IPC file (uncompressed, or zstd buffer compression).
    Ipc,
    /// Parquet (uncompressed or zstd level 3, no dictionary encoding).
    Parquet,
}

enum Reader {
    Ipc {
        buffer: arrow_buffer::Buffer,
        decoder: FileDecoder,
        blocks: Vec<Block>,
    },
    Parquet {
        bytes: bytes::Bytes,
        meta: ArrowReaderMetadata,
    },
}

/// An Arrow IPC or Parquet file holding the workload in one binary column.
pub struct Columnar<'w> {
    w: &'w Workload,
    format: Format,
    codec: Codec,
    path: PathBuf,
    reader: Option<Reader>,
}

impl<'w> Columnar<'w> {
    /// For `w` in `format` with `codec` (raw or zstd).
    pub fn new(w: &'w Workload, format: Format, codec: Codec) -> Columnar<'w> {
        Columnar {
            w,
            format,
            codec,
            path: PathBuf::new(),
            reader: None,
        }
    }

    fn schema(w: &Workload) -> SchemaRef {
        let dt = match &w.dense {
            Some(_) => DataType::FixedSizeBinary(w.range(0).len() as i32),
            None => DataType::Binary,
        };
        Arc::new(Schema::new(vec![Field::new("x", dt, false)]))
    }

    fn group(w: &Workload, schema: &SchemaRef, start: usize) -> Result<RecordBatch> {
        let end = w.len().min(start + GROUP);
        let array: ArrayRef = match &w.dense {
            Some(_) => Arc::new(FixedSizeBinaryArray::try_from_iter(
                (start..end).map(|i| w.record(i)),
            )?),
            None => Arc::new(BinaryArray::from_iter_values(
                (start..end).map(|i| value_of(w, i)),
            )),
        };
        Ok(RecordBatch::try_new(schema.clone(), vec![array])?)
    }

    fn open(&self) -> Result<Reader> {
        let data = std::fs::read(&self.path)?;
        Ok(match self.format {
            Format::Ipc => {
                let buffer = arrow_buffer::Buffer::from(data);
                let trailer = buffer.len() - 10;
                let footer_len =
                    arrow_ipc::reader::read_footer_length(buffer[trailer..].try_into()?)?;
                let footer = arrow_ipc::root_as_footer(&buffer[trailer - footer_len..trailer])
                    .map_err(|e| e.to_string())?;
                let schema = arrow_ipc::convert::try_fb_to_schema(
                    footer.schema().ok_or("IPC footer without schema")?,
                )?;
                let decoder = FileDecoder::new(Arc::new(schema), footer.version());
                let blocks = footer
                    .recordBatches()
                    .map(|b| b.iter().copied().collect())
                    .unwrap_or_default();
                Reader::Ipc {
                    buffer,
                    decoder,
                    blocks,
                }
            }
            Format::Parquet => {
                let bytes = bytes::Bytes::from(data);
                let meta = ArrowReaderMetadata::load(&bytes, ArrowReaderOptions::new())?;
                Reader::Parquet { bytes, meta }
            }
        })
    }

    /// Decodes group `g`'s column.
    fn decode(&self, reader: &Reader, g: usize) -> Result<ArrayRef> {
        let batch = match reader {
            Reader::Ipc {
                buffer,
                decoder,
                blocks,
            } => {
                let block = blocks.get(g).ok_or("no such record batch")?;
                let len = block.bodyLength() as usize + block.metaDataLength() as usize;
                let data = buffer.slice_with_length(block.offset() as usize, len);
                decoder
                    .read_record_batch(block, &data)?
                    .ok_or("empty record batch")?
            }
            Reader::Parquet { bytes, meta } => {
                ParquetRecordBatchReaderBuilder::new_with_metadata(bytes.clone(), meta.clone())
                    .with_row_groups(vec![g])
                    .with_batch_size(GROUP)
                    .build()?
                    .next()
                    .ok_or("empty row group")??
            }
        };
        Ok(batch.column(0).clone())
    }
}

/// The bytes of row `row` of a binary column.
fn value(array: &ArrayRef, row: usize) -> Result<&[u8]> {
    if let Some(a) = array.as_any().downcast_ref::<FixedSizeBinaryArray>() {
        return Ok(a.value(row));
    }
    if let Some(a) = array.as_any().downcast_ref::<BinaryArray>() {
        return Ok(a.value(row));
    }
    Err(format!("unexpected column type {}", array.data_type()).into())
}

impl Backend for Columnar<'_> {
    fn name(&self) -> String {
        match self.format {
            Format::Ipc => format!("Arrow IPC ({GROUP}/batch) {}", self.codec),
            Format::Parquet => format!("Parquet ({GROUP}/row group) {}", self.codec),
        }
    }

    fn write(&mut self, w: &Workload, dir: &Path) -> Result<Duration> {
        let schema = Self::schema(w);
        let zstd = self.codec != Codec::Raw;
        let file;
        let started;
        match self.format {
            Format::Ipc => {
                self.path = dir.join(format!("arrow_{}.arrow", self.codec));
                file = std::fs::File::create(&self.path)?;
                let options = IpcWriteOptions::default()
                    .try_with_compression(zstd.then_some(CompressionType::ZSTD))?;
                started = Instant::now();
                let mut writer = FileWriter::try_new_with_options(file, &schema, options)?;
                for start in (0..w.len()).step_by(GROUP) {
                    writer.write(&Self::group(w, &schema, start)?)?;
                }
                writer.finish()?;
            }
            Format::Parquet => {
                self.path = dir.join(format!("parquet_{}.parquet", self.codec));
                file = std::fs::File::create(&self.path)?;
                let props = WriterProperties::builder()
                    .set_max_row_group_row_count(Some(GROUP))
                    .set_dictionary_enabled(false)
                    .set_compression(if zstd {
                        Compression::ZSTD(ZstdLevel::try_new(3)?)
                    } else {
                        Compression::UNCOMPRESSED
                    })
                    .build();
                started = Instant::now();
                let mut writer = ArrowWriter::try_new(file, schema.clone(), Some(props))?;
                for start in (0..w.len()).step_by(GROUP) {
                    writer.write(&Self::group(w, &schema, start)?)?;
                    writer.flush()?;
                }
                writer.close()?;
            }
        }
        let took = started.elapsed();
        self.reader = Some(self.open()?);
        Ok(took)
    }

    fn disk_bytes(&self) -> u64 {
        allocated(&self.path)
    }

    fn gather(&self, idx: &[u64]) -> Result<Box<dyn Gathered + Send>> {
        let reader = self.reader.as_ref().ok_or("gather before write")?;
        let mut groups: Vec<usize> = idx.iter().map(|&i| i as usize / GROUP).collect();
        groups.sort_unstable();
        groups.dedup();
        let decoded: Vec<ArrayRef> = groups
            .par_iter()
            .map(|&g| self.decode(reader, g))
            .collect::<Result<_>>()?;
        let w = self.w;
        let out = scatter(
            w,
            idx,
            || (),
            |(), dst, i| {
                let k = groups
                    .binary_search(&(i / GROUP))
                    .map_err(|_| "group not decoded")?;
                dst.copy_from_slice(elements_of(w, value(&decoded[k], i % GROUP)?));
                Ok(())
            },
        )?;
        Ok(output(w, out))
    }
}
