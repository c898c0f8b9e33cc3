//! COBALT: CoDel (with the Q0.32 inverse-square-root control law) plus BLUE, one instance per
//! flow queue. To be implemented.
