//! Writable int32 rows of a Python buffer (numpy array, `array.array`, a CPU
//! torch tensor, ...), for one fill.
//!
//! Two ways to the memory:
//!
//! * **Native** (CPython ≥ 3.11, where `PyObject_GetBuffer` and `Py_buffer`
//!   are in the stable ABI): the export is taken in Rust, its geometry
//!   checked here, and released when the fill is over. A numpy array costs
//!   a few hundred ns this way, so nothing needs caching and nothing is kept
//!   past the call: the array can be freed as soon as its owner lets go.
//! * **Python helper** (`constrain._buffer.int32_rows`: `memoryview` +
//!   `ctypes`, since the C buffer API is not in the limited API before 3.11
//!   and the wheel is abi3 for 3.9+), for older interpreters, objects without
//!   the buffer protocol (DLPack, `.numpy()`), and every refusal: it writes
//!   the error messages (dtype, shape, contiguity, device, read-only), so a
//!   bad bitmask is described the same way on every interpreter. Its
//!   memoryview holds the export; a matcher may keep the last one (see
//!   [`Held`]) on interpreters without the native path.
//!
//! Either way the export pins the memory for the whole fill (numpy refuses
//! to resize an exported array), so the GIL can be released meanwhile.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

/// The checked geometry of the rows: address, row count, words a row.
#[derive(Clone, Copy)]
pub struct View {
    addr: usize,
    pub rows: usize,
    pub cols: usize,
}

impl View {
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
    /// `i` is below the row count of the [`View`] this came from, its export
    /// is still held, and no two live slices are of the same row.
    pub unsafe fn row<'a>(self, i: usize) -> &'a mut [u32] {
        std::slice::from_raw_parts_mut((self.addr as *mut u32).add(i * self.cols), self.cols)
    }
}

/// A view opened by the Python helper. `_keep` (the memoryview) holds the
/// buffer export, so the memory stays put while this lives. A matcher keeps
/// the last one it filled where there is no native path, to skip the helper
/// when the same bitmask comes again: the export pins the memory, and the
/// object held cannot be replaced by another at its address.
pub struct Held {
    obj: Py<PyAny>,
    _keep: Py<PyAny>,
    view: View,
    /// The object exports the buffer itself (numpy, `array.array`), so the
    /// export held in `_keep` pins its memory. A tensor reached through
    /// DLPack or `.numpy()` can still move its data (`resize_`, `set_`):
    /// such a view is never reused.
    pinned: bool,
}

static HELPER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

impl Held {
    /// Whether this view may be reused for `obj` with `cols` words a row.
    fn is_of(&self, obj: &Bound<'_, PyAny>, cols: usize) -> bool {
        self.pinned && self.view.cols == cols && self.obj.bind(obj.py()).is(obj)
    }

    /// Reads `obj`'s buffer through the Python helper: C-contiguous,
    /// writable, int32, one or two dimensions (one dimension is one row),
    /// `cols` words per row; raises otherwise.
    fn of(obj: &Bound<'_, PyAny>, cols: usize) -> PyResult<Held> {
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
        Ok(Held {
            obj: obj.clone().unbind(),
            _keep: keep,
            view: View { addr, rows, cols },
            pinned,
        })
    }
}

/// Runs `f` over the rows of `obj` (`cols` int32 words each), holding the
/// buffer export until `f` returns. `cache`: where a matcher keeps the view
/// of its last bitmask on the helper path (`None`: keep nothing).
pub fn with_rows<R>(
    obj: &Bound<'_, PyAny>,
    cols: usize,
    cache: Option<&mut Option<Held>>,
    f: impl FnOnce(View) -> PyResult<R>,
) -> PyResult<R> {
    #[cfg(unix)]
    let f = match native::with(obj, cols, f) {
        Ok(r) => return r,
        Err(f) => f,
    };
    match cache {
        Some(slot) => {
            let held = match slot.take() {
                Some(h) if h.is_of(obj, cols) => h,
                _ => Held::of(obj, cols)?,
            };
            let r = f(held.view);
            if held.pinned {
                *slot = Some(held);
            }
            r
        }
        None => {
            let held = Held::of(obj, cols)?;
            f(held.view)
        }
    }
}

/// The native path: `PyObject_GetBuffer` on CPython ≥ 3.11.
///
/// Declared here rather than taken from `pyo3-ffi`, which (built for
/// abi3-py39) leaves the buffer API out; the functions are called only when
/// the running interpreter is 3.11 or newer, where they and the `Py_buffer`
/// layout belong to the stable ABI. The symbols are resolved against the
/// interpreter when the module loads (unix extension modules link no
/// libpython), and every CPython 3 has them. Not on Windows, whose
/// `python3.dll` of older releases does not export them.
#[cfg(unix)]
mod native {
    use super::View;
    use pyo3::ffi::{PyObject, Py_ssize_t};
    use pyo3::prelude::*;
    use std::ffi::{c_char, c_int, c_void, CStr};
    use std::sync::OnceLock;

