//! # String formats
//!
//! Each supported `format` is a regex over the *inside* of a JSON string
//! (between the quotes). All of them are ASCII-only and never admit `"`, `\`
//! or a control character, so the string cannot end early and no escape is
//! ever needed: the DFA leaves the format exactly at the closing quote.
//! (Otherwise it tracks "still inside the format" beside the real
//! continuation, and every later occurrence multiplies the states: a URI
//! format whose classes admitted `"` and `\` was half of the schemas that
//! failed to determinize when measured. See `docs/design/dfa.md`.)
//!
//! The regexes are *sound* against a strict validator (the `jsonschema`
//! crate's checks and the RFCs they follow): they describe a subset of the
//! valid values, sometimes a strict one:
//!
//! | format | narrowed to |
//! |---|---|
//! | `date`, `date-time`, `time` | RFC 3339, real calendar days (leap years exact), upper-case `T`/`Z`, no leap second |
//! | `duration` | the RFC 3339 appendix A grammar |
//! | `email` | dot-atom local part of at most 3 atoms × 20 characters, a hostname domain |
//! | `hostname` | at most 4 labels of at most 62 characters (≤ 251 in all) |
//! | `ipv4`, `ipv6`, `uuid` | exact (no IPv6 zone ids) |
//! | `uri`, `uri-reference` | RFC 3986 without user info and IP-literal hosts |
//! | `regex` | regexes valid in ECMA-262 and Python alike, without escapes: literals, `.`, simple classes, groups nested at most 3 deep, `*`/`+`/`?`, `|`, `^`/`$` at the ends of a branch |
//! | `uri-template` | RFC 6570 level 4 as the `jsonschema` crate checks it, ASCII only, lower-case variable names |

/// Regex for the inside of a JSON string in `format`, or `None` when the
/// format is not supported.
pub fn format_regex(format: &str) -> Option<String> {
    Some(match format {
        "date" => date(),
        "time" => time(),
        "date-time" => format!("{}T{}", date(), time()),
        "duration" => duration(),
        "email" => email(),
        "hostname" => hostname(),
        "ipv4" => ipv4(),
        "ipv6" => ipv6(),
        "uuid" => {
            "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}".into()
        }
        "uri" => uri(),
        "uri-reference" => format!("(?:{}|{})", uri(), relative_ref()),
        "regex" => regex_format(),
        "uri-template" => uri_template(),
        _ => return None,
    })
}

/// Formats that JSON Schema defines and validators check, but that this
/// compiler does not enforce: always an error (fail closed), lenient mode
/// aside. Other, custom formats are annotations to validators and may be
/// ignored with `allow_unknown_keywords`.
pub const DEFINED_UNSUPPORTED: &[&str] = &[
    "idn-email",
    "idn-hostname",
    "iri",
    "iri-reference",
    "json-pointer",
    "relative-json-pointer",
];

/// The formats [`format_regex`] supports.
pub const SUPPORTED: &[&str] = &[
    "date",
    "time",
    "date-time",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
    "uri",
    "uri-reference",
    "regex",
    "uri-template",
];

fn date() -> String {
    let y = "[0-9]{4}";
    let leap = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)";
    format!(
        "(?:{y}-(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|{y}-(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|{y}-02-(?:0[1-9]|1[0-9]|2[0-8])|{leap}-02-29)"
    )
}

fn time() -> String {
    let hh = "(?:[01][0-9]|2[0-3])";
    let mm = "[0-5][0-9]";
    format!("{hh}:{mm}:{mm}(?:\\.[0-9]+)?(?:Z|[+-]{hh}:{mm})")
}

fn duration() -> String {
    let d = "[0-9]+";
    let time = format!("T(?:{d}H(?:{d}M(?:{d}S)?)?|{d}M(?:{d}S)?|{d}S)");
    let date = format!("(?:{d}D|{d}M(?:{d}D)?|{d}Y(?:{d}M(?:{d}D)?)?)");
    format!("P(?:{date}(?:{time})?|{time}|{d}W)")
}

/// An LDH label of at most 63 characters without `--` (a sound narrowing:
/// labels with `--` in positions 3–4 are reserved for IDNA, `xn--` labels must
/// be valid Punycode, which a regex cannot check).
fn label() -> &'static str {
    "[A-Za-z0-9](?:-?[A-Za-z0-9]){0,31}"
}

fn hostname() -> String {
    let l = label();
    format!("{l}(?:\\.{l}){{0,3}}")
}

fn email() -> String {
    let atext = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]";
    let h = hostname();
    format!("{atext}{{1,20}}(?:\\.{atext}{{1,20}}){{0,2}}@{h}")
}

