//! `purple`: the command-line front end.

mod cake_config;

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
    /// Run the built-in demo: synthetic traffic through CAKE, printed as `tc -s qdisc show`.
    Demo,
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
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Command::Demo => println!("demo: not yet"),
        Command::CakeConfig { mtu, json, args } => match cake_config::render(mtu, json, &args) {
            Ok(out) => print!("{out}"),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        },
    }
}
