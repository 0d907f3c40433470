//! The shapes of member sets (properties in any order): the register
//! operations an NFA's operation states carry and each set's layout. How
//! threads carry the registers: [`super::regs`].

/// A member index standing for the extra member (keys that are none of
/// the declared names; it may repeat).
pub const EXTRA: u8 = u8::MAX;

/// Most declared members of one set (one register bit each).
pub const MAX_MEMBERS: usize = 64;

/// The register operation of an operation state (`Kind::Op`), naming its
/// set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegOp {
    /// Opens a frame: nothing written yet.
    Enter(u32),
    /// Writes member `i` ([`EXTRA`]: the extra member).
    Member(u32, u8),
    /// Closes the frame: every required member written, the count within
    /// bounds.
    Leave(u32),
}

/// A member set's shape. Its states are named by how far before the
/// `ENTER` state they are, so a copy of the construct (a counted
/// repetition, a shared group) finds its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberSet {
    /// Declared members (bits `0..members`).
    pub members: u8,
    /// Bits of the required members.
    pub required: u64,
    /// Whether the last item is the extra member.
    pub extra: bool,
    /// Fewest and most members written (the extra member counted each time).
    pub lo: u32,
    pub hi: u32,
    /// `ENTER − LEAVE`, `ENTER − NEXT`.
    pub leave_back: u32,
    pub next_back: u32,
    /// Per item (declared, then the extra one), `ENTER −` its operation
    /// entered first, and entered after a separator.
    pub first_back: Vec<u32>,
    pub again_back: Vec<u32>,
}
