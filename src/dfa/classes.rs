//! # Byte classes: one representative byte and the size of each class
//!
//! Every automaton here partitions the 256 bytes into classes (bytes of one
//! class lead every state alike; `classes[b]` is the class of byte `b`).
//! The fragment builder, the index's live tables and its engines walk one
//! byte per class instead of 256, and weigh a class by its size where a
//! count of bytes matters (a forced byte is a class of one byte).

/// Per byte class (`classes[b]` is the class of byte `b`): its smallest byte,
/// and how many bytes it has.
pub(crate) fn class_reps(classes: &[u8; 256]) -> (Vec<u8>, Vec<u32>) {
    let stride = classes.iter().map(|&c| c as usize).max().unwrap_or(0) + 1;
    let mut reps = vec![0u8; stride];
    let mut size = vec![0u32; stride];
    for b in (0..=255u8).rev() {
        reps[classes[b as usize] as usize] = b;
        size[classes[b as usize] as usize] += 1;
    }
    (reps, size)
}