fn ipv4() -> String {
    let octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
    format!("{octet}(?:\\.{octet}){{3}}")
}

fn ipv6() -> String {
    let h = "[0-9a-fA-F]{1,4}";
    let ls32 = format!("(?:{h}:{h}|{})", ipv4());
    let alts = [
        format!("(?:{h}:){{6}}{ls32}"),
        format!("::(?:{h}:){{5}}{ls32}"),
        format!("(?:{h})?::(?:{h}:){{4}}{ls32}"),
        format!("(?:(?:{h}:){{0,1}}{h})?::(?:{h}:){{3}}{ls32}"),
        format!("(?:(?:{h}:){{0,2}}{h})?::(?:{h}:){{2}}{ls32}"),
        format!("(?:(?:{h}:){{0,3}}{h})?::{h}:{ls32}"),
        format!("(?:(?:{h}:){{0,4}}{h})?::{ls32}"),
        format!("(?:(?:{h}:){{0,5}}{h})?::{h}"),
        format!("(?:(?:{h}:){{0,6}}{h})?::"),
    ];
    format!("(?:{})", alts.join("|"))
}

const UNRESERVED_SUB: &str = "\\-A-Za-z0-9._~!$&'()*+,;=";
const PCT: &str = "%[0-9A-Fa-f]{2}";

fn pchar() -> String {
    format!("(?:[{UNRESERVED_SUB}:@]|{PCT})")
}

fn query_or_fragment() -> String {
    let p = pchar();
    format!("(?:\\?(?:{p}|[/?])*)?(?:#(?:{p}|[/?])*)?")
}

fn authority_path() -> String {
    let p = pchar();
    let host = format!("(?:[{UNRESERVED_SUB}]|{PCT})*");
    format!("//{host}(?::[0-9]*)?(?:/{p}*)*")
}

fn uri() -> String {
    let p = pchar();
    let scheme = "[A-Za-z][A-Za-z0-9+.-]*";
    let hier = format!(
        "(?:{}|/(?:{p}+(?:/{p}*)*)?|{p}+(?:/{p}*)*)?",
        authority_path()
    );
    format!("{scheme}:{hier}{}", query_or_fragment())
}

fn relative_ref() -> String {
    let p = pchar();
    let nc = format!("(?:[{UNRESERVED_SUB}@]|{PCT})");
    let part = format!(
        "(?:{}|/(?:{p}+(?:/{p}*)*)?|{nc}+(?:/{p}*)*)?",
        authority_path()
    );
    format!("{part}{}", query_or_fragment())
}

/// Regexes that every ECMA-262 and Python engine compiles, with no
/// backslash (so no JSON escape is needed): branches of atoms (a literal,
/// `.`, a class of literals and the ranges `a-z`, `A-Z`, `0-9`, or a group
/// of branches), each atom with at most one of `*`, `+`, `?`, and `^` / `$`
/// only at the ends of a branch. Groups nest at most 3 deep. Characters
/// that are special anywhere (`\ ^ $ . | ? * + ( ) [ ] { }`) are never
/// literals.
fn regex_format() -> String {
    const LIT: &str = "[A-Za-z0-9 !#%&',/:;<=>@_`~-]";
    // No `&`, `~`, `-` inside a class (set operators of some engines).
    const CLASS: &str = r"\[\^?(?:[A-Za-z0-9 !#%',/:;<=>@_`.*+?|(){}$]|a-z|A-Z|0-9)+\]";
    let alternation = |atom: &str| {
        let branch = format!("\\^?(?:(?:{atom})[*+?]?)*\\$?");
        format!("{branch}(?:\\|{branch})*")
    };
    let base = format!("{LIT}|\\.|{CLASS}");
    let mut alt = alternation(&base);
    for _ in 0..3 {
        let group = format!("\\((?:\\?:)?{alt}\\)");
        alt = alternation(&format!("{base}|{group}"));
    }
    alt
}

