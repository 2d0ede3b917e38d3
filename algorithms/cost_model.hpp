// The alpha-beta-gamma cost model: predicts how long a plan takes, and from
// that chooses an algorithm (braid-sim prints the same numbers).
//
// Simulation: every step starts when its deps have finished. Each rank has
// one send port and one receive port (full duplex); a message occupies the
// sender's send port and the receiver's receive port for alpha + beta*bytes
// (or the ends' own share of it, send_share, where the params give one),
// starting once both its Send and its Recv are ready (the verifier's
// rendezvous rule; a message of up to eager_bytes leaves once its Send is)
// and both ports are free, in order of readiness. The Send finishes when
// the message arrives (an eager one when its sender is through); a Recv
// then, or when it is ready if later, a RecvReduce gamma*bytes after. A
// message between hosts also holds, for beta*bytes, the sending host's
// link out and the receiving host's link in: the ranks of a host share its
// network link. A rank has a pair of ports for messages across hosts and
// another for messages within its host (two transports), so that it
// exchanges with host-mates while a message crosses. On several hosts each
// port and link keeps a calendar of what it carries, and a message takes
// the first time that all it needs are free for it (first fit), so that
// one waiting for a busy link does not hold the others idle until then;
// on one host a port is simply free from the end of its last message. Copy costs
// copy*bytes, a local Reduce gamma*bytes; in message plans local work is
// not serialised against other local work (kept so as not to move the
// message algorithms' choices).
//
// Hosts emulated on one machine (Topology::machine_cpus): the machine's
// CPUs are a shared resource. A message between two of its ranks takes a
// CPU on each end, and arrives no sooner than both are through: across
// hosts the sender's for a stream's time per byte (the kernel's work,
// Topology::machine_stream_s_per_byte or kMachineStreamSPerByte) and the
// receiver's for a copy; between host-mates a copy on each end;
// local work (Copy, Reduce, a RecvReduce's combining) takes a CPU for its
// time; each goes to the CPU that can finish it first, in the first gap
// long enough. With k ranks to a CPU every message costs k-1 turns of the
// others more (kSharedTcpTurn).
//
// Message plans that fit the fast boxes (plan.hpp) cost fastbox_alpha_s per
// message and fastbox_beta_s_per_byte instead of alpha_s and
// beta_s_per_byte, where the params offer fast boxes.
//
// One-sided plans: a Signal completes at once for its sender; the matching
// Wait completes signal_s after the Signal or when the Wait becomes ready,
// whichever is later. A Get costs copy*bytes, a GetReduce gamma*bytes (the
// memory is mapped: a read of a peer's is a local read), plus the peer
// access terms below; a Put costs what a Get of the same bytes does (a write
// into a peer's memory is the same copy the other way). Each rank has one
// CPU: its Copy, Reduce, Get, GetReduce and Put run one at a time, in order
// of readiness. The prediction is the time the last step of any rank
// finishes. A plan that does not read its Input itself (Plan::reads_input)
// first waits for the executor's copy of it into Output (copy*bytes: an
// all-reduce's or reduce's contribution, an all-gather's own block).
#pragma once

#include <map>
#include <string>

#include "algorithms/plan.hpp"
#include "algorithms/registry.hpp"

