//! codel (to be implemented).
