//! `purple`: the command-line front end.

mod bench;
mod cake_config;
mod demo;
mod sim_cmd;

use clap::{Parser, Subcommand};

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
    /// Run the built-in scenario: synthetic flows from two hosts (AIMD bulk, a UDP flood, VoIP
    /// on EF, a CS1 backup) through CAKE in virtual time; prints per-flow goodput and delay and
    /// `tc -s qdisc show` for the CAKE instance.
    Demo {
        /// Seconds of virtual time.
        #[arg(long, default_value_t = 30)]
        seconds: u64,
        /// Seed for all randomness (same seed, same numbers).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print the CAKE instance's statistics as `tc -j -s qdisc show` JSON instead.
        #[arg(long)]
        json: bool,
        /// cake's arguments as given to tc (default: `bandwidth 20Mbit diffserv3 triple-isolate`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Print a freshly attached cake for tc-cake ARGS, as `tc -s qdisc show` (or `-j`) would.
    CakeConfig {
        /// Device MTU (psched_mtu = MTU + 14).
        #[arg(long, default_value_t = 1500)]
        mtu: u32,
        /// Print `tc -j -s qdisc show` JSON instead of text.
        #[arg(long)]
        json: bool,
        /// cake's arguments as given to tc, e.g. `bandwidth 20Mbit diffserv4 overhead -4`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Run a TOML scenario in the simulator (early: no plots, reports or built-ins yet).
    Sim {
        /// The scenario file (format documented in crates/sim/src/scenario.rs; example:
        /// scenarios/cake-dumbbell.toml).
        file: std::path::PathBuf,
        /// Print JSON (`{"flows":[...],"links":[...]}`) instead of tables.
        #[arg(long)]
        json: bool,
    },
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
    /// Simulator speed: simulated packets (link transmissions) and events per CPU second,
    /// virtual/CPU time ratio and peak memory for fixed workloads (greedy UDP through droptail
    /// and CAKE, 50 TCP CUBIC flows through CAKE for 60 s, 10,000 TCP flows at 1 Gbit/s).
    Sim {
        /// Print `{"benchmarks":[{"workload":..,"packets_per_cpu_s":..,..},..]}` instead of a
        /// table.
        #[arg(long)]
        json: bool,
        /// Virtual seconds to simulate in every workload (default: each workload's own, 60 s
        /// except 3 s for 10,000 flows).
        #[arg(long)]
        seconds: Option<f64>,
        /// Only this workload (udp-droptail, udp-cake, tcp50-cake, tcp10k-cake).
        #[arg(long)]
        workload: Option<String>,
    },
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Command::Demo {
            seconds,
            seed,
            json,
            args,
        } => match demo::run(&args, seconds, seed, json) {
            Ok(out) => print!("{out}"),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        },
        Command::CakeConfig { mtu, json, args } => match cake_config::render(mtu, json, &args) {
            Ok(out) => print!("{out}"),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        },
        Command::Sim { file, json } => match sim_cmd::run(&file, json) {
            Ok(out) => print!("{out}"),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        },
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
        Command::Bench(BenchCommand::Sim {
            json,
            seconds,
            workload,
        }) => {
            let only = match workload.as_deref() {
                None => None,
                Some(name) => match sim::bench::SimWorkload::from_name(name) {
                    Some(w) => Some(w),
                    None => {
                        eprintln!(
                            "unknown workload {name:?} (accepted: udp-droptail, udp-cake, \
                             tcp50-cake, tcp10k-cake)"
                        );
                        std::process::exit(2);
                    }
                },
            };
            let results = bench::run_sim(seconds, only);
            if json {
                println!("{}", bench::sim_to_json(&results));
            } else {
                print!("{}", bench::sim_to_table(&results));
            }
        }
    }
}
