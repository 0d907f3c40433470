//! The vocabulary cache's byte codec: a little-endian writer ([`Enc`]) and
//! a checked reader ([`Dec`]) that every cached part (the token table, the
//! tries, the BPE tables) encodes itself with.

/// Little-endian writer of the payload.
#[derive(Default)]
pub(crate) struct Enc {
    pub buf: Vec<u8>,
}

impl Enc {
    pub fn u8(&mut self, x: u8) {
        self.buf.push(x);
    }
    pub fn u32(&mut self, x: u32) {
        self.buf.extend_from_slice(&x.to_le_bytes());
    }
    pub fn u64(&mut self, x: u64) {
        self.buf.extend_from_slice(&x.to_le_bytes());
    }
    pub fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.buf.extend_from_slice(b);
    }
    pub fn u16s(&mut self, xs: &[u16]) {
        self.u64(xs.len() as u64);
        self.buf.reserve(2 * xs.len());
        for x in xs {
            self.buf.extend_from_slice(&x.to_le_bytes());
        }
    }
    /// A count, then the values (the count is written once they are).
    pub fn u32s(&mut self, xs: impl IntoIterator<Item = u32>) {
        let at = self.buf.len();
        self.u64(0);
        let mut n = 0u64;
        for x in xs {
            self.buf.extend_from_slice(&x.to_le_bytes());
            n += 1;
        }
        self.buf[at..at + 8].copy_from_slice(&n.to_le_bytes());
    }
}

/// Checked little-endian reader of the payload: every read past the end is
/// an error, never a panic.
pub(crate) struct Dec<'a> {
    buf: &'a [u8],
}

impl<'a> Dec<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Dec { buf }
    }
    pub fn rest(&self) -> &'a [u8] {
        self.buf
    }
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.buf.len() {
            return Err("truncated".into());
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Ok(a)
    }
    pub fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    pub fn u32(&mut self) -> Result<u32, String> {
        let mut w = [0u8; 4];
        w.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(w))
    }
    pub fn u64(&mut self) -> Result<u64, String> {
        let mut w = [0u8; 8];
        w.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(w))
    }
    pub fn usize(&mut self) -> Result<usize, String> {
        usize::try_from(self.u64()?).map_err(|_| "length out of range".to_string())
    }
    fn len(&mut self, unit: usize) -> Result<usize, String> {
        let n = self.usize()?;
        if n.checked_mul(unit).is_none_or(|b| b > self.buf.len()) {
            return Err("truncated".into());
        }
        Ok(n)
    }
    pub fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = self.len(1)?;
        self.take(n)
    }
    pub fn u16s(&mut self) -> Result<Vec<u16>, String> {
        let n = self.len(2)?;
        Ok(self
            .take(2 * n)?
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect())
    }
    pub fn u32s(&mut self) -> Result<Vec<u32>, String> {
        let n = self.len(4)?;
        Ok(self
            .take(4 * n)?
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }
}
