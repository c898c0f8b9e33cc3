//! The TCP ACK filter. To be implemented.
