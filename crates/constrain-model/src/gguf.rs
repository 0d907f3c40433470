//! Reading a GGUF file's header safely: existence, parse, truncation, and typed
//! access to metadata. Weights are read later by candle from the same
//! [`GgufFile`].

use crate::ModelError;
use candle_core::quantized::gguf_file;
use std::fs::File;
use std::io::{BufReader, Seek};
use std::path::{Path, PathBuf};

/// An opened GGUF file whose header parsed and whose tensor data lies entirely
/// inside the file.
pub struct GgufFile {
    pub(crate) path: PathBuf,
    pub(crate) content: gguf_file::Content,
    pub(crate) reader: BufReader<File>,
}

impl GgufFile {
    /// Opens `path`, parses the header and checks that every tensor's data
    /// ends within the file.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile, ModelError> {
        let path = path.as_ref().to_path_buf();
        let shown = path.display().to_string();
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ModelError::NotFound { path: shown })
            }
            Err(source) => {
                return Err(ModelError::Io {
                    path: shown,
                    source,
                })
            }
        };
        let actual = file
            .metadata()
            .map_err(|source| ModelError::Io {
                path: shown.clone(),
                source,
            })?
            .len();
        let mut reader = BufReader::new(file);
        let content = gguf_file::Content::read(&mut reader).map_err(|e| ModelError::Corrupt {
            path: shown.clone(),
            reason: e.to_string(),
        })?;
        for (name, info) in &content.tensor_infos {
            let elems = info.shape.elem_count() as u64;
            let block = info.ggml_dtype.block_size() as u64;
            let size = elems / block.max(1) * info.ggml_dtype.type_size() as u64;
            let needed = content.tensor_data_offset + info.offset + size;
            if needed > actual {
                return Err(ModelError::Truncated {
                    path: shown,
                    tensor: name.clone(),
                    needed,
                    actual,
                });
            }
        }
        reader.rewind().map_err(|source| ModelError::Io {
            path: shown.clone(),
            source,
        })?;
        Ok(GgufFile {
            path,
            content,
            reader,
        })
    }

    /// The path the file was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `general.architecture` (`"qwen2"`, `"qwen3"`...).
    pub fn architecture(&self) -> Result<&str, ModelError> {
        self.string("general.architecture")
    }

    /// Every metadata key with its value.
    pub fn metadata(&self) -> &std::collections::HashMap<String, gguf_file::Value> {
        &self.content.metadata
    }

    fn shown(&self) -> String {
        self.path.display().to_string()
    }

    pub(crate) fn meta_err(&self, key: &str, detail: impl Into<String>) -> ModelError {
        ModelError::Metadata {
            path: self.shown(),
            key: key.to_string(),
            detail: detail.into(),
        }
    }

    fn get(&self, key: &str) -> Result<&gguf_file::Value, ModelError> {
        self.content
            .metadata
            .get(key)
            .ok_or_else(|| self.meta_err(key, "missing"))
    }

    /// A string metadata value.
    pub fn string(&self, key: &str) -> Result<&str, ModelError> {
        self.get(key)?
            .to_string()
            .map(|s| s.as_str())
            .map_err(|e| self.meta_err(key, e.to_string()))
    }

    /// An integer metadata value of any integer type.
    pub fn integer(&self, key: &str) -> Result<u64, ModelError> {
        let v = self.get(key)?;
        as_u64(v).ok_or_else(|| self.meta_err(key, format!("not a non-negative integer: {v:?}")))
    }

    /// An optional integer metadata value.
    pub fn opt_integer(&self, key: &str) -> Result<Option<u64>, ModelError> {
        match self.content.metadata.get(key) {
            None => Ok(None),
            Some(_) => self.integer(key).map(Some),
        }
    }

    /// An array metadata value.
    pub fn array(&self, key: &str) -> Result<&Vec<gguf_file::Value>, ModelError> {
        self.get(key)?
            .to_vec()
            .map_err(|e| self.meta_err(key, e.to_string()))
    }

    /// An array of strings.
    pub fn strings(&self, key: &str) -> Result<Vec<&str>, ModelError> {
        self.array(key)?
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.to_string()
                    .map(|s| s.as_str())
                    .map_err(|_| self.meta_err(key, format!("element {i} is not a string")))
            })
            .collect()
    }

    /// Whether the file holds a tensor of that name.
    pub fn has_tensor(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    /// The shape of a tensor (candle order: outermost first).
    pub fn tensor_shape(&self, name: &str) -> Option<Vec<usize>> {
        self.content
            .tensor_infos
            .get(name)
            .map(|i| i.shape.dims().to_vec())
    }
}

pub(crate) fn as_u64(v: &gguf_file::Value) -> Option<u64> {
    use gguf_file::Value as V;
    match *v {
        V::U8(x) => Some(x as u64),
        V::U16(x) => Some(x as u64),
        V::U32(x) => Some(x as u64),
        V::U64(x) => Some(x),
        V::I8(x) => u64::try_from(x).ok(),
        V::I16(x) => u64::try_from(x).ok(),
        V::I32(x) => u64::try_from(x).ok(),
        V::I64(x) => u64::try_from(x).ok(),
        _ => None,
    }
}
