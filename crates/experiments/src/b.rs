//! Experiments of evaluation.md section B: the CAKE performance report (20/3 Mbit/s, 45 ms
//! each way, CUBIC + ECN + paced endpoints) against HTB + SFQ / PIE / CoDel / SFB / FQ-CoDel /
//! pfifo, CAKE and CAKE-Lite.

mod b1;
mod b2;
mod b3;
mod b4;
mod common;

use crate::Experiment;

/// The section's experiments, in id order.
pub(crate) fn experiments() -> Vec<Experiment> {
    vec![
        Experiment {
            id: "B1",
            title: "Single TCP flow up / down / bidirectional: induced latency per contender",
            run: b1::run,
        },
        Experiment {
            id: "B2",
            title: "RRUL and RRUL-BE: throughput, induced latency, CAKE's Diffserv shares",
            run: b2::run,
        },
        Experiment {
            id: "B3",
            title: "rrul_50_up / rrul_50_down: 50 bulk flows one way, one the other",
            run: b3::run,
        },
        Experiment {
            id: "B4",
            title: "Household mix: VoIP, bulk, a CS1 LEDBAT swarm, an EF bulk flow, in phases",
            run: b4::run,
        },
    ]
}
