//! # The step inspector: a trace as a page
//!
//! [`page`] renders a [`Trace`] as one self-contained HTML page (inline CSS and
//! script, no network): each step's [`TOP_LOGITS`](crate::trace::TOP_LOGITS)
//! bars, the chosen token highlighted, the tokens the constraint masked
//! marked, and two sliders, temperature and top-p, that re-apply softmax and
//! nucleus truncation to the cached logits in the browser. `constrain view`
//! writes it; [`component`] is the same thing without the `<html>` shell, so
//! a server playground can embed it in its own page.
//!
//! ## What the sliders compute
//!
//! For each step, over its cached top logits: masked tokens get probability 0;
//! the allowed ones are divided by the temperature (T = 0: all the mass on the
//! best allowed one), soft-maxed, then cut to the smallest set, best first,
//! whose mass reaches top-p, and renormalised. The page only has the top
//! logits, so these are the probabilities *among them*; at T = 1 and top-p = 1
//! they are the masked distribution restricted to the cached tokens.
//!
//! ## Markup contract (tests and tools read it)
//!
//! * each step block: `data-step="N"`;
//! * each bar: `data-token-id`, `data-allowed="true|false"`, `data-prob`
//!   (filled in and updated by the script; empty before it runs), and
//!   `data-chosen` on the chosen token's bar;
//! * the sliders: `data-control="temperature"` and `data-control="top-p"`.
//!
//! Text is escaped; the trace travels inside a `<script type="application/json">`
//! with `<` escaped, so no token can close the tag.

use crate::trace::Trace;

