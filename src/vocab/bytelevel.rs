//! The GPT-2 byte↔char table of byte-level BPE: each of the 256 bytes is
//! shown as one printable char (`Ġ` for space, `Ċ` for newline...). Token
//! strings in `tokenizer.json` and GGUF files are written in these chars;
//! inverting the table gives a token's raw bytes.

use std::collections::HashMap;

/// `table[b]` is the char byte `b` is written as.
pub fn byte_to_char() -> [char; 256] {
    let mut out = ['\0'; 256];
    let mut n = 0u32;
    for b in 0..=255u32 {
        let printable =
            (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
        out[b as usize] = if printable {
            char::from_u32(b).unwrap_or('\0')
        } else {
            let c = char::from_u32(256 + n).unwrap_or('\0');
            n += 1;
            c
        };
    }
    out
}

/// The inverse table: char → byte.
pub fn char_to_byte_table() -> HashMap<char, u8> {
    byte_to_char()
        .iter()
        .enumerate()
        .map(|(b, &c)| (c, b as u8))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn table_is_a_bijection_with_known_points() {
        let t = super::byte_to_char();
        assert_eq!(t[b' ' as usize], 'Ġ');
        assert_eq!(t[b'\n' as usize], 'Ċ');
        assert_eq!(t[b'a' as usize], 'a');
        let inv = super::char_to_byte_table();
        assert_eq!(inv.len(), 256);
    }
}
