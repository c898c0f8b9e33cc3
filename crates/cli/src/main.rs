//! `purple`: the command-line front end.
//!
//! **What this crate owns**: argument parsing (one `Command` variant and one module per
//! subcommand) and rendering: tables, plots, HTML, Flent files. **What it must not do**: hold a
//! mechanism a library needs (measurement analysis and orchestration that still live here are
//! listed in docs/architecture.md, "What remains of issue 13").

mod bench;
mod bench_dataplane;
mod bench_ns3;
mod bridge;
mod builtin;
mod cake_config;
mod cake_demo;
mod control;
mod ctl;
mod demo;
mod flent;
mod lab;
mod linkem;
mod matrix;
mod plot_log;
mod plots;
mod reflector;
mod report;
mod sim_cmd;
mod tc_shim;

use clap::{Args, Parser, Subcommand};

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
    /// The PURPLE comparison on a variable link (default: the slides' radio): every contender
    /// in closed loop, the slides' table plus p95/p99, plots and an HTML report in `--out`.
    /// `purple demo cake [ARGS]` runs the older CAKE-only demo.
    Demo(DemoArgs),
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
    /// Run a scenario in the simulator (a TOML file or a built-in name; see docs/scenarios.md),
    /// or `purple sim report` to run the published experiments.
    Sim(SimArgs),
    /// Forward every frame between IF_A (LAN) and IF_B (WAN) through one qdisc per direction,
    /// until SIGINT/SIGTERM.
    Bridge(bridge::BridgeArgs),
    /// A link emulator as a bridge (like mahimahi's mm-link): capacity per direction from a rate
    /// or a trace, propagation delay, a droptail buffer, loss; radio-style stats on `purple ctl`.
    Linkem(linkem::LinkemArgs),
    /// Control a running bridge: `stats [--json]` or `set-bandwidth egress|ingress RATE`
    /// (a link emulator: `set-rate up|down RATE`).
    Ctl {
        /// Bridge name.
        #[arg(long, default_value = "purple")]
        name: String,
        /// Control socket path (overrides --name).
        #[arg(long)]
        ctl: Option<std::path::PathBuf>,
        /// The command.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 1..)]
        command: Vec<String>,
    },
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// The namespace lab: the seeds' testbeds with real kernel TCP through our bridge
    /// (`purple lab run b1|b2|radio|tmobile`, `purple lab list`). Needs root.
    #[command(subcommand)]
    Lab(LabCommand),
    /// The PURPLE daemon: probe reflectors, run the controller, set CAKE's rates (docs/control.md).
    Control {
        /// Configuration file (TOML; see packaging/purple.toml).
        #[arg(long, default_value = "/etc/purple/purple.toml")]
        config: std::path::PathBuf,
        /// Only validate the configuration and explain any error.
        #[arg(long)]
        check: bool,
        /// Log decisions without changing any shaper.
        #[arg(long)]
        dry_run: bool,
        /// Record every input of the agent (probe replies, readings, actuator results, with
        /// their times) to this file as JSON lines, for replay (`daemon::record::replay`).
        #[arg(long)]
        record: Option<std::path::PathBuf>,
    },
    /// UDP timestamp echo server (one-way delays with µs timestamps) for `udp:` reflectors.
    Reflector {
        /// Address to listen on.
        #[arg(long, default_value = "0.0.0.0")]
        bind: String,
        /// UDP port.
        #[arg(long, default_value_t = 8862)]
        port: u16,
        /// At most this many replies per second (excess requests are dropped).
        #[arg(long, default_value_t = 1000)]
        max_pps: u32,
    },
    /// Say why a `purple control` decision log's rates were what they were: per direction the
    /// rates, throughput and delay, the time at the configured minimum and maximum and the
    /// rules that brought the rate to the minimum, every rule's decisions and cuts, the phases,
    /// the delay sources, the events (reflectors replaced, replies discarded, actuator
    /// errors), and findings in plain words.
    Explain {
        /// The log files, oldest first (as rotated: FILE.2 FILE.1 FILE).
        #[arg(required = true)]
        logs: Vec<std::path::PathBuf>,
        /// Only decisions at or after this log time (seconds, the log's `t`).
        #[arg(long)]
        from: Option<f64>,
        /// Only decisions at or before this log time (seconds).
        #[arg(long)]
        to: Option<f64>,
        /// One JSON object instead of the text.
        #[arg(long)]
        json: bool,
    },
    /// Plot a `purple control` decision log (JSON lines) like a simulator run.
    Plot {
        /// The log file.
        log: std::path::PathBuf,
        /// Directory for the PNG and SVG files.
        #[arg(long, default_value = ".")]
        out: std::path::PathBuf,
    },
}

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
struct DemoArgs {
    #[command(subcommand)]
    cake: Option<DemoCommand>,
    /// Variable-link scenario: radio, step, fade, fast, outage, att-lte, verizon-lte,
    /// tmobile-lte, tmobile-umts, starlink, tmobile-lte-router (tmobile-lte deployed as a home
    /// router, see --home-router); and for the passive delay signal starlink-router,
    /// starlink-icmp-apart, starlink-no-probes (download shaped at the router).
    #[arg(long, default_value = "radio")]
    scenario: String,
    /// Seed of the capacity process and the simulator (same seed, same numbers).
    #[arg(long, default_value_t = 1, conflicts_with = "matrix")]
    seed: u64,
    /// Simulated seconds (default: the scenario's length, 30 s for radio; 60 s on your own
    /// link).
    #[arg(long)]
    seconds: Option<f64>,
    /// Your own link: the download capacity as a mahimahi trace (as `purple linkem` reads).
    #[arg(long, value_name = "FILE", requires = "up_trace", conflicts_with_all = ["scenario", "link"])]
    down_trace: Option<std::path::PathBuf>,
    /// Your own link: the upload capacity as a mahimahi trace.
    #[arg(long, value_name = "FILE", requires = "down_trace")]
    up_trace: Option<std::path::PathBuf>,
    /// With --down-trace: the radio's droptail buffer in packets (default 300).
    #[arg(long, value_name = "N", requires = "down_trace")]
    buffer_packets: Option<u32>,
    /// The link's idle RTT in ms (with --matrix: every link's). On a built-in scenario or
    /// your traces the radio hop's delay each way is set so that the path has it (the
    /// simulated path beyond it has 8.4 ms; below that, the radio keeps its delay and the
    /// path is shortened); a --link file keeps its delays and the path takes the rest (at
    /// least 0.4 ms). Default: the link's own, 10.4 for the built-in ones.
    #[arg(long, value_name = "MS", conflicts_with = "lab")]
    base_rtt_ms: Option<f64>,
    /// Your own link as a TOML file: `[down]` and `[up]` each with `trace`, `rate` or
    /// `schedule` and `delay_ms`; `duration_s`, `buffer_packets` (docs/matrix.md).
    #[arg(long, value_name = "FILE.toml", conflicts_with = "scenario")]
    link: Option<std::path::PathBuf>,
    /// The judge: every contender on every built-in scenario (and your link, if given) for
    /// many seeds, median and worst seed per scenario, purple's target sweep, the issue's
    /// targets; plots and report.md in DIR/matrix/.
    #[arg(long)]
    matrix: bool,
    /// With --matrix: seeds 1..=N.
    #[arg(long, value_name = "N", requires = "matrix", default_value_t = 10)]
    seeds: u64,
    /// With --matrix: only these built-in scenarios (comma-separated; the held-out links'
    /// names too).
    #[arg(long, value_delimiter = ',', requires = "matrix")]
    scenarios: Vec<String>,
    /// With --matrix: the held-out links instead of the built-in scenarios (wisp, lte-walk,
    /// mmwave, cable-evening, wifi: link families never used to tune PURPLE; docs/matrix.md).
    #[arg(long, requires = "matrix", conflicts_with = "scenarios")]
    holdout: bool,
    /// With --matrix: only these contenders (comma-separated): fifo, fq-codel, static-safe,
    /// static-optimistic, purple-radio, purple-aimd, cake-autorate, sqm-autorate,
    /// autorate-ingress, purple, oracle, oracle-late, oracle-lookahead, oracle-censored-5,
    /// oracle-censored-25, oracle-censored-100; on request only: oracle-saturated-5,
    /// oracle-saturated-25, oracle-saturated-100 (docs/matrix.md).
    #[arg(long, value_delimiter = ',', requires = "matrix")]
    contenders: Vec<String>,
    /// With --matrix: purple's latency targets to sweep, ms (comma-separated; default
    /// 1,2,3,5,8,12,20,30; `none` for no sweep).
    #[arg(long, value_name = "MS,..", requires = "matrix")]
    targets: Option<String>,
    /// With --matrix: worker threads (default: every core; results do not depend on it).
    #[arg(long, value_name = "N", requires = "matrix")]
    threads: Option<usize>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Directory for the plots, results.json and index.html.
    #[arg(long, value_name = "DIR", default_value = "purple-demo")]
    out: std::path::PathBuf,
    /// Write no files.
    #[arg(long)]
    no_out: bool,
    /// Run the comparison in the namespace lab instead (real kernel TCP through our bridge,
    /// `purple linkem`, `purple reflector` and `purple control`; root needed). --scenario then
    /// names a lab scenario with a link emulator: radio (default) or starlink (the passive
    /// delay signal's); or --link FILE.toml runs the radio's contenders on your link (as
    /// `purple lab run --link`), --link-of NAME on section C's scenario NAME's link (with
    /// --home-router where section C deploys it otherwise). Files go into DIR/lab/; --seconds
    /// is seconds of load per contender (default 30).
    #[arg(long, conflicts_with_all = ["matrix", "down_trace"])]
    lab: bool,
    /// With --lab: the radio's contenders on the link of section C's scenario NAME for --seed
    /// (a recorded trace at the seed's offset, written out for `purple linkem`), as `purple
    /// lab run --link-of NAME` runs them: refused where section C deploys the scenario
    /// otherwise than the lab (a home router), naming how; --home-router plays it as one.
    #[arg(
        long,
        value_name = "NAME",
        requires = "lab",
        conflicts_with_all = ["link", "scenario"]
    )]
    link_of: Option<String>,
    /// Deploy the link as a home router deploys CAKE and `purple control`: the download
    /// shaped at the router after the radio, every controller's throughput read from CAKE's
    /// own sent bytes both ways. Default: each scenario's own (CAKE in front of the radio, the
    /// radio's delivered bytes). With --matrix: every link. With --lab: only with --link-of
    /// (the lab is always a router; this plays section C's scenario NAME deployed as one).
    #[arg(long)]
    home_router: bool,
    /// With --lab: inject a fault into the testbed: `no-icmp-echo` (the server ignores ICMP
    /// echo: on starlink every daemon probe is lost) or `icmp-apart` (the link emulator serves
    /// ICMP in a queue of its own first: on starlink the daemons' probes miss the download's
    /// queue). Repeatable.
    #[arg(long, value_name = "NAME", value_parser = ::lab::Fault::parse, requires = "lab")]
    fault: Vec<::lab::Fault>,
    /// With --lab: then run the same link with PURPLE, cake-autorate and static CAKE on our
    /// bridge and on Linux's own sch_cake inside the reference kernel (QEMU; the link scaled
    /// to what the guest keeps up with), as `purple lab run ... --kernel` does, and print
    /// those tables too.
    #[arg(long, requires = "lab")]
    kernel: bool,
}

