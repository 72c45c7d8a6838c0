//! String columns: stored as their UTF-8 bytes, or tokenized.
//!
//! - bytes: every string becomes a Ragged `u8` rank-1 record of its UTF-8
//!   bytes;
//! - tokens: every string is encoded with a Hugging Face `tokenizers`
//!   tokenizer (`tokenizer.json`, from a local file or a Hub model repo at a
//!   pinned commit) into a Ragged `u32` rank-1 record of token ids,
//!   optionally with the tokenizer's special tokens and an appended EOS id.
//!
//! A `tokenizer.json` may carry its own `truncation` and `padding` settings
//! (many Hub tokenizers say `max_length: 512`); they are turned off, so
//! every record holds all of its string's tokens and no padding. A panic
//! inside the tokenizers crate on one string is an error naming the row.
//!
//! Rows are encoded in parallel on rayon's pool, one bounded write batch at
//! a time. Empty strings and nulls are errors naming the row (unless the
//! split drops such rows first).

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_schema::DataType;
use hf_hub::RepoType;
use rayon::prelude::*;
use tokenizers::Tokenizer;

use super::decode::{DecodeError, RecordBuffer};
use crate::error::Error;
use crate::hub::{self, Hub};

/// What was used to tokenize, for the summary.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TokenizerInfo {
    /// The reference given: a local path or a Hub model repo id.
    pub reference: String,
    /// For a Hub model: the revision asked for and the commit it resolved to.
    pub hub: Option<(String, String)>,
    /// The local `tokenizer.json` read.
    pub file: PathBuf,
    /// Whether the tokenizer's special tokens were added.
    pub add_special_tokens: bool,
    /// The EOS token id appended to every record, if any.
    pub eos_id: Option<u32>,
    /// Size of the tokenizer's vocabulary, special tokens included.
    pub vocab_size: usize,
    /// The `max_length` of the file's own `truncation` block, which is not
    /// applied (records keep all their tokens).
    pub ignored_truncation: Option<usize>,
    /// True when the file has a `padding` block, which is not applied.
    pub ignored_padding: bool,
}

/// How string columns are encoded.
#[derive(Clone)]
pub(crate) enum TextEncoder {
    /// UTF-8 bytes.
    Bytes,
    /// Token ids.
    Tokens(Arc<Tokens>),
}

/// A loaded tokenizer and how to apply it.
pub(crate) struct Tokens {
    pub(crate) tokenizer: Tokenizer,
    pub(crate) info: TokenizerInfo,
}

/// What the user asked for; resolved by [`load_tokenizer`].
#[derive(Debug, Clone)]
pub(crate) struct TokenizerRequest {
    pub(crate) reference: String,
    pub(crate) revision: String,
    pub(crate) add_special_tokens: bool,
    pub(crate) append_eos: bool,
    pub(crate) eos_token: Option<String>,
}

/// Hub connection settings shared with the dataset's.
pub(crate) struct HubSettings<'a> {
    pub(crate) endpoint: Option<&'a str>,
    pub(crate) cache_dir: Option<&'a PathBuf>,
    pub(crate) token: Option<String>,
    pub(crate) progress: bool,
}

/// Token names tried, in order, when the EOS token is not named.
const EOS_NAMES: [&str; 7] = [
    "</s>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<eos>",
    "<|eos|>",
    "[SEP]",
    "<|im_end|>",
];

fn tok_error(reference: &str, detail: impl Into<String>) -> Error {
    Error::Tokenizer {
        reference: reference.to_owned(),
        detail: detail.into(),
    }
}

/// The `eos_token` of a `tokenizer_config.json`, if the file names one.
fn config_eos(config: &Path) -> Option<String> {
    let text = std::fs::read_to_string(config).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    let eos = value.get("eos_token")?;
    eos.as_str()
        .map(str::to_owned)
        .or_else(|| eos.get("content")?.as_str().map(str::to_owned))
}

