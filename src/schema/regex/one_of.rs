//! `oneOf` as an alternation once the branches are proven disjoint:
//! [`Gen::one_of`] and its proof [`Gen::excludes`] (types, `enum`/`const`,
//! numeric ranges, a required key with disjoint values). Where the proof
//! fails, [`logic`](super::logic) makes `oneOf` exact by difference. Split
//! from `regex.rs` by job; moved as is.

use super::*;

impl<'d, 'a> Gen<'d, 'a> {
    #[inline(never)]
    pub(super) fn one_of(
        &mut self,
        base: Node,
        group: ir::Located<Vec<Schema>>,
        forbid: &[String],
    ) -> Result<Lang, SchemaError> {
        // Resolve every branch merged with the rest of the node (for the proof).
        let mut resolved: Vec<Option<Node>> = Vec::new();
        for b in &group.value {
            let mut entered = Vec::new();
            let bn = self.schema_node(b, &mut entered)?;
            let merged = match bn {
                Some(bn) => Some(ir::merge(&base, &bn)?),
                None => None,
            };
            // Flatten nested applicators one level for the proof's benefit.
            resolved.push(merged);
        }
        let k = resolved.len();
        // forbids[i]: keys branch i must not write so that it excludes others.
        let mut forbids: Vec<Vec<String>> = vec![forbid.to_vec(); k];
        let mut coerced = false;
        // overlaps[i]: branches that branch i must be made to exclude.
        let mut overlaps: Vec<Vec<usize>> = vec![Vec::new(); k];
        for i in 0..k {
            let Some(bi) = resolved[i].clone() else {
                continue;
            };
            for j in 0..k {
                if i == j {
                    continue;
                }
                let Some(bj) = resolved[j].clone() else {
                    continue;
                };
                if self.excludes(&bi, &bj, 0)? {
                    continue;
                }
                // A key branch j requires that branch i may leave out.
                let key = bj.required.iter().find(|r| !bi.required.contains(r));
                match key {
                    Some(key) if self.object_only(&bi) && self.object_only(&bj) => {
                        if !forbids[i].contains(key) {
                            forbids[i].push(key.clone());
                        }
                    }
                    _ => {
                        if self.opts.coerce_one_of {
                            coerced = true;
                        } else {
                            overlaps[i].push(j);
                        }
                    }
                }
            }
        }
        if coerced {
            self.doc.warn(
                &group.at,
                "oneOf compiled as anyOf (branches not provably disjoint)".into(),
            );
        }
        let mut parts = Vec::new();
        let mut len = 0;
        let rest_trivial = base.is_trivial();
        for (i, b) in group.value.iter().enumerate() {
            if resolved[i].is_none() {
                continue;
            }
            // Exactly one: this branch and the complement of every branch
            // it may overlap.
            let exact;
            let b = if overlaps[i].is_empty() {
                b
            } else {
                let others: Vec<&Schema> = overlaps[i].iter().map(|&j| &group.value[j]).collect();
                exact = self.exactly_one(b, &others, &group.at).map_err(|e| {
                    SchemaError::OneOfOverlap {
                        pointer: group.at.clone(),
                        first: i.min(overlaps[i][0]),
                        second: i.max(overlaps[i][0]),
                        cause: e.to_string(),
                    }
                })?;
                &exact
            };
            let r = if rest_trivial {
                self.value(b, &forbids[i])?
            } else {
                self.merged_branch(&base, b, &forbids[i])?
            };
            self.grow_alternation(&mut len, &r, &group.at)?;
            parts.extend(r);
        }
        Ok(alt_all(parts))
    }

    /// Proves that nothing branch `a` generates validates against `b`.
    #[inline(never)]
    pub(super) fn excludes(
        &mut self,
        a: &Node,
        b: &Node,
        depth: usize,
    ) -> Result<bool, SchemaError> {
        if depth > 4 {
            return Ok(false);
        }
        if !a.any_of.is_empty() || !a.one_of.is_empty() {
            return Ok(false);
        }
        let ta = self.gen_types(a);
        let tb = Self::valid_types(b);
        if ta.intersect(tb).is_empty() {
            return Ok(true);
        }
        if let Some(vals) = &a.enumeration {
            if vals.iter().all(|v| satisfies(b, v) == Some(false)) {
                return Ok(true);
            }
        }
        if let (Some(va), Some(vb)) = (&a.enumeration, &b.enumeration) {
            if !va.iter().any(|x| vb.iter().any(|y| ir::json_eq(x, y))) {
                return Ok(true);
            }
        }
        // Numbers: disjoint ranges.
        if ta.intersect(tb).0 & !(Types::INTEGER.0 | Types::NUMBER.0) == 0 && ranges_disjoint(a, b)
        {
            return Ok(true);
        }
        // Objects: a key `a` always writes whose values cannot validate in `b`.
        if ta == Types::OBJECT {
            for r in &a.required {
                let pa = a
                    .properties
                    .iter()
                    .find(|(k, _)| k == r)
                    .map(|(_, s)| s.clone());
                let pb = b
                    .properties
                    .iter()
                    .find(|(k, _)| k == r)
                    .map(|(_, s)| s.clone());
                if let (Some(pa), Some(pb)) = (pa, pb) {
                    let mut e = Vec::new();
                    let na = self.schema_node(&pa, &mut e)?;
                    let nb = self.schema_node(&pb, &mut e)?;
                    match (na, nb) {
                        (None, _) => return Ok(true),
                        (_, None) => return Ok(true),
                        (Some(na), Some(nb)) => {
                            if self.excludes(&na, &nb, depth + 1)? {
                                return Ok(true);
                            }
                        }
                    }
                }
            }
            // A key `b` requires that `a` can never write (a key `a`
            // requires is written even when no property declares it:
            // `dependentSchemas {d: {oneOf: ...}}` puts `d` in both).
            let a_extras = self.extras_schema(a).is_some() || !a.pattern_properties.is_empty();
            for r in &b.required {
                if !a.properties.iter().any(|(k, _)| k == r) && !a.required.contains(r) && !a_extras
                {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }
}

fn ranges_disjoint(a: &Node, b: &Node) -> bool {
    let below = |hi: &Option<numeric::Bound>, lo: &Option<numeric::Bound>| match (hi, lo) {
        (Some(h), Some(l)) => {
            h.value < l.value || (h.value == l.value && (h.exclusive || l.exclusive))
        }
        _ => false,
    };
    below(&a.maximum, &b.minimum) || below(&b.maximum, &a.minimum)
}
