//! fifo (to be implemented).