#[derive(Subcommand, Debug)]
enum DemoCommand {
    /// The CAKE-only demo: synthetic flows from two hosts (AIMD bulk, a UDP flood, VoIP on EF,
    /// a CS1 backup) through CAKE in virtual time; prints per-flow goodput and delay and
    /// `tc -s qdisc show` for the CAKE instance.
    Cake {
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
    /// The namespace lab: the seeds' testbeds with real kernel TCP through our bridge
    /// (`purple lab run b1|b2|radio|tmobile`, `purple lab list`). Needs root.
    #[command(subcommand)]
    Lab(LabCommand),
}

#[derive(Subcommand, Debug)]
enum LabCommand {
    /// Run a scenario in network namespaces and report it beside the simulator and the seed.
    Run(Box<LabRunArgs>),
    /// List the lab scenarios.
    List,
}

/// `purple lab run`'s arguments.
#[derive(Args, Debug)]
struct LabRunArgs {
    /// Scenario name (`purple lab list`).
    #[arg(
        required_unless_present_any = ["link", "link_of"],
        conflicts_with_all = ["link", "link_of"]
    )]
    scenario: Option<String>,
    /// Your own link as a link file (the simulator's: `[down]` and `[up]` each with
    /// `trace`, `rate` or `schedule` and `delay_ms`; `duration_s`, `buffer_packets`;
    /// docs/lab.md): the radio's contenders on it, behind `purple linkem`, with static
    /// CAKE and the daemons' range derived from it as `purple demo --link` does.
    #[arg(long, value_name = "FILE.toml", conflicts_with = "link_of")]
    link: Option<std::path::PathBuf>,
    /// The link of section C's scenario NAME as `purple demo --scenario NAME --seed N`
    /// plays it (radio, step, fade, fast, outage, att-lte, verizon-lte, tmobile-lte,
    /// tmobile-umts, starlink, the held-out wisp, lte-walk, mmwave, cable-evening, wifi,
    /// ...): its capacities (a recorded trace at the seed's offset, written out for `purple
    /// linkem`), delays and buffer, with its load (section C's TCP downloads and uploads,
    /// beside the radio test's probes) and the radio's contenders, static CAKE at
    /// its safe rates and the daemons in its range. The lab deploys as a home router and
    /// probes as it does (see --fault): a scenario section C deploys otherwise (the
    /// synthetic links, the recorded ones but tmobile-lte-router, the held-out ones) is
    /// refused, naming where the deployments differ, unless --home-router. --seconds
    /// shortens the load only.
    #[arg(long, value_name = "NAME")]
    link_of: Option<String>,
    /// With --link-of: play section C's scenario deployed as a home router (the download
    /// shaped at the router after the radio, throughput read from CAKE's sent bytes and the
    /// WAN device's received bytes), as
    /// `purple demo --home-router` deploys it in the simulator. A probe path other than the
    /// lab's (starlink-icmp-apart, starlink-no-probes) stays refused.
    #[arg(long, requires = "link_of", conflicts_with_all = ["scenario", "link"])]
    home_router: bool,
    /// Only these contenders, by the ids of `purple demo --matrix --contenders`
    /// (comma-separated, run in this order): fifo (the radio's pfifo without a shaper),
    /// fq-codel, static-safe (the scenario's static CAKE), purple-aimd, cake-autorate,
    /// sqm-autorate, autorate-ingress (CAKE's own autorate on the download, static on the
    /// upload), purple. The others (the oracles, purple-radio, static-optimistic) are
    /// refused, naming the role and why; so is a role the scenario has no contender for.
    #[arg(
        long,
        value_name = "ID,..",
        value_delimiter = ',',
        conflicts_with_all = ["qdisc", "cake_autorate"]
    )]
    contenders: Vec<String>,
    /// With --link-of: the seed of the scenario's capacity process (or trace offset).
    #[arg(long, value_name = "N", default_value_t = 1, requires = "link_of")]
    seed: u64,
    /// Seconds of load per test (default: the seed's length).
    #[arg(long)]
    seconds: Option<f64>,
    /// Print one JSON object (`runs` in `purple sim --json`'s form, `sim`, `kernel`).
    #[arg(long)]
    json: bool,
    /// Write each run's summary.json, plots and Flent file under DIR/RUN/.
    #[arg(long, value_name = "DIR")]
    out: Option<std::path::PathBuf>,
    /// Also run it in the reference kernel (Linux's own qdiscs, QEMU) and report both. On a
    /// varying link (radio, tmobile, starlink, --link, --link-of) the guest runs `purple
    /// linkem` too, and the daemons drive Linux's CAKE over netlink there as they drive our
    /// bridge's here (each controller's rate is read back from the shaper in both); a link
    /// faster than the guest keeps up with (16 Mbit/s) is scaled down for both runs unless
    /// --scale says otherwise.
    #[arg(long)]
    kernel: bool,
    /// Play the link at this share of its capacity (0 < F <= 1): capacities, static CAKE
    /// rates, the daemons' range and the buffer's packets times F, delays unchanged (for a
    /// machine that cannot keep up with the link: the reference kernel under QEMU).
    #[arg(long, value_name = "F")]
    scale: Option<f64>,
    /// Only this contender (cake, fq_codel, fifo).
    #[arg(long)]
    qdisc: Option<String>,
    /// Only this test (e.g. upload, download, bidir for b1).
    #[arg(long)]
    test: Option<String>,
    /// Skip the simulator comparison.
    #[arg(long)]
    no_sim: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Inside the reference kernel: Linux qdiscs via tc, netem delay.
    #[arg(long, hide = true)]
    guest: bool,
    /// Inject a fault into the testbed: `no-icmp-echo` (the server ignores ICMP echo; a
    /// run with an ICMP latency probe then fails, naming it) or `icmp-apart` (the link
    /// emulator queues ICMP apart from data, served first). Repeatable.
    #[arg(long, value_name = "NAME", value_parser = ::lab::Fault::parse)]
    fault: Vec<::lab::Fault>,
    /// radio, tmobile: also run the real cake-autorate from this checkout (one you fetched:
    /// `git clone https://github.com/lynxthecat/cake-autorate`) on the router's bridge
    /// through purple's tc shim, beside our port of its law (both probing the same six
    /// ICMP echo reflectors), and compare them. Without --qdisc only those two run.
    /// Installs bash and fping with apt-get if they are missing.
    #[arg(long, value_name = "DIR")]
    cake_autorate: Option<std::path::PathBuf>,
}

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
struct SimArgs {
    #[command(subcommand)]
    report: Option<SimCommand>,
    /// Scenario: a TOML file, the name of a built-in one, or an experiment id such as A2 or
    /// B2 (`purple sim --list` shows them all).
    #[arg(required_unless_present = "list")]
    scenario: Option<String>,
    /// List the built-in scenarios and exit.
    #[arg(long)]
    list: bool,
    /// Print one JSON object (`{"scenario","seed","duration_s","flows","links","qdiscs"}`)
    /// instead of tables.
    #[arg(long)]
    json: bool,
    /// Also write summary.json, plots (PNG and SVG) and `<scenario>.flent.gz` into DIR.
    #[arg(long, value_name = "DIR")]
    out: Option<std::path::PathBuf>,
    /// Override the scenario's seed.
    #[arg(long)]
    seed: Option<u64>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

#[derive(Subcommand, Debug)]
enum SimCommand {
    /// Run the published experiments (evaluation.md A and B) and report, per claim, whether we
    /// reproduce it. Exits 0 even when claims fail.
    Report {
        /// Also write report.md and per experiment a folder of plots and Flent files into DIR.
        #[arg(long, value_name = "DIR")]
        out: Option<std::path::PathBuf>,
        /// Only these experiment ids, comma-separated (e.g. A1,B2).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// Seed of every experiment (default 1).
        #[arg(long)]
        seed: Option<u64>,
        /// Print the reports as JSON.
        #[arg(long)]
        json: bool,
        /// No progress lines.
        #[arg(long)]
        quiet: bool,
        /// Then the matrix (as `purple demo --matrix`: every contender on every variable link
        /// for many seeds; heavy: about 45 min on 2 cores), its section in report.md and its
        /// plots in DIR/matrix/.
        #[arg(long)]
        matrix: bool,
        /// With --matrix: seeds 1..=N.
        #[arg(long, value_name = "N", requires = "matrix", default_value_t = 10)]
        seeds: u64,
    },
}

#[derive(Subcommand, Debug)]
enum BenchCommand {
    /// Dataplane speed in network namespaces: direct veth, the bridge unshaped, CAKE at 1 Gbit/s
    /// and 100 Mbit/s, kernel HTB; throughput, added latency, CPU per Gbit/s (needs root).
    Dataplane(bench_dataplane::Args),
    /// Cost per packet of enqueue + dequeue for CAKE and the baselines at 1, 1,024 and 10,000
    /// active flows (the loop of `cargo bench -p purple-cake`), and each one's cost over pfifo's
    /// measured in the same run (pfifo runs in slices interleaved with every case).
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
        /// Instead of the workloads: the ns-3 comparison dumbbell (built-in scenario
        /// ns3-dumbbell, 60 s unless --seconds) in our simulator and in ns-3, in this run;
        /// prints both CPU times, packets per CPU second, goodputs and the ratios. Builds our
        /// ns-3 program with g++ and installs Debian's libns3-dev if ns-3 is missing.
        #[arg(long, conflicts_with = "workload")]
        versus_ns3: bool,
        /// Where ns-3 is installed (headers in `PREFIX/include/ns3`, libraries in `PREFIX/lib`
        /// or `PREFIX/lib/<multiarch>`); apt-get installs only under /usr.
        #[arg(long, default_value = "/usr", requires = "versus_ns3")]
        ns3_prefix: std::path::PathBuf,
        /// Never install ns-3: a missing ns-3 is reported as an error.
        #[arg(long, requires = "versus_ns3")]
        no_install: bool,
        /// Where the ns-3 program is written and built (reused while its source and ns-3 are
        /// unchanged); default: purple-ns3 in the temporary directory.
        #[arg(long, requires = "versus_ns3")]
        ns3_build_dir: Option<std::path::PathBuf>,
    },
    /// The system-call floor `purple bench control` measures beside the daemon (run by it):
    /// per wake-up at `--rate` Hz, one ICMP timestamp request to the next reflector, one
    /// `recvmmsg` and a read of each counter, and nothing else.
    #[command(hide = true)]
    ControlFloor {
        /// Wake-ups (and probes) per second.
        #[arg(long)]
        rate: f64,
        /// Reflectors (IPv4), probed round robin.
        #[arg(long, value_delimiter = ',', required = true)]
        reflectors: Vec<std::net::Ipv4Addr>,
        /// Devices whose `tx_bytes` counter is read at each wake-up.
        #[arg(long, value_delimiter = ',')]
        tx_counters: Vec<String>,
    },
    /// What `purple control` costs a router: CPU per hour, system calls and wake-ups per second
    /// of its whole process tree (perf events), probing six kernel reflectors in a network
    /// namespace and controlling two directions; with --cake-autorate DIR the same for
    /// cake-autorate in the same setup, and the ratios (needs root).
    Control {
        /// Measured seconds per contender.
        #[arg(long, default_value_t = 30.0)]
        seconds: f64,
        /// Seconds each contender runs before the measurement (its start-up is left out).
        #[arg(long, default_value_t = 5.0)]
        warmup: f64,
        /// Probes per second, in total over the six reflectors.
        #[arg(long, default_value_t = 20.0)]
        rate: f64,
        /// A cake-autorate checkout you fetched (`git clone
        /// https://github.com/lynxthecat/cake-autorate`): run it too, its `tc` calls recorded
        /// by purple's tc shim. Installs bash and fping with apt-get if they are missing.
        #[arg(long, value_name = "DIR")]
        cake_autorate: Option<std::path::PathBuf>,
        /// Keep the configurations and logs in DIR.
        #[arg(long, value_name = "DIR")]
        keep: Option<std::path::PathBuf>,
        /// Also measure the daemon of another `purple` binary (e.g. an older build), the same
        /// way in the same run.
        #[arg(long, value_name = "BIN")]
        compare: Option<std::path::PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Instead: the passive delay signal's capture (root): its CPU at each of `--flows`
        /// TCP connections, two runs of `--seconds` each (with and without the capture).
        #[arg(long)]
        passive: bool,
        /// With --passive: the flow counts (comma-separated).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "100,1000",
            requires = "passive"
        )]
        flows: Vec<usize>,
        /// With --passive: TCP segments per second offered on the WAN device (two thirds data
        /// arriving, one third ACKs leaving; 25000 is a 200 Mbit/s download).
        #[arg(long, default_value_t = 25_000.0, requires = "passive")]
        pps: f64,
        /// With --passive: the capture's `passive.sample` (one timestamp value in N).
        #[arg(long, default_value_t = 8, requires = "passive")]
        sample: u32,
    },
}