namespace braid::plan {

struct CostParams {
  double alpha_s = 10e-6;             // per-message latency
  double beta_s_per_byte = 0.4e-9;    // inverse link bandwidth
  double gamma_s_per_byte = 0.105e-9; // combining one byte into another
  double copy_s_per_byte = 0.091e-9;  // local memcpy, per byte copied
  double signal_s = 0.15e-6;          // one-sided notification: Signal to its Wait
  // A Get/GetReduce of a peer's Input or Output (a Put into its Output):
  // unless the caller's buffer came from braid::mem_alloc (which no rank can
  // know of the others) it is a process_vm_readv (writev): a system call,
  // plus pinning the peer's pages.
  double peer_read_s = 0.0;
  double peer_read_s_per_byte = 0.0;
  // A Get/GetReduce of a peer's Scratch reads what that peer has just
  // written: while all ranks' shares fit in cache (8 MiB in all) it costs a
  // fraction of a cold copy (fitted when oneshot beat every other plan up
  // to 4 MiB at 2 ranks, bench/RESULTS.md section 9; staged's chunks always
  // fit, and it measured faster still from 16 KiB). A Put into a peer's
  // Scratch is priced by the same rule.
  double hot_read_factor = 1.0;
  // Per-message latency of a message plan that fits the fast boxes
  // (plan.hpp, fits_fastbox): a flag-stamped cache line written into the
  // receiver's block and polled there. 0: no fast boxes (not one host).
  double fastbox_alpha_s = 0.0;
  double fastbox_beta_s_per_byte = 0.0;  // and per byte
  // A peer's Scratch is across a link too (RDMA): a Get or Put of it costs
  // what one of its Input or Output does, not a fraction of a local copy.
  bool remote_scratch = false;
  // The share of alpha_s that the two ends spend on a message themselves
  // (LogP: one-way latency = o + L + o): a message holds the sender's send
  // port and the receiver's receive port for send_share * alpha_s +
  // beta*bytes, while it arrives alpha_s + beta*bytes after it starts; in
  // the rest of alpha_s, the wire's, both may start the next. 0: all of
  // alpha_s (a port is held until the message arrives). Above 1 where a
  // sender's gap between messages is longer than the one-way latency (the
  // init probe's gap between namespaces of one machine: 6.7 us against 5.8
  // one way), and it is through only after the message has arrived.
  double send_share = 0.0;
  // Messages of up to this many bytes leave when their Send is ready,
  // without waiting for the Recv (eager: the receiver holds them until its
  // Recv is posted), and the Send completes when the sender is through
  // with it. 0: every message waits for both ends (rendezvous).
  double eager_bytes = 0.0;
  // A call's own cost on each rank, whatever its plan: checking the
  // arguments, finding the plan, starting it and returning. A rank's calls
  // run one after another, so it lies on every rank's path once per call:
  // added to the time per call (a constant, it moves no choice).
  double call_s = 0.0;
  // Where the bytes are (0: not modelled; with_caches below sets it: the
  // runtime for ranks of one host on shared memory with CPUs of their own,
  // braid-sim for those and wherever --cache-mib asks). A plan
  // whose buffers, all ranks of a host together, fit in half of
  // cache_bytes (the host's last-level cache) does its local work (copies, reductions) at
  // cache_factor of the rates above, which are memory's; and a Get or Put
  // of a peer's freshly written Scratch moves lines between two CPUs'
  // caches, in place of hot_read_factor: cross_s to start (a round trip
  // of a line before they stream) and cross_s_per_byte. Beyond, a local
  // step is priced by where each of its operands is (Input and Output in
  // memory, a pipeline's Scratch in cache and across CPUs), the longer of
  // memory's part and the rest.
  double cache_bytes = 0.0;
  double cache_factor = 1.0;
  double cross_s = 0.0;
  double cross_s_per_byte = 0.0;
  // Copies a message's bytes take inside the transport (TCP: into the
  // kernel and out): beta holds while they are in cache, and where the
  // cache is modelled a plan whose buffers do not fit pays memory's rate
  // for them too (copy_s_per_byte x (1 - cache_factor) more each).
  double transport_copies = 0.0;
  // The transport's own protocol (0: none; TCP's in kTcpLoopback below): a
  // message of more than rendezvous_bytes first sends its RTS and waits for
  // the CTS, two one-way latencies (alpha_s) before its data moves; and
  // each segment_bytes of a message beyond its first costs segment_s more
  // (over loopback, where a segment is its 64 KiB MTU: a wake-up of the
  // receiver per segment).
  double rendezvous_bytes = 0.0;
  double segment_bytes = 0.0;
  double segment_s = 0.0;
};

// What a message of `bytes` costs beyond alpha_s + beta_s_per_byte x bytes
// in its transport's protocol (CostParams::rendezvous_bytes, segment_s):
// the simulator and the closed formulas (estimate.hpp) both add it.
double protocol_s(const CostParams& c, double bytes);

// A call in a world of one, which runs no plan: braid-bench allreduce at 1
// rank, 8 B to 512 B, 0.06-0.07 us a call on this machine kind (session
// 34, bench/RESULTS.md section 49). Beside the fast boxes' 0.1 us it is
// most of the difference between a 2-rank all_reduce of 8 bytes priced
// without it (0.10 us) and measured (0.14-0.18 in the host's usual phase).
inline constexpr double kCallS = 0.06e-6;

// The fast boxes' costs follow one figure, the round trip of a cache line
// between two CPUs (bench/probes' line-exchange), which this machine kind's
// host sets by where it places the two vCPUs: 0.04-0.07 us in its usual
// phase, 0.20-0.26 in its slow one (bench/RESULTS.md section 33). A message
// costs a round trip plus the loop's own 0.05 us: the sender takes the
// line back from the receiver that last polled it, and the receiver's poll
// pulls it over. Per byte, lines stream, overlapped: each costs 6.4% of a
// round trip (0.05 ns a byte at 0.05 us). Fitted on 2-rank all_reduce in
// both phases (8 B: 0.14-0.18 and 0.33-0.38 us; 4 KiB 0.51 and 1.83-1.93;
// section 49).
inline constexpr double kLineExchangeS = 0.05e-6;
constexpr double fastbox_message_s(double line_exchange_s) { return line_exchange_s + 0.05e-6; }
constexpr double fastbox_byte_s(double line_exchange_s) { return line_exchange_s * 1e-3; }

// Local work on bytes in cache, as a share of its price from memory
// (CostParams::cache_factor), and a byte read out of another CPU's cache,
// per second of the line exchange (CostParams::cross_s_per_byte). Fitted
// on `staged` all_reduce at 2 ranks, 32 KiB to 2 MiB, in both of the
// host's phases (usual: 0.039-0.047 ns a byte of the vector; slow:
// 0.10-0.14), where a rank copies half the vector into its scratch, reduces
// the peer's half into it and copies out both halves: 0.17 of memory's
// rates (an in-cache memcpy, 0.009-0.02 ns a byte here, against 0.053-0.091
// from memory) and 0.35 ns a byte per microsecond of round trip (0.017 ns
// in the usual phase, a third of the fast boxes' per-byte cost, which
// polls each line), after a round trip to start each read (oneshot's one
// read of 4 KiB: 0.54-0.56 us a call, where recursive_doubling's exchange
// through the fast boxes takes 0.42-0.43). bench/RESULTS.md section 49.
inline constexpr double kCacheFactor = 0.17;
inline constexpr double kCrossPerLineExchange = 0.35e-3;

// TCP between processes of one host (loopback) follows the line exchange
// too: each message wakes its receiver on the other CPU, and each byte is
// copied into the kernel and out by CPUs whose caches trade lines. Fitted
// on 2-rank all_reduce over TCP in both of the host's phases (session 35,
// bench/RESULTS.md section 50): an exchange of 8 bytes 5.8-6.3 us in the
// usual phase, 8.1-8.7 in the slow one (0.25 us); of 32 KiB 8.8-9.7 and
// 12.7-13.0, a reduction in cache (0.6 us) included. Until session 35 one
// figure for both phases (7 us, 0.24 ns a byte, fitted at 2 MiB in a slow
// phase) priced 2 MiB and 32 KiB 1.3-1.7x their time in the usual phase.
constexpr double tcp_message_s(double line_exchange_s) { return 5.35e-6 + 12 * line_exchange_s; }
constexpr double tcp_byte_s(double line_exchange_s) { return 0.067e-9 + 0.205e-3 * line_exchange_s; }
// TCP's protocol (CostParams::rendezvous_bytes, segment_bytes, segment_s):
// messages above the eager limit (64 KiB, BRAID_TCP_EAGER_LIMIT) go by RTS,
// CTS and DATA; a loopback segment carries 65,432 bytes of a message (the
// 64 KiB MTU less IP and TCP headers, 52 bytes with timestamps, and
// Braid's frame header, 48), and each one beyond the first costs 5.2 us
// in either phase: an exchange of 65,428 bytes took 11.2-13.1 us, of
// 65,436 bytes 14.8-18.8; all_reduce of 2 MiB by ring (two exchanges of 1
// MiB, 16 segments each) 341-385 us in the usual phase and 469 in the slow
// one, where the per-byte rate alone accounts for 162 and 248.
inline constexpr double kTcpEagerBytes = 64.0 * 1024;
inline constexpr double kLoopbackSegmentBytes = 65432;
inline constexpr double kLoopbackSegmentS = 5.2e-6;
// Measured on this machine kind beside that: gamma: `c = a + b` moves 3
// bytes per result byte at ~28.5 GB/s -> 0.105 ns/byte. copy: memcpy ~22
// GB/s counting read + write -> 0.091 ns/byte (/work/shared/notes/
// baselines.md). Out of the caches, TCP's two copies, into the kernel and
// out, pay memory's rate (transport_copies): 16 MiB by ring, 6.4-7.3 ms.
// (signal_s: no one-sided plans run over TCP; set to alpha for completeness.)
// The runtime, which does not read the host's phase, prices the usual one.
inline constexpr CostParams kTcpLoopback{.alpha_s = tcp_message_s(kLineExchangeS),
                                         .beta_s_per_byte = tcp_byte_s(kLineExchangeS),
                                         .gamma_s_per_byte = 0.105e-9, .copy_s_per_byte = 0.091e-9,
                                         .signal_s = tcp_message_s(kLineExchangeS), .call_s = kCallS,
                                         .transport_copies = 2, .rendezvous_bytes = kTcpEagerBytes,
                                         .segment_bytes = kLoopbackSegmentBytes, .segment_s = kLoopbackSegmentS};
// What TCP between processes of one machine adds in LogP's terms, for
// braid-sim --logp (not the runtime's choice: the closed formulas of
// estimate.hpp, and the choices they and the simulator make, are fitted
// without it). On loopback and between network namespaces of one machine
// there is no wire, so the one-way o + L + o is about two o's: each end is
// through with a message after about half of alpha; fitted, 0.6. Measured
// as the time per call of a loop of 8-byte broadcasts, where the root only
// sends: 5.1 us at 2 ranks on one host (`braid-bench broadcast --backend
// tcp`; alpha 7 us: priced 4.2; at session 35's 5.95, 3.6 against 4.8
// measured in the host's usual phase: one host's loop is not what the
// share was fitted for), 7.3-7.6 us between 2 emulated hosts whose
// probe read 11.3-13.6 us one way (priced 6.8-8.2); 0.5 and 0.7 priced the
// grid's rows a little worse (bench/RESULTS.md section 35).
inline constexpr double kTcpSendShare = 0.6;
// The shared-memory transport's eager limit (BRAID_SHM_EAGER_LIMIT), for
// the same pricing of messages between host-mates across hosts.
inline constexpr double kShmEagerBytes = 16.0 * 1024;
// One TCP stream between network namespaces of one machine, as its CPUs
// carry it (Topology::machine_cpus), where braid-sim is not given the rate
// measured (--machine-stream-mbps, which bench/compare_hosts.sh measures
// with iperf3): ~32 Gbit/s, as this machine kind read under cubic in
// session 31 (43-49 in session 33's). The sender's CPU carries a message
// through the whole stack into the receiver's socket (the veth hands it
// over in the sender's softirq), which is what bounds one stream, so the
// sender takes the stream's time per byte; the receiver only copies the
// bytes out (copy_s_per_byte). Messages between host-mates take a copy on
// each end (into the shared ring, out of it). Until session 33 both ends
// of a stream took the stream's time and host-mates' messages took no CPU:
// on every grid log of sessions 31-33 the split prices 15-28 more of the
// 244 rows within 25% (bench/RESULTS.md section 48); 2 x 1 unshaped at 2
// MiB had been priced 2.5x its time (section 44: 0.25 ns on both ends
// fitted 64 MiB all_gather at 2 x 1, 16.8 ms against 16.1).
inline constexpr double kMachineStreamSPerByte = 0.25e-9;
// RDMA (backend 'verbs', Topology::rdma): a message ~2 us, 0.1 ns/byte (a
// 100 Gbit/s class link); a Signal is one small WRITE, ~1.5 us to the
// waiter's poll; a Get is a READ round trip, ~3 us plus the bytes. These are
// datasheet-class figures for InfiniBand or RoCE, not measured here: the
// only RDMA on this machine kind is Soft-RoCE under emulation, three orders
// slower and no guide. The link probe of issue 17 is to replace them.
inline constexpr CostParams kRdma{.alpha_s = 2e-6, .beta_s_per_byte = 0.1e-9, .gamma_s_per_byte = 0.105e-9,
                                  .copy_s_per_byte = 0.091e-9, .signal_s = 1.5e-6, .peer_read_s = 3e-6,
                                  .peer_read_s_per_byte = 0.1e-9, .remote_scratch = true, .call_s = kCallS};
// Shared memory: ~0.5 us per message (Open MPI shm: 0.26 us for a whole 8-byte
// allreduce; we wake peers through futexes, so budget more), and a message is
// two copies through a shared bounce buffer -> 2 * 0.091 ns/byte. A one-sided
// signal is one cache line written by the sender and polled by the waiter:
// ~0.15 us across cores.
// process_vm_readv on this machine kind: a few us per call, and the page
// pinning on top of the copy costs about what the copy does (a 32 MiB
// peer_read broadcast at 2 ranks: 0.2 ns/byte in all). Refitted once the
// step schedule stopped serialising twoshot's halves: twoshot all_reduce at
// 2 ranks now beats oneshot from 8 MiB (16 MiB: 2.8 vs 4.4 ms; 8 ranks at
// 8 MiB: 9.7 ms vs ring's 17.6), which 0.15 ns/byte reproduces; at 0.5-4 MiB
// the two measured within their noise (bench/RESULTS.md section 9).
// Fast boxes: priced from the round trip of a cache line (kLineExchangeS,
// above): 0.1 us a message and 0.05 ns a byte in the host's usual phase (a
// bare two-process exchange of 8 bytes through one line each way: 0.07-0.10
// us; recursive_doubling all_reduce at 2 ranks took 0.22 us at 8 bytes and
// 0.50 at 4 KiB, oneshot 0.62; ring broadcast of 1 KiB 0.13-0.17 us, oneshot
// 0.22-0.24).
inline constexpr CostParams kSharedMemory{.alpha_s = 0.5e-6, .beta_s_per_byte = 0.3e-9, .gamma_s_per_byte = 0.105e-9,
                                          .copy_s_per_byte = 0.091e-9, .signal_s = 0.15e-6, .peer_read_s = 5e-6,
                                          .peer_read_s_per_byte = 0.15e-9, .hot_read_factor = 0.25,
                                          .fastbox_alpha_s = fastbox_message_s(kLineExchangeS),
                                          .fastbox_beta_s_per_byte = fastbox_byte_s(kLineExchangeS),
                                          .call_s = kCallS};
// `p` with its one-host costs priced from a measured round trip of a cache
// line (seconds; braid-sim --line-exchange-ns): its fast boxes, where it
// has them, and TCP's messages over loopback (tcp_message_s, tcp_byte_s),
// where it is that (its loopback segments say so).
CostParams with_line_exchange(const CostParams& p, double line_exchange_s);
// `p` priced by where the bytes are (CostParams::cache_bytes): a host's
// last-level cache of `cache_bytes`, and a cache line's round trip of
// `line_exchange_s` (0: kLineExchangeS) for reads across CPUs.
CostParams with_caches(const CostParams& p, double cache_bytes, double line_exchange_s);
// Whether the runtime's choice prices a group by where the bytes are:
// ranks of one host that map each other's memory (shared memory), each with
// CPUs of its own, on host buffers they do not map into each other. Its
// choices measured as fast or faster at 2 ranks (reduce_scatter of 256 KiB:
// oneshot 6.9 us where peer_read took 12.8); where ranks share CPUs, and
// with shareable buffers (reduce_scatter of 4 KiB: halving_doubling 1.0 us
// where peer_read took 0.85), it chose slower ones (bench/RESULTS.md
// section 49), and there the plain figures stand. braid-sim's '*' asks the
// same.
bool prices_caches(const PlanArgs& args);

// The same on one host whose ranks share CPUs (Topology::shared_cpus): a
// signal or a message is seen once its waiter runs again, a few
// microseconds (5 us a round: signal_s, alpha_s and fastbox_alpha_s). Fitted at 4 and 8 ranks on 2 CPUs (bench/RESULTS.md section
// 9): all_reduce oneshot (one signal round) beat staged (three per chunk)
// at 4 and 16 KiB, staged won from 64 KiB.
CostParams sharing_cpus(const CostParams& p);

// Latest finish time of any step, in seconds; +infinity if the plan
// deadlocks (verify() says why). On one host, Topology::shared_cpus prices
// with sharing_cpus(params), and Topology::mapped_buffers prices a peer's
// Input or Output as a local read (no peer_read_s terms).
double predict_seconds(const Plan& plan, const CostParams& params);

// Costs per link: `local` between ranks of one host and for every local
// step, `remote` between ranks on different hosts (Topology::host_of says
// which). Messages, signals and reads of a peer are priced by the link they
// cross. With every rank on one host (or host_of empty) `local` prices all.
struct LinkCosts {
  CostParams local;
  CostParams remote;
};
double predict_seconds(const Plan& plan, const LinkCosts& links);
// `calls` calls of `plan` issued back to back by every rank, as a
// benchmark's timed loop issues them (back_to_back.cpp): the predicted time
// per call, the latest finish over `calls`. calls = 1: predict_seconds.
double predict_seconds_per_call(const Plan& plan, const LinkCosts& links, int calls);
// The plan behind it: `calls` copies of `plan`, each later one starting on a
// rank when its previous one has finished there, with a Copy of
// `begin_copy` elements from Input to Output (the executor's copy into
// Output at the start of each call; 0: none); messages and signals matched
// within their copy. For pricing only: the copies share buffers.
Plan back_to_back(const Plan& plan, int calls, std::int64_t begin_copy);

// The link costs of a group laid out as `host_of`: `local` and `remote` as
// given, but with the ranks on several hosts no fast boxes (a one-host
// window's).
LinkCosts link_costs(const CostParams& local, const CostParams& remote, const std::vector<int>& host_of);
// A link's costs with a measured or configured latency (one way, seconds)
// and inverse bandwidth (seconds per byte) in place of `base`'s; 0 keeps
// base's. A read of a peer (RDMA READ) is a round trip.
CostParams with_link(const CostParams& base, double latency_s, double s_per_byte);

// The algorithm for `coll` with the least predicted time for `args` (ties:
// the first registered). With `forced_name` non-empty, that algorithm:
// throws braid::Error(InvalidArgument) listing the valid names if it does
// not exist for `coll` or does not support `args`. Throws
// braid::Error(NotSupported) if no registered algorithm supports `args`.
const Algorithm* choose(Collective coll, const PlanArgs& args, const CostParams& params,
                        const std::string& forced_name = {});
const Algorithm* choose(Collective coll, const PlanArgs& args, const LinkCosts& links,
                        const std::string& forced_name = {});

// Parses BRAID_ALGO, NCCL_ALGO's grammar: "allreduce:ring;broadcast:tree",
// or a bare name ("ring") for every collective that has an algorithm of that
// name. Collective names as parse_collective() accepts them; names are
// case-insensitive; spaces around items are ignored. Unknown collective or
// algorithm -> braid::Error(InvalidArgument) listing the valid names.
std::map<Collective, std::string> parse_algo_env(const std::string& text);

}  // namespace braid::plan
