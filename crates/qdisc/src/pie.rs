//! pie (to be implemented).