/// Loads the tokenizer `request` names: a `tokenizer.json` file, a
/// directory holding one, else a Hub model repo (fetched at a pinned commit).
pub(crate) fn load_tokenizer(
    request: &TokenizerRequest,
    hub_settings: HubSettings<'_>,
) -> Result<Tokens, Error> {
    let reference = request.reference.as_str();
    let local = Path::new(reference);
    let (file, config, hub) = if local.is_file() {
        let config = local.with_file_name("tokenizer_config.json");
        (local.to_path_buf(), Some(config), None)
    } else if local.is_dir() {
        let file = local.join("tokenizer.json");
        if !file.is_file() {
            return Err(tok_error(
                reference,
                "the directory holds no tokenizer.json",
            ));
        }
        (file, Some(local.join("tokenizer_config.json")), None)
    } else if reference.starts_with(['.', '/']) || reference.ends_with(".json") {
        return Err(tok_error(reference, "no such file"));
    } else {
        let hub = Hub::new(
            reference,
            RepoType::Model,
            hub_settings.endpoint,
            hub_settings.cache_dir,
            hub_settings.token,
            hub_settings.progress,
        )?;
        let resolved = hub.resolve(&request.revision)?;
        if !resolved.files.iter().any(|f| f == "tokenizer.json") {
            return Err(tok_error(
                reference,
                format!(
                    "the model repo has no tokenizer.json at revision {:?} (commit {})",
                    request.revision, resolved.sha
                ),
            ));
        }
        let file = hub.fetch(&resolved.sha, "tokenizer.json")?;
        let config = if resolved.files.iter().any(|f| f == "tokenizer_config.json") {
            Some(hub.fetch(&resolved.sha, "tokenizer_config.json")?)
        } else {
            None
        };
        (file, config, Some((request.revision.clone(), resolved.sha)))
    };
    let mut tokenizer = Tokenizer::from_file(&file)
        .map_err(|e| tok_error(reference, format!("cannot load {}: {e}", file.display())))?;
    // The file's own truncation and padding would cut or pad every record
    // silently (and a stride >= max_length makes the crate panic): off.
    let ignored_truncation = tokenizer.get_truncation().map(|t| t.max_length);
    let ignored_padding = tokenizer.get_padding().is_some();
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(None)
        .map_err(|e| tok_error(reference, format!("cannot turn its truncation off: {e}")))?;
    let eos_id = if request.append_eos {
        let name = request
            .eos_token
            .clone()
            .or_else(|| config.as_deref().and_then(config_eos))
            .or_else(|| {
                EOS_NAMES
                    .iter()
                    .find(|n| tokenizer.token_to_id(n).is_some())
                    .map(|n| (*n).to_owned())
            })
            .ok_or_else(|| {
                tok_error(
                    reference,
                    "cannot tell its EOS token (no tokenizer_config.json eos_token and none of \
                     the usual names); name it with --eos-token",
                )
            })?;
        Some(tokenizer.token_to_id(&name).ok_or_else(|| {
            tok_error(
                reference,
                format!("the EOS token {name:?} is not in its vocabulary"),
            )
        })?)
    } else {
        None
    };
    let vocab_size = tokenizer.get_vocab_size(true);
    Ok(Tokens {
        info: TokenizerInfo {
            reference: reference.to_owned(),
            hub,
            file,
            add_special_tokens: request.add_special_tokens,
            eos_id,
            vocab_size,
            ignored_truncation,
            ignored_padding,
        },
        tokenizer,
    })
}

/// The strings of `column`'s rows; a null is an error naming the row.
pub(crate) fn strings(column: &dyn Array, first_row: u64) -> Result<Vec<&str>, DecodeError> {
    let value = |i: usize| -> Option<&str> {
        match column.data_type() {
            DataType::Utf8 => Some(column.as_string::<i32>().value(i)),
            DataType::LargeUtf8 => Some(column.as_string::<i64>().value(i)),
            DataType::Utf8View => Some(column.as_string_view().value(i)),
            _ => None,
        }
    };
    let mut out = Vec::with_capacity(column.len());
    for i in 0..column.len() {
        let row = first_row + i as u64;
        if column.is_null(i) {
            return Err(DecodeError::at(row, super::NULL_ROW));
        }
        let s = value(i).ok_or_else(|| {
            DecodeError::at(
                row,
                format!("expected strings, found {}", column.data_type()),
            )
        })?;
        if s.is_empty() {
            return Err(DecodeError::at(row, super::EMPTY_STRING));
        }
        out.push(s);
    }
    Ok(out)
}

/// Encodes the rows of a string column into `out`.
pub(crate) fn decode_text(
    column: &dyn Array,
    first_row: u64,
    encoder: &TextEncoder,
    out: &mut RecordBuffer,
) -> Result<(), DecodeError> {
    let strings = strings(column, first_row)?;
    match encoder {
        TextEncoder::Bytes => {
            for s in strings {
                out.push(&[s.len()], s.as_bytes());
            }
        }
        TextEncoder::Tokens(tokens) => {
            let encoded: Vec<Result<Vec<u32>, DecodeError>> = strings
                .par_iter()
                .enumerate()
                .map(|(i, s)| encode_row(tokens, s, first_row + i as u64))
                .collect();
            for (i, ids) in encoded.into_iter().enumerate() {
                let ids = ids?;
                if ids.is_empty() {
                    return Err(DecodeError::at(
                        first_row + i as u64,
                        "tokenizes to no tokens; Ragged stores cannot hold empty records \
                         (--drop-empty-rows drops only empty strings; --append-eos or \
                         --add-special-tokens gives every record a token)"
                            .to_owned(),
                    ));
                }
                let start = out.data.len();
                out.data.reserve(ids.len() * 4);
                for id in &ids {
                    out.data.extend_from_slice(&id.to_le_bytes());
                }
                debug_assert_eq!(out.data.len() - start, ids.len() * 4);
                out.finish_record(&[ids.len()]);
            }
        }
    }
    Ok(())
}

