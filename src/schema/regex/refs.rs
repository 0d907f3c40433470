//! # `$ref`s in the regex generator
//!
//! How [`Gen`] enters a reference: on the pushdown engine a reference into
//! a recursive component becomes a call; otherwise the target is unrolled,
//! each target active at most `max_depth + 1` times on the current path
//! (deeper: the empty language). Results are memoised per target and per
//! the recursion state of the targets it can reach ([`Gen::memo_key`]), so
//! a definition used many times is generated once.

use super::*;

impl Gen<'_, '_> {
    /// Ref targets reachable from `target` (itself included when recursive).
    pub(super) fn reachable(&mut self, target: &str) -> Result<Rc<HashSet<String>>, SchemaError> {
        if let Some(r) = self.reach.get(target) {
            return Ok(r.clone());
        }
        let mut seen: HashSet<String> = HashSet::new();
        let mut stack = vec![target.to_string()];
        let mut first = true;
        while let Some(t) = stack.pop() {
            let s = self.doc.get(&t)?;
            let mut direct = Vec::new();
            collect_refs(&s, &mut direct);
            for d in direct {
                if seen.insert(d.clone()) {
                    stack.push(d);
                }
            }
            if first {
                first = false;
            }
        }
        let r = Rc::new(seen);
        self.reach.insert(target.to_string(), r.clone());
        Ok(r)
    }

    fn memo_key(&mut self, target: &str) -> Result<String, SchemaError> {
        let reach = self.reachable(target)?;
        let mut parts: Vec<(&String, &usize)> = self
            .active
            .iter()
            .filter(|(k, c)| **c > 0 && (reach.contains(*k) || *k == target))
            .collect();
        parts.sort();
        let mut key = target.to_string();
        for (k, c) in parts {
            key.push_str(&format!("\u{0}{k}={c}"));
        }
        Ok(key)
    }

    pub(super) fn enter_ref(
        &mut self,
        target: &str,
        forbid: &[String],
    ) -> Result<Lang, SchemaError> {
        if self.calls.is_some() && forbid.is_empty() {
            if let Some(call) = self.call(target)? {
                return Ok(Some(call.into()));
            }
        }
        let count = self.active.get(target).copied().unwrap_or(0);
        if count > self.opts.max_depth {
            return Ok(None);
        }
        let key = if forbid.is_empty() {
            let k = self.memo_key(target)?;
            if let Some(r) = self.memo.get(&k) {
                return Ok(r.clone());
            }
            Some(k)
        } else {
            None
        };
        *self.active.entry(target.to_string()).or_insert(0) += 1;
        let s = self.doc.get(target);
        let r = s.and_then(|s| self.value(&s, forbid));
        *self.active.get_mut(target).expect("entered") -= 1;
        let r = r?;
        if let Some(k) = key {
            self.memo.insert(k, r.clone());
        }
        Ok(r)
    }
}