/// HTML-escapes text for element content and double-quoted attributes.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A token's text made visible: whitespace and control characters shown.
fn visible(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            ' ' => out.push('␣'),
            '\n' => out.push_str("↵"),
            '\t' => out.push_str("⇥"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    if out.is_empty() {
        out.push('∅');
    }
    out
}

/// The component's style sheet, shared with the server playground (which
/// embeds it once in its own page).
pub const STYLE: &str = r#"
.ci-root{font:14px/1.4 system-ui,sans-serif;color:#222;max-width:60em}
.ci-controls{position:sticky;top:0;background:#fff;padding:.5em 0;border-bottom:1px solid #ddd;z-index:1}
.ci-controls label{margin-right:2em}
.ci-step{border:1px solid #ddd;border-radius:6px;margin:.6em 0;padding:.4em .6em}
.ci-step h3{font-size:1em;margin:.1em 0 .3em}
.ci-bar{display:grid;grid-template-columns:12em 5em 1fr 4.5em;gap:.5em;align-items:center;font-family:ui-monospace,monospace;font-size:12px}
.ci-fill{height:.9em;background:#6b8fd6;border-radius:2px;min-width:1px}
.ci-bar[data-allowed="false"]{color:#999;text-decoration:line-through}
.ci-bar[data-allowed="false"] .ci-fill{background:#ddd}
.ci-bar[data-chosen]{font-weight:bold;background:#fff3c4}
.ci-bar[data-chosen] .ci-fill{background:#d9822b}
.ci-forced{color:#777;font-style:italic}
.ci-tok{white-space:pre;overflow:hidden;text-overflow:ellipsis}
"#;

/// The component's script, shared with the server playground. It defines
/// `window.constrainInspector` once: `render(trace)` builds, from a trace's
/// JSON, the same markup [`component`] writes (minus style and script);
/// `mount(root)` wires a `.ci-root`'s sliders to its bars and fills every
/// `data-prob`. Run inside a `.ci-root` (as [`component`] places it), it
/// mounts that root.
pub const SCRIPT: &str = r#"
(function(){
  if (!window.constrainInspector) {
    var esc = function(s) {
      return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
    };
    // ` name="value"` (built so that the script's text holds no literal
    // markup: a tool counting bar attributes in a page counts bars only).
    var attr = function(name, v) { return ' ' + name + '=' + '"' + esc(v) + '"'; };
    var visible = function(s) {
      var out = '';
      for (var ch of String(s)) {
        var c = ch.codePointAt(0);
        if (ch === ' ') out += '\u2423';
        else if (ch === '\n') out += '\u21b5';
        else if (ch === '\t') out += '\u21e5';
        else if (c < 32 || (c >= 127 && c < 160)) out += '\\u{' + c.toString(16) + '}';
        else out += ch;
      }
      return out === '' ? '\u2205' : out;
    };
    var probs = function(logits, allowed, T, P) {
      var n = logits.length, p = new Array(n).fill(0), idx = [];
      for (var i = 0; i < n; i++) if (allowed[i] && isFinite(logits[i])) idx.push(i);
      if (!idx.length) return p;
      idx.sort(function(a, b){ return logits[b] - logits[a] || a - b; });
      if (T <= 0) { p[idx[0]] = 1; return p; }
      var m = logits[idx[0]], z = 0;
      idx.forEach(function(i){ p[i] = Math.exp((logits[i] - m) / T); z += p[i]; });
      idx.forEach(function(i){ p[i] /= z; });
      if (P < 1) {
        var acc = 0, keep = 0;
        for (var k = 0; k < idx.length; k++) { acc += p[idx[k]]; keep = k + 1; if (acc >= P) break; }
        var z2 = 0;
        idx.forEach(function(i, k){ if (k >= keep) p[i] = 0; else z2 += p[i]; });
        idx.forEach(function(i){ p[i] /= z2; });
      }
      return p;
    };
    var render = function(trace) {
      var h = '<div class="ci-root">\n';
      h += '<p>model <code>' + esc(trace.model) + '</code> \u00b7 ' + trace.steps.length + ' steps \u00b7 sequence log-probability ' + Number(trace.sequence_logprob).toFixed(4) + (trace.score == null ? '' : ' \u00b7 beam score ' + Number(trace.score).toFixed(4) + (trace.length_penalty == null ? '' : ' (length penalty ' + trace.length_penalty + ')')) + '</p>\n<p>prompt: <code>' + esc(trace.prompt) + '</code></p>\n';
      h += '<div class="ci-controls"><label>temperature <input type="range"' + attr('data-control', 'temperature') + ' min="0" max="2" step="0.05" value="1"> <span class="ci-t">1.00</span></label><label>top-p <input type="range"' + attr('data-control', 'top-p') + ' min="0.05" max="1" step="0.01" value="1"> <span class="ci-p">1.00</span></label><span>bars: probability among the cached top logits; struck-through tokens are masked by the constraint</span></div>\n';
      trace.steps.forEach(function(s) {
        h += '<section class="ci-step"' + attr('data-step', s.step) + '>\n<h3>step ' + s.step + ' \u00b7 <span class="ci-tok">' + esc(visible(s.token.text)) + '</span> \u00b7 ';
        if (s.forced) h += '<span class="ci-forced">forced by the constraint (jump-forward, no logits)</span></h3>\n';
        else h += 'log p ' + Number(s.logprob).toFixed(4) + ' \u00b7 ' + s.allowed_count + ' allowed \u00b7 ' + ((s.allowed_mass || 0) * 100).toFixed(1) + '% of the mass removed by the constraint</h3>\n';
        var inTop = false;
        s.top.forEach(function(t) {
          var chosen = t.id === s.token.id ? attr('data-chosen', 'true') : '';
          if (chosen) inTop = true;
          h += '<div class="ci-bar"' + attr('data-token-id', t.id) + attr('data-allowed', t.allowed) + attr('data-logit', t.logit) + attr('data-prob', '') + chosen + '><span class="ci-tok" title="id ' + t.id + '">' + esc(visible(t.text)) + '</span><span>' + Number(t.logit).toFixed(3) + '</span><span><span class="ci-fill" style="display:block;width:0"></span></span><span class="ci-pct"></span></div>\n';
        });
        if (!s.forced && !inTop)
          h += '<p class="ci-forced">chosen token <code>' + esc(visible(s.token.text)) + '</code> (id ' + s.token.id + ') is outside the top ' + s.top.length + ': the constraint masked everything above it</p>\n';
        h += '</section>\n';
      });
      return h + '</div>\n';
    };
    var mount = function(root) {
      var tIn = root.querySelector('[data-control="temperature"]');
      var pIn = root.querySelector('[data-control="top-p"]');
      var tOut = root.querySelector('.ci-t'), pOut = root.querySelector('.ci-p');
      function update() {
        var T = parseFloat(tIn.value), P = parseFloat(pIn.value);
        tOut.textContent = T.toFixed(2); pOut.textContent = P.toFixed(2);
        root.querySelectorAll('[data-step]').forEach(function(step){
          var bars = step.querySelectorAll('[data-token-id]');
          if (!bars.length) return;
          var logits = [], allowed = [];
          bars.forEach(function(b){ logits.push(parseFloat(b.getAttribute('data-logit'))); allowed.push(b.getAttribute('data-allowed') === 'true'); });
          var p = probs(logits, allowed, T, P);
          bars.forEach(function(b, i){
            b.setAttribute('data-prob', p[i].toFixed(6));
            b.querySelector('.ci-fill').style.width = (100 * p[i]).toFixed(2) + '%';
            b.querySelector('.ci-pct').textContent = (100 * p[i]).toFixed(2) + '%';
          });
        });
      }
      tIn.addEventListener('input', update); pIn.addEventListener('input', update);
      update();
    };
    window.constrainInspector = {render: render, mount: mount, probs: probs};
  }
  var cs = document.currentScript;
  var root = cs ? cs.closest('.ci-root') : null;
  if (root) window.constrainInspector.mount(root);
})();
"#;

/// The inspector without the page shell: a `<div class="ci-root">` holding
/// its style, the sliders, one block per step and the script. Embed it once
/// per page (a server playground puts it in its own page).
pub fn component(trace: &Trace) -> String {
    let mut h = String::new();
    h.push_str("<div class=\"ci-root\">\n<style>");
    h.push_str(STYLE);
    h.push_str("</style>\n");
    // A beam search's trace has its score.
    let score = match (trace.score, trace.length_penalty) {
        (Some(sc), Some(a)) => format!(" · beam score {sc:.4} (length penalty {a})"),
        (Some(sc), None) => format!(" · beam score {sc:.4}"),
        _ => String::new(),
    };
    h.push_str(&format!(
        "<p>model <code>{}</code> · {} steps · sequence log-probability {:.4}{score}</p>\n<p>prompt: <code>{}</code></p>\n",
        escape(&trace.model),
        trace.steps.len(),
        trace.sequence_logprob,
        escape(&trace.prompt)
    ));
    h.push_str(concat!(
        "<div class=\"ci-controls\">",
        "<label>temperature <input type=\"range\" data-control=\"temperature\" min=\"0\" max=\"2\" step=\"0.05\" value=\"1\"> <span class=\"ci-t\">1.00</span></label>",
        "<label>top-p <input type=\"range\" data-control=\"top-p\" min=\"0.05\" max=\"1\" step=\"0.01\" value=\"1\"> <span class=\"ci-p\">1.00</span></label>",
        "<span>bars: probability among the cached top logits; struck-through tokens are masked by the constraint</span>",
        "</div>\n"
    ));
    for s in &trace.steps {
        h.push_str(&format!(
            "<section class=\"ci-step\" data-step=\"{}\">\n<h3>step {} · <span class=\"ci-tok\">{}</span> · ",
            s.step,
            s.step,
            escape(&visible(&s.token.text))
        ));
        if s.forced {
            h.push_str("<span class=\"ci-forced\">forced by the constraint (jump-forward, no logits)</span></h3>\n");
        } else {
            h.push_str(&format!(
                "log p {:.4} · {} allowed · {:.1}% of the mass removed by the constraint</h3>\n",
                s.logprob,
                s.allowed_count,
                s.allowed_mass.unwrap_or(0.0) * 100.0
            ));
        }
        for t in &s.top {
            let chosen = if t.id == s.token.id {
                " data-chosen=\"true\""
            } else {
                ""
            };
            h.push_str(&format!(
                "<div class=\"ci-bar\" data-token-id=\"{}\" data-allowed=\"{}\" data-logit=\"{}\" data-prob=\"\"{chosen}><span class=\"ci-tok\" title=\"id {}\">{}</span><span>{:.3}</span><span><span class=\"ci-fill\" style=\"display:block;width:0\"></span></span><span class=\"ci-pct\"></span></div>\n",
                t.id,
                t.allowed,
                t.logit,
                t.id,
                escape(&visible(&t.text)),
                t.logit
            ));
        }
        if !s.forced && !s.top.iter().any(|t| t.id == s.token.id) {
            h.push_str(&format!(
                "<p class=\"ci-forced\">chosen token <code>{}</code> (id {}) is outside the top {}: the constraint masked everything above it</p>\n",
                escape(&visible(&s.token.text)),
                s.token.id,
                s.top.len()
            ));
        }
        h.push_str("</section>\n");
    }
    let data = serde_json::to_string(trace)
        .unwrap_or_else(|_| "null".into())
        .replace('<', "\\u003c");
    h.push_str(&format!(
        "<script type=\"application/json\" class=\"ci-trace\">{data}</script>\n<script>{SCRIPT}</script>\n</div>\n"
    ));
    h
}

/// A whole self-contained page (no network) showing `trace`.
pub fn page(trace: &Trace) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>constrain trace: {}</title>\n</head>\n<body>\n<h1>Step trace</h1>\n{}</body>\n</html>\n",
        escape(&trace.prompt.chars().take(60).collect::<String>()),
        component(trace)
    )
}