    /// CPython's `Py_buffer` (stable ABI from 3.11).
    #[repr(C)]
    struct PyBuffer {
        buf: *mut c_void,
        obj: *mut PyObject,
        len: Py_ssize_t,
        itemsize: Py_ssize_t,
        readonly: c_int,
        ndim: c_int,
        format: *mut c_char,
        shape: *mut Py_ssize_t,
        strides: *mut Py_ssize_t,
        suboffsets: *mut Py_ssize_t,
        internal: *mut c_void,
    }

    extern "C" {
        fn PyObject_GetBuffer(obj: *mut PyObject, view: *mut PyBuffer, flags: c_int) -> c_int;
        fn PyBuffer_Release(view: *mut PyBuffer);
    }

    /// `PyBUF_STRIDES | PyBUF_FORMAT` (`PyBUF_RECORDS_RO`): the geometry and
    /// the item format; writability is checked here, so that a read-only
    /// array goes to the helper for its message.
    const FLAGS: c_int = 0x0010 | 0x0008 | 0x0004;

    /// The formats of a 4-byte signed integer (`l` is 4 bytes on LP64
    /// Windows only; the item size is checked as well).
    const INT32: [&[u8]; 8] = [b"i", b"@i", b"=i", b"<i", b"l", b"@l", b"=l", b"<l"];

    fn available(py: Python<'_>) -> bool {
        static NATIVE: OnceLock<bool> = OnceLock::new();
        *NATIVE.get_or_init(|| {
            std::env::var_os("CONSTRAIN_BUFFER_HELPER").is_none() && py.version_info() >= (3, 11)
        })
    }

    /// Releases the export on drop (with the GIL: a `Release` lives only
    /// inside [`with`], whose caller holds it), also when the fill panics.
    struct Release<'a>(&'a mut PyBuffer);

    impl Drop for Release<'_> {
        fn drop(&mut self) {
            // SAFETY: the export was taken by `PyObject_GetBuffer` and not
            // yet released; the GIL is held (see the type's doc).
            unsafe { PyBuffer_Release(self.0) }
        }
    }

    /// Runs `f` over the rows of `obj` when the native path applies and the
    /// buffer is exactly what a fill needs (writable, C-contiguous int32 of
    /// one or two dimensions, `cols` words a row, not empty); gives `f`
    /// back otherwise (the helper then opens the buffer or says what is
    /// wrong with it). The `Py_buffer` lives in this frame, where it does
    /// not move until it is released: no allocation.
    pub fn with<R, F: FnOnce(View) -> PyResult<R>>(
        obj: &Bound<'_, PyAny>,
        cols: usize,
        f: F,
    ) -> Result<PyResult<R>, F> {
        let py = obj.py();
        if !available(py) {
            return Err(f);
        }
        let mut buf = PyBuffer {
            buf: std::ptr::null_mut(),
            obj: std::ptr::null_mut(),
            len: 0,
            itemsize: 0,
            readonly: 0,
            ndim: 0,
            format: std::ptr::null_mut(),
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            suboffsets: std::ptr::null_mut(),
            internal: std::ptr::null_mut(),
        };
        // SAFETY: the GIL is held (`py`), `obj` is a live object and `buf`
        // a writable `Py_buffer`.
        if unsafe { PyObject_GetBuffer(obj.as_ptr(), &mut buf, FLAGS) } != 0 {
            // No buffer protocol (a tensor reached through DLPack) or a
            // refusal: the helper tries again and words the error.
            let _ = PyErr::take(py);
            return Err(f);
        }
        let export = Release(&mut buf);
        match check(export.0, cols) {
            Some(view) => Ok(f(view)),
            None => Err(f),
        }
    }

    /// The rows, when the export is a fill's buffer.
    fn check(b: &PyBuffer, cols: usize) -> Option<View> {
        if b.readonly != 0 || b.itemsize != 4 || b.format.is_null() || b.shape.is_null() {
            return None;
        }
        // SAFETY: a NUL-terminated string of the exporter (PEP 3118).
        let format = unsafe { CStr::from_ptr(b.format) }.to_bytes();
        if !INT32.contains(&format) {
            return None;
        }
        let ndim = usize::try_from(b.ndim)
            .ok()
            .filter(|n| (1..=2).contains(n))?;
        // SAFETY: `shape` and `strides` (when not null) have `ndim` items.
        let shape = unsafe { std::slice::from_raw_parts(b.shape, ndim) };
        let (rows, words) = if ndim == 1 {
            (1, shape[0])
        } else {
            (shape[0], shape[1])
        };
        let (rows, words) = (usize::try_from(rows).ok()?, usize::try_from(words).ok()?);
        if rows == 0 || words != cols || !b.suboffsets.is_null() {
            return None;
        }
        if !b.strides.is_null() {
            // C-contiguous: each dimension of more than one item steps over
            // the items of the dimensions after it.
            let strides = unsafe { std::slice::from_raw_parts(b.strides, ndim) };
            let mut step: Py_ssize_t = 4;
            for d in (0..ndim).rev() {
                if shape[d] > 1 && strides[d] != step {
                    return None;
                }
                step = step.checked_mul(shape[d])?;
            }
        }
        let addr = b.buf as usize;
        if addr == 0 || addr % 4 != 0 {
            return None;
        }
        Some(View { addr, rows, cols })
    }
}
