//! `purple`: the command-line front end.

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
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Command::Demo => println!("demo: not yet"),
    }
}
