//! A sequence's KV cache: per layer, the keys and values of every position
//! fed so far, as flat `[position][kv_head][head_dim]` f32 rows. It is a
//! plain value: truncating it cuts the rows, forking it copies them, and any
//! number of sequences run over one shared copy of the weights.

/// One sequence: its position and its KV cache (no weights).
#[derive(Clone, Debug, Default)]
pub struct Sequence {
    pub(crate) layers: Vec<LayerKv>,
    pub(crate) len: usize,
    pub(crate) kv_dim: usize,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct LayerKv {
    pub(crate) k: Vec<f32>,
    pub(crate) v: Vec<f32>,
}

impl Sequence {
    /// An empty sequence for a model of `layers` layers and `kv_dim` key
    /// values per position.
    pub(crate) fn new(layers: usize, kv_dim: usize) -> Sequence {
        Sequence {
            layers: vec![LayerKv::default(); layers],
            len: 0,
            kv_dim,
        }
    }

    /// Tokens fed so far (the next position).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing has been fed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Keeps the first `len` positions (no-op when `len >= self.len()`).
    pub fn truncate(&mut self, len: usize) {
        if len >= self.len {
            return;
        }
        self.cut(len);
        self.len = len;
    }

    /// Forgets everything (keeps the allocations).
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// A copy of this sequence that continues independently (beam
    /// hypotheses, speculative branches): the KV rows are copied.
    pub fn fork(&self) -> Sequence {
        self.clone()
    }

    /// A copy of the first `len` positions only (`None` past the end): a
    /// prompt-prefix cache hit copies what it reuses, not the whole entry,
    /// and the copy holds no capacity beyond it.
    pub fn fork_prefix(&self, len: usize) -> Option<Sequence> {
        if len > self.len {
            return None;
        }
        let n = len * self.kv_dim;
        Some(Sequence {
            layers: self
                .layers
                .iter()
                .map(|l| LayerKv {
                    k: l.k[..n.min(l.k.len())].to_vec(),
                    v: l.v[..n.min(l.v.len())].to_vec(),
                })
                .collect(),
            len,
            kv_dim: self.kv_dim,
        })
    }

    /// Bytes held by the KV cache (f32 keys and values).
    pub fn kv_bytes(&self) -> usize {
        self.layers
            .iter()
            .map(|l| (l.k.len() + l.v.len()) * std::mem::size_of::<f32>())
            .sum()
    }

    /// Cuts every layer to `len` positions (also after a failed pass left
    /// some layers longer than others).
    pub(crate) fn cut(&mut self, len: usize) {
        let n = len * self.kv_dim;
        for l in &mut self.layers {
            l.k.truncate(n);
            l.v.truncate(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_cuts_every_layer_and_fork_is_independent() {
        let mut s = Sequence::new(2, 3);
        for l in &mut s.layers {
            l.k = (0..12).map(|i| i as f32).collect();
            l.v = l.k.clone();
        }
        s.len = 4;
        let f = s.fork();
        s.truncate(2);
        assert_eq!(s.len(), 2);
        assert!(s.layers.iter().all(|l| l.k.len() == 6 && l.v.len() == 6));
        assert_eq!(f.len(), 4);
        assert_eq!(f.layers[1].k.len(), 12);
        s.truncate(9); // past the end: nothing happens
        assert_eq!(s.len(), 2);
        s.clear();
        assert!(s.is_empty() && s.kv_bytes() == 0);
    }

    #[test]
    fn fork_prefix_copies_only_the_prefix() {
        let mut s = Sequence::new(2, 3);
        for l in &mut s.layers {
            l.k = (0..12).map(|i| i as f32).collect();
            l.v = l.k.clone();
        }
        s.len = 4;
        let p = s.fork_prefix(2).unwrap();
        assert_eq!(p.len(), 2);
        assert!(p
            .layers
            .iter()
            .all(|l| l.k == [0., 1., 2., 3., 4., 5.] && l.k.capacity() == 6));
        assert_eq!(p.kv_bytes(), 2 * 2 * 6 * 4);
        assert!(s.fork_prefix(5).is_none());
        assert_eq!(s.fork_prefix(4).unwrap().layers[1].v, s.layers[1].v);
    }
}