/// The token ids of `text`, split row `row`, EOS appended when asked. An
/// error or a panic inside the tokenizers crate is an error naming the row.
fn encode_row(tokens: &Tokens, text: &str, row: u64) -> Result<Vec<u32>, DecodeError> {
    let encode = || {
        tokens
            .tokenizer
            .encode_fast(text, tokens.info.add_special_tokens)
    };
    let enc = match std::panic::catch_unwind(AssertUnwindSafe(encode)) {
        Ok(Ok(enc)) => enc,
        Ok(Err(e)) => return Err(DecodeError::at(row, format!("tokenizer failed: {e}"))),
        Err(panic) => {
            return Err(DecodeError::at(
                row,
                format!(
                    "the tokenizer panicked: {}",
                    super::convert::panic_message(panic.as_ref())
                ),
            ));
        }
    };
    let mut ids = enc.get_ids().to_vec();
    ids.extend(tokens.info.eos_id);
    Ok(ids)
}

/// Checks a tokenizer reference before any request: a path or a repo id.
pub(crate) fn check_reference(reference: &str) -> Result<(), Error> {
    if reference.is_empty() {
        return Err(Error::invalid("the tokenizer reference is empty"));
    }
    let local = Path::new(reference);
    if local.exists() || reference.starts_with(['.', '/']) || reference.ends_with(".json") {
        return Ok(());
    }
    hub::check_repo_id(reference, "model")
}

#[cfg(test)]
mod tests {
    use arrow_array::StringArray;

    use super::*;

    /// A word-level tokenizer whose file asks for truncation to 2 tokens
    /// (with `stride`) and padding to 8.
    fn tokenizer_json(stride: usize) -> String {
        format!(
            r#"{{"version":"1.0",
            "truncation":{{"direction":"Right","max_length":2,"strategy":"LongestFirst","stride":{stride}}},
            "padding":{{"strategy":{{"Fixed":8}},"direction":"Right","pad_to_multiple_of":null,
                "pad_id":0,"pad_type_id":0,"pad_token":"[PAD]"}},
            "added_tokens":[],"normalizer":null,"pre_tokenizer":{{"type":"WhitespaceSplit"}},
            "post_processor":null,"decoder":null,
            "model":{{"type":"WordLevel","vocab":{{"[PAD]":0,"[UNK]":1,"a":2,"b":3,"c":4}},
                "unk_token":"[UNK]"}}}}"#
        )
    }

    fn load(stride: usize) -> (tempfile::TempDir, Tokens) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tokenizer.json");
        std::fs::write(&file, tokenizer_json(stride)).unwrap();
        let request = TokenizerRequest {
            reference: file.to_str().unwrap().to_owned(),
            revision: "main".to_owned(),
            add_special_tokens: false,
            append_eos: false,
            eos_token: None,
        };
        let settings = HubSettings {
            endpoint: None,
            cache_dir: None,
            token: None,
            progress: false,
        };
        let tokens = load_tokenizer(&request, settings).unwrap();
        (dir, tokens)
    }

    fn encode(
        tokens: Tokens,
        strings: &[&str],
        first_row: u64,
    ) -> Result<Vec<Vec<u32>>, DecodeError> {
        let column = StringArray::from(strings.to_vec());
        let mut out = RecordBuffer::new(1);
        decode_text(
            &column,
            first_row,
            &TextEncoder::Tokens(Arc::new(tokens)),
            &mut out,
        )?;
        Ok(out
            .iter()
            .map(|(_, bytes)| {
                bytes
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect()
            })
            .collect())
    }

    #[test]
    fn the_files_truncation_and_padding_are_not_applied() {
        let (_dir, tokens) = load(0);
        assert_eq!(tokens.info.ignored_truncation, Some(2));
        assert!(tokens.info.ignored_padding);
        let ids = encode(tokens, &["a b c a b", "c"], 0).unwrap();
        assert_eq!(ids, [vec![2, 3, 4, 2, 3], vec![4]]);
    }

    #[test]
    fn a_stride_beyond_max_length_does_not_panic() {
        // tokenizers asserts stride < max_length while truncating.
        let (_dir, tokens) = load(5);
        let ids = encode(tokens, &["a b c", "b"], 0).unwrap();
        assert_eq!(ids, [vec![2, 3, 4], vec![3]]);
    }

    #[test]
    fn a_panic_in_the_tokenizer_is_an_error_naming_the_row() {
        // The same file used as is (truncation on, stride 5 >= max_length 2):
        // the tokenizers crate panics on any string longer than 2 tokens.
        let tokenizer: Tokenizer = tokenizer_json(5).parse().unwrap();
        let tokens = Tokens {
            tokenizer,
            info: TokenizerInfo {
                reference: "t".to_owned(),
                hub: None,
                file: PathBuf::from("t"),
                add_special_tokens: false,
                eos_id: None,
                vocab_size: 5,
                ignored_truncation: None,
                ignored_padding: false,
            },
        };
        let e = encode(tokens, &["a", "a b c"], 10).unwrap_err();
        assert_eq!(e.row, Some(11));
        assert!(e.detail.contains("the tokenizer panicked"), "{}", e.detail);
        assert!(e.detail.contains("stride"), "{}", e.detail);
    }
}