/// The matrix's options from `--seeds`, `--scenarios`, `--contenders` and `--targets` (a
/// comma-separated list of ms, or `none`).
fn matrix_opts(
    seeds: u64,
    scenarios: Vec<String>,
    contenders: Vec<String>,
    targets: Option<&str>,
) -> Result<matrix::MatrixOpts, String> {
    let targets_ms = match targets {
        None => None,
        Some("none") => Some(Vec::new()),
        Some(t) => Some(
            t.split(',')
                .map(|x| {
                    x.trim().parse::<f64>().map_err(|_| {
                        format!("--targets {t:?}: {x:?} is not a number of ms (e.g. 1,2,5 or none)")
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
    };
    Ok(matrix::MatrixOpts {
        seeds: Some(seeds),
        scenarios,
        contenders,
        targets_ms,
        ..Default::default()
    })
}

/// Prints `r`'s text, or the error and exits with status 2.
fn finish<E: std::fmt::Display>(r: Result<String, E>) {
    match r {
        Ok(out) => print!("{out}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}

fn main() {
    if tc_shim::invoked_as_tc() {
        std::process::exit(tc_shim::main());
    }
    let cli = Cli::parse();
    match cli.command {
        Command::Demo(DemoArgs {
            cake:
                Some(DemoCommand::Cake {
                    seconds,
                    seed,
                    json,
                    args,
                }),
            ..
        }) => match cake_demo::run(&args, seconds, seed, json) {
            Ok(out) => print!("{out}"),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        },
        Command::Demo(a) if a.lab && a.home_router && a.link_of.is_none() => {
            eprintln!(
                "--home-router with --lab: only with --link-of NAME (the lab is always a home \
                 router; --home-router plays section C's scenario NAME deployed as one)"
            );
            std::process::exit(2);
        }
        Command::Demo(a) if a.lab => match demo::run_lab(&demo::LabDemoOpts {
            seconds: a.seconds,
            json: a.json,
            out: (!a.no_out).then(|| a.out.join("lab")),
            kernel: a.kernel,
            scenario: a.scenario.clone(),
            link: a.link.clone(),
            link_of: a.link_of.clone().map(|n| (n, a.seed)),
            home_router: a.home_router,
            faults: a.fault.clone(),
        }) {
            Ok(out) => print!("{out}"),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        },
        Command::Demo(a) => {
            let link = match (a.down_trace, a.up_trace, a.link) {
                (Some(down), Some(up), _) => Some(demo::LinkChoice::Traces {
                    down,
                    up,
                    buffer_packets: a.buffer_packets,
                }),
                (_, _, Some(f)) => Some(demo::LinkChoice::File(f)),
                _ => None,
            };
            let r = if a.matrix {
                let scenarios = if a.holdout {
                    experiments::c::scenario::HOLDOUT_NAMES
                        .iter()
                        .map(|n| n.to_string())
                        .collect()
                } else {
                    a.scenarios
                };
                matrix_opts(a.seeds, scenarios, a.contenders, a.targets.as_deref()).and_then(
                    |mut o| {
                        o.link = match &link {
                            Some(l) => Some(demo::link_scenario(l, 1, a.seconds)?),
                            None => None,
                        };
                        o.seconds = a.seconds;
                        o.threads = a.threads;
                        o.home_router = a.home_router;
                        o.base_rtt_ms = a.base_rtt_ms;
                        o.json = a.json;
                        o.out = (!a.no_out).then(|| a.out.join("matrix"));
                        matrix::run(&o)
                    },
                )
            } else {
                demo::run(&demo::DemoOpts {
                    link: link.unwrap_or(demo::LinkChoice::Scenario(a.scenario)),
                    seed: a.seed,
                    seconds: a.seconds,
                    json: a.json,
                    out: (!a.no_out).then_some(a.out),
                    home_router: a.home_router,
                    base_rtt_ms: a.base_rtt_ms,
                })
            };
            match r {
                Ok(out) => print!("{out}"),
                Err(e) => {
                    eprintln!("error: {e}");
                    std::process::exit(2);
                }
            }
        }
        Command::CakeConfig { mtu, json, args } => match cake_config::render(mtu, json, &args) {
            Ok(out) => print!("{out}"),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        },
        Command::Sim(args) => {
            let result = match (args.report, args.scenario) {
                (
                    Some(SimCommand::Report {
                        out,
                        only,
                        seed,
                        json,
                        quiet,
                        matrix,
                        seeds,
                    }),
                    _,
                ) => (if matrix {
                    matrix_opts(seeds, Vec::new(), Vec::new(), None).map(Some)
                } else {
                    Ok(None)
                })
                .and_then(|m| {
                    report::run(&report::ReportOpts {
                        out,
                        only,
                        seed,
                        json,
                        quiet,
                        matrix: m,
                    })
                }),
                _ if args.list => Ok(sim_cmd::list()),
                (None, Some(scenario))
                    if !std::path::Path::new(&scenario).exists()
                        && experiments::find(&scenario).is_some() =>
                {
                    // An experiment id (A1..B4, C..): its report, as `sim report --only ID`.
                    report::run(&report::ReportOpts {
                        out: args.out,
                        only: vec![scenario],
                        seed: args.seed,
                        json: args.json,
                        quiet: args.quiet,
                        matrix: None,
                    })
                }
                (None, Some(scenario)) => sim_cmd::run(
                    &scenario,
                    &sim_cmd::SimOpts {
                        json: args.json,
                        out: args.out,
                        seed: args.seed,
                        quiet: args.quiet,
                    },
                ),
                (None, None) => Err("purple sim: give a scenario (or --list)".to_string()),
            };
            match result {
                Ok(out) => print!("{out}"),
                Err(e) => {
                    eprintln!("error: {e}");
                    std::process::exit(2);
                }
            }
        }
        Command::Bridge(a) => {
            if let Err(e) = bridge::run(a) {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
        Command::Linkem(a) => {
            if let Err(e) = linkem::run(a) {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
        Command::Bench(BenchCommand::Dataplane(a)) => match bench_dataplane::run(&a) {
            Ok(out) => print!("{out}"),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        },
        Command::Ctl { name, ctl, command } => match ctl::run(&name, ctl, &command) {
            Ok(out) => print!("{out}"),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        },
        Command::Control {
            config,
            check,
            dry_run,
            record,
        } => finish(if check {
            control::check(&config)
        } else {
            control::run(&config, dry_run, record.as_deref())
        }),
        Command::Reflector {
            bind,
            port,
            max_pps,
        } => finish(reflector::run(&bind, port, max_pps)),
        Command::Plot { log, out } => finish(plot_log::run(&log, &out)),
        Command::Explain {
            logs,
            from,
            to,
            json,
        } => finish(daemon::service::explain(
            &logs,
            daemon::explain::ExplainOpts { from, to },
            json,
        )),
        Command::Bench(BenchCommand::Control {
            seconds,
            warmup,
            rate,
            cake_autorate,
            keep,
            compare,
            json,
            passive: false,
            ..
        }) => finish(control::bench(
            control::BenchArgs {
                seconds,
                warmup,
                rate_hz: rate,
                cake_autorate,
                keep,
                compare,
            },
            json,
        )),
        Command::Bench(BenchCommand::ControlFloor {
            rate,
            reflectors,
            tx_counters,
        }) => {
            let counters: Vec<(String, daemon::config::Counter)> = tx_counters
                .into_iter()
                .map(|d| (d, daemon::config::Counter::Tx))
                .collect();
            finish(
                daemon::bench_floor::run(rate, &reflectors, &counters, None)
                    .map(|()| String::new())
                    .map_err(|e| format!("purple bench control-floor: {e}")),
            )
        }
        Command::Bench(BenchCommand::Control {
            seconds,
            json,
            flows,
            pps,
            sample,
            ..
        }) => finish(control::bench_passive(seconds, &flows, pps, sample, json)),
        Command::Lab(LabCommand::List) => print!("{}", lab::list()),
        Command::Lab(LabCommand::Run(a)) => {
            let LabRunArgs {
                scenario,
                link,
                link_of,
                home_router,
                contenders,
                seed,
                seconds,
                json,
                out,
                kernel,
                scale,
                qdisc,
                test,
                no_sim,
                quiet,
                guest,
                fault,
                cake_autorate,
            } = *a;
            let o = lab::LabCmdOpts {
                cake_autorate,
                contenders,
                seconds,
                json,
                out,
                kernel,
                scale,
                qdisc,
                test,
                guest,
                no_sim,
                quiet,
                faults: fault,
            };
            let which = match (scenario, link, link_of) {
                (_, Some(f), _) => lab::Which::Link(f),
                (_, None, Some(name)) => lab::Which::LinkOf {
                    name,
                    seed,
                    home_router,
                },
                (Some(n), None, None) => lab::Which::Name(n),
                (None, None, None) => lab::Which::Name(String::new()),
            };
            match lab::run(&which, &o) {
                Ok(out) => print!("{out}"),
                Err(e) => {
                    eprintln!("error: {e}");
                    std::process::exit(2);
                }
            }
        }
        Command::Bench(BenchCommand::Engine {
            json,
            seconds,
            qdisc,
            flows,
        }) => {
            let results = match bench::run_engine(seconds, qdisc.as_deref(), flows) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("error: --qdisc: {e}");
                    std::process::exit(2);
                }
            };
            if json {
                println!("{}", bench::to_json(&results));
            } else {
                print!("{}", bench::to_table(&results));
            }
        }
        Command::Bench(BenchCommand::Sim {
            json,
            seconds,
            versus_ns3: true,
            ns3_prefix,
            no_install,
            ns3_build_dir,
            ..
        }) => {
            let opts = bench_ns3::VersusOpts {
                seconds: seconds.unwrap_or(60.0).clamp(1e-3, 86_400.0),
                prefix: ns3_prefix,
                install: !no_install,
                build_dir: ns3_build_dir.unwrap_or_else(|| std::env::temp_dir().join("purple-ns3")),
            };
            let ours = match bench_ns3::run_ours(opts.seconds) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("error: our side: {e}");
                    std::process::exit(2);
                }
            };
            let ns3 = bench_ns3::run_ns3(&opts);
            if json {
                println!("{}", bench_ns3::to_json(&ours, ns3.as_ref()));
            } else {
                print!("{}", bench_ns3::to_table(&ours, ns3.as_ref().ok()));
            }
            if let Err(e) = ns3 {
                eprintln!("error: no ns-3 measurement: {e}");
                std::process::exit(2);
            }
        }
        Command::Bench(BenchCommand::Sim {
            json,
            seconds,
            workload,
            ..
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
