//! Experiments of evaluation.md section B.

use crate::Experiment;

/// The section's experiments, in id order.
pub(crate) fn experiments() -> Vec<Experiment> {
    Vec::new()
}
