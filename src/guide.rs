//! # Guide (API skeleton; implementation in progress)
use crate::index::{TokenIndex, TokenSet};
use crate::vocab::TokenId;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum GuideError {
    #[error("token {0} is not allowed here")]
    NotAllowed(TokenId),
}

pub struct Guide {
    index: Arc<TokenIndex>,
}

impl Guide {
    pub fn new(index: Arc<TokenIndex>) -> Guide {
        Guide { index }
    }
    pub fn index(&self) -> &Arc<TokenIndex> {
        &self.index
    }
    pub fn allowed(&self) -> &TokenSet {
        todo!()
    }
    pub fn is_allowed(&self, _t: TokenId) -> bool {
        todo!()
    }
    pub fn advance(&mut self, _t: TokenId) -> Result<(), GuideError> {
        todo!()
    }
    pub fn is_accepting(&self) -> bool {
        todo!()
    }
    pub fn is_finished(&self) -> bool {
        todo!()
    }
    pub fn rollback(&mut self, _n: usize) -> Result<(), GuideError> {
        todo!()
    }
    pub fn tokens_to_accept(&self) -> Option<u32> {
        todo!()
    }
    pub fn tokens_to_accept_after(&self, _t: TokenId) -> Option<u32> {
        todo!()
    }
    pub fn forced_bytes(&self) -> Vec<u8> {
        todo!()
    }
}
