//! Cost per packet of one enqueue plus one dequeue with a standing queue over 1, 1,024 and
//! 10,000 active flows, for CAKE (shaped at 10 Gbit/s) and every baseline. The loop itself lives
//! in `cake::bench` so that `purple bench engine` measures the same thing.

use cake::bench::{BenchQdisc, EngineBench, FLOW_COUNTS};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::time::Duration;

fn engine(c: &mut Criterion) {
    let mut g = c.benchmark_group("enqueue_dequeue");
    g.throughput(Throughput::Elements(1))
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    for kind in BenchQdisc::ALL {
        for flows in FLOW_COUNTS {
            let mut b = EngineBench::new(kind, flows);
            g.bench_function(BenchmarkId::new(kind.name(), flows), |bencher| {
                bencher.iter(|| b.step())
            });
        }
    }
    g.finish();
}

criterion_group!(benches, engine);
criterion_main!(benches);
