//! `purple`: the command-line front end.

use clap::{Parser, Subcommand};

mod bench;

#[derive(Parser, Debug)]
#[command(
    name = "purple",
    version,
    about = "CAKE in userspace, and PURPLE to keep it tuned"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the built-in demo: synthetic traffic through CAKE, printed as `tc -s qdisc show`.
    Demo,
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Subcommand, Debug)]
enum BenchCommand {
    /// Cost per packet of enqueue + dequeue for CAKE and the baselines at 1, 1,024 and 10,000
    /// active flows (the loop of `cargo bench -p purple-cake`).
    Engine {
        /// Print `{"benchmarks":[{"qdisc":..,"flows":..,"ns_per_packet":..},..]}` instead of a
        /// table.
        #[arg(long)]
        json: bool,
        /// Wall-clock seconds to run each case.
        #[arg(long, default_value_t = 0.5)]
        seconds: f64,
        /// Only this qdisc (cake, pfifo, bfifo, codel, fq_codel, pie).
        #[arg(long)]
        qdisc: Option<String>,
        /// Only this many flows (instead of 1, 1024 and 10000).
        #[arg(long)]
        flows: Option<usize>,
    },
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Command::Demo => println!("demo: not yet"),
        Command::Bench(BenchCommand::Engine {
            json,
            seconds,
            qdisc,
            flows,
        }) => {
            let results = bench::run_engine(seconds, qdisc.as_deref(), flows);
            if json {
                println!("{}", bench::to_json(&results));
            } else {
                print!("{}", bench::to_table(&results));
            }
        }
    }
}
