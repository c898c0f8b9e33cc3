//! tc's language for cake: argument parsing, canonical printing, stats in text and JSON.
//! To be implemented.