/// RFC 6570 templates as the `jsonschema` crate checks them (its
/// `URI_TEMPLATE_RE`), ASCII only: literals other than controls, space and
/// `" ' < > % \ ^ ` { | }`, lower-case percent escapes, and expressions
/// `{op? var(:len|*)? (, ...)*}` with lower-case variable names.
fn uri_template() -> String {
    let pct = "%[0-9a-f]{2}";
    let lit = format!("(?:[!#$&()*+,\\-./0-9:;=?@A-Z\\[\\]_a-z~]|{pct})");
    let var = format!("(?:[a-z0-9_]|{pct})+(?::[1-9][0-9]{{0,3}}|\\*)?");
    let expr = format!("\\{{[+#./;?&=,!@|]?{var}(?:,{var})*\\}}");
    format!("(?:{lit}|{expr})*")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn re(f: &str) -> regex::Regex {
        regex::Regex::new(&format!("^(?:{})$", format_regex(f).unwrap())).unwrap()
    }

    #[test]
    fn dates_follow_the_calendar() {
        let r = re("date");
        for ok in ["2024-02-29", "2000-02-29", "2023-12-31", "0001-01-01"] {
            assert!(r.is_match(ok), "{ok}");
        }
        for bad in [
            "2023-02-29",
            "1900-02-29",
            "2023-04-31",
            "2023-13-01",
            "2023-1-01",
            "2023-00-10",
        ] {
            assert!(!r.is_match(bad), "{bad}");
        }
        let r = re("date-time");
        assert!(r.is_match("2023-05-01T12:30:00Z"));
        assert!(r.is_match("2023-05-01T12:30:00.123+05:30"));
        assert!(!r.is_match("2023-05-01T24:00:00Z"));
        assert!(!r.is_match("2023-05-01 12:30:00Z"));
    }

    #[test]
    fn other_formats() {
        assert!(re("ipv4").is_match("192.168.0.1"));
        assert!(!re("ipv4").is_match("192.168.0.01"));
        assert!(!re("ipv4").is_match("256.1.1.1"));
        for ok in [
            "::",
            "::1",
            "fe80::1:2",
            "1:2:3:4:5:6:7:8",
            "::ffff:1.2.3.4",
        ] {
            assert!(re("ipv6").is_match(ok), "{ok}");
        }
        assert!(!re("ipv6").is_match("1:2:3:4:5:6:7:8:9"));
        assert!(re("duration").is_match("P1Y2M3DT4H5M6S"));
        assert!(re("duration").is_match("PT1S"));
        assert!(!re("duration").is_match("P"));
        assert!(!re("duration").is_match("PT"));
        assert!(re("email").is_match("first.last@example.com"));
        assert!(!re("email").is_match("first..last@example.com"));
        assert!(re("uri").is_match("https://example.com/a/b?c=d#e"));
        assert!(!re("uri").is_match("no scheme"));
        assert!(re("uri-reference").is_match("../a/b"));
        assert!(re("hostname").is_match("a-b.example.org"));
        assert!(!re("hostname").is_match("-a.example.org"));
        for ok in [
            "^/api/(.*)$",
            "^value1|value2$",
            "a(b(c|d)*)+e?",
            "[^a-z0-9]",
            "",
            "(?:x)",
        ] {
            assert!(re("regex").is_match(ok), "{ok}");
        }
        for bad in ["(", "a**", "[z-a]", "a{2}", "\\d", "*a", "(?<n>x)"] {
            assert!(!re("regex").is_match(bad), "{bad}");
        }
        for ok in ["http://x.org/{id}", "/a{?q,page:3}{#frag*}", "plain", ""] {
            assert!(re("uri-template").is_match(ok), "{ok}");
        }
        for bad in ["{Id}", "{id", "a b", "{}", "%GG"] {
            assert!(!re("uri-template").is_match(bad), "{bad}");
        }
    }

    #[test]
    fn formats_never_admit_quote_backslash_or_controls() {
        for f in SUPPORTED {
            let hir = regex_syntax::parse(&format_regex(f).unwrap()).unwrap();
            let p = hir.properties();
            assert!(p.is_utf8());
            // Walk the HIR's classes: none may contain '"', '\\' or < 0x20.
            fn check(h: &regex_syntax::hir::Hir, f: &str) {
                use regex_syntax::hir::{Class, HirKind};
                match h.kind() {
                    HirKind::Class(Class::Unicode(c)) => {
                        for r in c.ranges() {
                            for bad in ['"', '\\', '\u{0}', '\u{1f}'] {
                                assert!(!(r.start() <= bad && bad <= r.end()), "{f}");
                            }
                            assert!(r.end() < '\u{80}', "{f} is ASCII");
                        }
                    }
                    HirKind::Literal(l) => {
                        assert!(l
                            .0
                            .iter()
                            .all(|&b| b >= 0x20 && b != b'"' && b != b'\\' && b < 0x80));
                    }
                    HirKind::Repetition(r) => check(&r.sub, f),
                    HirKind::Capture(c) => check(&c.sub, f),
                    HirKind::Concat(v) | HirKind::Alternation(v) => {
                        v.iter().for_each(|h| check(h, f))
                    }
                    _ => {}
                }
            }
            check(&hir, f);
        }
    }
}
