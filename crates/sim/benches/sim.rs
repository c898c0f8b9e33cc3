//! Simulator speed on the fixed workloads of `sim::bench` (the same ones `purple bench sim`
//! runs): each iteration simulates 10 ms more virtual time of a running workload; throughput is
//! reported per simulated millisecond. The 10,000-flow workload is measured after its flows
//! have started (from 1 s of virtual time on).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use qdisc::Duration;
use sim::bench::{SimBench, SimWorkload};

fn workloads(c: &mut Criterion) {
    let mut g = c.benchmark_group("sim");
    g.throughput(Throughput::Elements(10))
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(3))
        .sample_size(10);
    for w in SimWorkload::ALL {
        // Long enough never to reach the end while criterion iterates.
        let mut b = SimBench::new(w, Duration::from_secs(100_000));
        if w == SimWorkload::Tcp10kCake {
            b.advance(Duration::from_secs(1));
        }
        g.bench_function(BenchmarkId::new("virtual_ms", w.name()), |bencher| {
            bencher.iter(|| b.advance(Duration::from_millis(10)))
        });
    }
    g.finish();
}

criterion_group!(benches, workloads);
criterion_main!(benches);
