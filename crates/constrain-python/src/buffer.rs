//! Writable int32 rows of a Python buffer (numpy array, `array.array`, a CPU
//! torch tensor, ...), found by the Python helper `constrain._buffer.int32_rows`
//! (see the crate essay for why the helper is Python).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

/// A checked view of a caller's 2-D int32 buffer. `_keep` (the memoryview)
/// holds the buffer export, so the memory stays put while it lives (a
/// matcher keeps the last one it filled, with the object, to skip the
/// buffer look-up when the same bitmask comes again: the export pins the
/// memory, and the object held cannot be replaced by another at its address).
pub struct Rows {
    obj: Py<PyAny>,
    _keep: Py<PyAny>,
    addr: usize,
    pub rows: usize,
    pub cols: usize,
    /// The object exports the buffer itself (numpy, `array.array`), so the
    /// export held in `_keep` pins its memory. A tensor reached through
    /// DLPack or `.numpy()` can still move its data (`resize_`, `set_`):
    /// such a view is never reused.
    pinned: bool,
}

static HELPER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

impl Rows {
    /// Whether this view may be reused for `obj`: the same object, whose
    /// memory the held export pins.
    pub fn is_of(&self, obj: &Bound<'_, PyAny>) -> bool {
        self.pinned && self.obj.bind(obj.py()).is(obj)
    }

    /// Reads `obj`'s buffer: C-contiguous, writable, int32, one or two
    /// dimensions (one dimension is one row), `cols` words per row.
    pub fn of(obj: &Bound<'_, PyAny>, cols: usize) -> PyResult<Rows> {
        let py = obj.py();
        let helper = HELPER.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
            Ok(py
                .import("constrain._buffer")?
                .getattr("int32_rows")?
                .unbind())
        })?;
        let (keep, addr, rows, got, pinned): (Py<PyAny>, usize, usize, usize, bool) =
            helper.bind(py).call1((obj,))?.extract()?;
        if got != cols {
            return Err(PyValueError::new_err(format!(
                "bitmask rows have {got} int32 words but this vocabulary needs {cols} \
                 (ceil(vocab_size / 32)); allocate_token_bitmask(batch, vocab_size) makes one"
            )));
        }
        if addr == 0 || addr % 4 != 0 {
            return Err(PyValueError::new_err(
                "bitmask memory is not 4-byte aligned",
            ));
        }
        Ok(Rows {
            obj: obj.clone().unbind(),
            _keep: keep,
            addr,
            rows,
            cols,
            pinned,
        })
    }

    /// The raw row pointer, for filling with the GIL released.
    pub fn ptr(&self) -> RowPtr {
        RowPtr {
            addr: self.addr,
            cols: self.cols,
        }
    }

    /// Checks a row index (negative counts from the end, as in Python).
    pub fn row_index(&self, index: isize) -> PyResult<usize> {
        let i = if index < 0 {
            index + self.rows as isize
        } else {
            index
        };
        if i < 0 || i as usize >= self.rows {
            return Err(PyValueError::new_err(format!(
                "row index {index} is out of range for a bitmask of {} rows",
                self.rows
            )));
        }
        Ok(i as usize)
    }
}

/// The address and width of the rows, sendable to worker threads.
#[derive(Clone, Copy)]
pub struct RowPtr {
    addr: usize,
    cols: usize,
}

impl RowPtr {
    /// Row `i` as a mutable slice.
    ///
    /// # Safety
    /// `i` is below the row count of the [`Rows`] this came from, that
    /// `Rows` is alive, and no two live slices are of the same row.
    pub unsafe fn row<'a>(self, i: usize) -> &'a mut [u32] {
        std::slice::from_raw_parts_mut((self.addr as *mut u32).add(i * self.cols), self.cols)
    }
}
