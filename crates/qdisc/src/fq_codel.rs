//! fq_codel (to be implemented).
