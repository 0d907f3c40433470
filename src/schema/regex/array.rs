//! Arrays: `items` / `prefixItems`, `minItems` / `maxItems` as counted
//! repetition; `uniqueItems` and `contains` hand off to
//! [`leaves`](super::leaves) and [`logic`](super::logic). Split from
//! `regex.rs` by job; moved as is.

use super::*;

impl<'d, 'a> Gen<'d, 'a> {
    pub(super) fn array(&mut self, n: &Node) -> Result<Lang, SchemaError> {
        self.containers += 1;
        let r = self.array_body(n);
        self.containers -= 1;
        r
    }

    fn array_body(&mut self, n: &Node) -> Result<Lang, SchemaError> {
        if n.unique_items {
            return self.array_unique(n);
        }
        if !n.contains.is_empty() {
            return self.array_contains(n);
        }
        let min = n.min_items.unwrap_or(0);
        let mut max = n.max_items;
        if let Some(m) = max {
            if m < min {
                return self.contradiction(SchemaError::Contradiction {
                    pointer: n.at.clone(),
                    detail: format!("minItems {min} is greater than maxItems {m}"),
                });
            }
        }
        let mut pre: Vec<Rx> = Vec::new();
        if let Some(p) = &n.prefix_items {
            for s in p {
                match self.value(s, &[])? {
                    Some(r) => pre.push(r),
                    None => break, // no array can be that long
                }
            }
            if pre.len() < p.len() {
                max = Some(max.map_or(pre.len() as u64, |m| m.min(pre.len() as u64)));
            }
        }
        let k = pre.len() as u64;
        let item = match &n.items {
            None => Some(self.any()),
            Some(s) => self.value(s, &[])?,
        };
        if item.is_none() {
            max = Some(max.map_or(k, |m| m.min(k)));
        }
        if max.is_some_and(|m| m < min) {
            return Ok(None);
        }
        let big = max.unwrap_or(min);
        if big > self.opts.max_repeat {
            return Err(SchemaError::TooBig {
                what: "array length bound".into(),
                pointer: n.at.clone(),
                size: big,
                limit: self.opts.max_repeat,
                knob: "max_repeat",
            });
        }
        let Lay { inner, comma, .. } = self.lay.clone();
        if max == Some(0) {
            return Ok(Some(rx!["\\[", &inner, "\\]"]));
        }
        // Elements after the i-th (i ≥ 1 already written).
        let rest_items = |i: u64| -> Rx {
            let Some(it) = &item else {
                return Rx::EMPTY;
            };
            let a = min.saturating_sub(i);
            let b = max.map(|m| m.saturating_sub(i));
            if b == Some(0) {
                return Rx::EMPTY;
            }
            rx!["(?:", &comma, it, ")", repeat(a, b)]
        };
        let mut tail = rest_items(k.max(1));
        if k > 0 {
            for i in (1..k).rev() {
                if max.is_some_and(|m| i >= m) {
                    tail = Rx::EMPTY;
                    continue;
                }
                let body = rx![&comma, &pre[i as usize], tail];
                tail = if i >= min {
                    rx!["(?:", body, ")?"]
                } else {
                    body
                };
            }
        }
        let elements = if k > 0 {
            rx![&pre[0], tail]
        } else if min <= 1 && max.is_none() {
            // `it(?:,it)*` with one copy of the item ([`crate::dfa::ordered`]).
            let it = item.as_ref().expect("max > 0 implies items");
            list_rx(&comma, it)
        } else {
            let it = item.clone().expect("max > 0 implies items");
            rx![it, tail]
        };
        let body = if min == 0 {
            rx!["(?:", elements, ")?"]
        } else {
            elements
        };
        Ok(Some(rx!["\\[", &inner, body, &inner, "\\]"]))
    }
}
