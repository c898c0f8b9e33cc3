// The dumbbell of `purple bench sim --versus-ns3`, as an ns-3 program (ns-3.37 public API).
//
// purple writes this file into a build directory at run time, compiles it with g++ against the
// system's ns-3 (Debian's libns3-dev) and runs it beside the same topology in its own simulator
// (scenarios/ns3-dumbbell.toml). Keep the two in step: every setting below has its twin there.
//
//   host a --(1 Gbit/s, 1 ms)-- r1 ==(100 Mbit/s, 10 ms, FQ-CoDel)== r2 --(1 Gbit/s, 1 ms)-- host b
//
// N TCP CUBIC bulk flows from a to b (one sink port each), started GAP ms apart; no ECN; MSS
// 1448; initial window 10; minimum RTO 200 ms. Access links: no queue disc, a 1000-packet
// droptail device queue. Bottleneck, both directions: FQ-CoDel (ns-3's defaults, which are
// Linux's) in front of a device queue of Q packets.
//
// Prints one line of `key=value` pairs:
//   purple-ns3 sim_s=.. cpu_s=.. run_cpu_s=.. packets=.. goodput_bps=.. flows_with_progress=..
// cpu_s is this process's CPU time from the start of main to the end of the run (topology
// building included), run_cpu_s only Simulator::Run; packets counts every packet that began
// transmission on any point-to-point device (a packet crossing three links counts three times).

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <cstdio>
#include <ctime>

using namespace ns3;

namespace
{

uint64_t g_transmissions = 0;

void
CountTransmission(Ptr<const Packet>)
{
    ++g_transmissions;
}

double
ProcessCpuSeconds()
{
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

PointToPointHelper
LinkOf(const char* rate, const char* delay, uint32_t queuePackets)
{
    PointToPointHelper p2p;
    p2p.SetDeviceAttribute("DataRate", StringValue(rate));
    p2p.SetChannelAttribute("Delay", StringValue(delay));
    p2p.SetQueue("ns3::DropTailQueue",
                 "MaxSize",
                 QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, queuePackets)));
    return p2p;
}

} // namespace

int
main(int argc, char* argv[])
{
    const double cpuStart = ProcessCpuSeconds();
    uint32_t flows = 50;
    double seconds = 60.0;
    double gapMs = 10.0;
    uint32_t bottleneckQueue = 5;
    CommandLine cmd;
    cmd.AddValue("flows", "TCP flows", flows);
    cmd.AddValue("seconds", "simulated seconds", seconds);
    cmd.AddValue("gapMs", "milliseconds between flow starts", gapMs);
    cmd.AddValue("bottleneckQueue", "bottleneck device queue, packets", bottleneckQueue);
    cmd.Parse(argc, argv);

    Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(TcpCubic::GetTypeId()));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(1448));
    Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(10));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(4 << 20));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(4 << 20));
    Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(MilliSeconds(200)));

    NodeContainer nodes;
    nodes.Create(4); // a, r1, r2, b
    PointToPointHelper access = LinkOf("1Gbps", "1ms", 1000);
    PointToPointHelper bottleneck = LinkOf("100Mbps", "10ms", bottleneckQueue);
    NetDeviceContainer left = access.Install(nodes.Get(0), nodes.Get(1));
    NetDeviceContainer middle = bottleneck.Install(nodes.Get(1), nodes.Get(2));
    NetDeviceContainer right = access.Install(nodes.Get(2), nodes.Get(3));

    InternetStackHelper stack;
    stack.Install(nodes);
    TrafficControlHelper fqCodel;
    fqCodel.SetRootQueueDisc("ns3::FqCoDelQueueDisc");
    fqCodel.Install(middle);

    Ipv4AddressHelper addresses;
    addresses.SetBase("10.0.1.0", "255.255.255.0");
    addresses.Assign(left);
    addresses.SetBase("10.0.2.0", "255.255.255.0");
    addresses.Assign(middle);
    addresses.SetBase("10.0.3.0", "255.255.255.0");
    Ipv4InterfaceContainer rightIfs = addresses.Assign(right);
    // Address assignment gives every device without a queue disc ns-3's default one; the
    // access links have none (a plain droptail device queue, as in the purple scenario).
    TrafficControlHelper none;
    none.Uninstall(left);
    none.Uninstall(right);
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    const Ipv4Address receiver = rightIfs.GetAddress(1);
    ApplicationContainer sinks;
    for (uint32_t i = 0; i < flows; ++i)
    {
        const uint16_t port = static_cast<uint16_t>(5001 + i);
        PacketSinkHelper sink("ns3::TcpSocketFactory",
                              InetSocketAddress(Ipv4Address::GetAny(), port));
        sinks.Add(sink.Install(nodes.Get(3)));
        BulkSendHelper source("ns3::TcpSocketFactory", InetSocketAddress(receiver, port));
        source.SetAttribute("MaxBytes", UintegerValue(0));
        ApplicationContainer app = source.Install(nodes.Get(0));
        app.Start(Seconds(gapMs * i / 1000.0));
    }
    sinks.Start(Seconds(0.0));

    Config::ConnectWithoutContext("/NodeList/*/DeviceList/*/$ns3::PointToPointNetDevice/PhyTxBegin",
                                  MakeCallback(&CountTransmission));

    Simulator::Stop(Seconds(seconds));
    const double runStart = ProcessCpuSeconds();
    Simulator::Run();
    const double cpuEnd = ProcessCpuSeconds();

    uint64_t bytes = 0;
    uint32_t progressed = 0;
    for (uint32_t i = 0; i < sinks.GetN(); ++i)
    {
        const uint64_t rx = DynamicCast<PacketSink>(sinks.Get(i))->GetTotalRx();
        bytes += rx;
        progressed += rx > 0 ? 1 : 0;
    }
    Simulator::Destroy();
    std::printf("purple-ns3 sim_s=%.6f cpu_s=%.6f run_cpu_s=%.6f packets=%llu goodput_bps=%.3f "
                "flows_with_progress=%u\n",
                seconds,
                cpuEnd - cpuStart,
                cpuEnd - runStart,
                static_cast<unsigned long long>(g_transmissions),
                static_cast<double>(bytes) / seconds,
                progressed);
    return 0;
}
