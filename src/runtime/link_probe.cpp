#include "src/runtime/link_probe.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <vector>

#include "src/common/env.hpp"
#include "src/common/error_record.hpp"
#include "src/common/log.hpp"

namespace braid {

namespace {

// A tag no collective uses (theirs are (seq << 24) | slot, non-negative), on
// the world's collective context: the probe cannot meet a user's message.
constexpr std::int64_t kProbeTag = -0x6c696e6b;  // "link"
constexpr int kPings = 12;                        // round trips, after kWarm
constexpr int kWarm = 3;
constexpr int kBurst = 16;                        // small messages one way, then one answer
constexpr int kBursts = 5;
constexpr std::size_t kBulkBytes = 4u << 20;      // long enough to show the rate, short enough for init
constexpr int kBulks = 3;
constexpr const char* kKey = "link/probe";
const std::string kFailed = "failed ";  // then an error record: a prober gave up

using Clock = std::chrono::steady_clock;

// One blocking message with peer on the probe's envelope.
void exchange(Engine& e, const detail::GroupImpl& g, bool send, int peer, void* buf, std::size_t bytes,
              Millis timeout) {
  Request r;
  r.peer = peer;
  r.env = Envelope{coll_ctx(g), kProbeTag, wire_dtype(DType::UInt8)};
  r.buf = buf;
  r.bytes = bytes;
  r.timeout = timeout;
  const Deadline d = Deadline::after(timeout);
  r.deadline = d;
  if (send) e.post_send(r, d);
  else e.post_recv(r);
  e.wait(r, d);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A prober's failure, under the figures' key (first writer wins): the
// ranks that wait for the figures learn why there are none, and whom it
// names (the other prober: across a cut link the only rank this one can say
// anything of), instead of waiting out their timeout and naming the store's
// host, which is alive.
void record_failure(Context& c, const Error& x, int other) {
  if (x.code() != ErrorCode::Timeout && x.code() != ErrorCode::PeerFailure && x.code() != ErrorCode::Transport) return;
  try {
    store::CallCap cap(Deadline::after(Millis(500)));
    const int named = x.peer() >= 0 ? x.peer() : other;
    c.store->compare_set(kKey, {}, store::to_bytes(kFailed + error_record_text({x.code(), named, c.rank, x.what()})));
  } catch (const Error&) {  // the store is out of reach too: the waiters' timeout says so
  }
}

}  // namespace

LinkSettings probe_link(Context& c, const detail::GroupImpl& g) {
  const auto& host_of = g.host_of;
  const auto far = std::find_if(host_of.begin(), host_of.end(), [&](int h) { return h != host_of[0]; });
  if (far == host_of.end()) return {};
  if (env_integer("BRAID_LINK_PROBE", 0, 1, "0 (off) or 1").value_or(1) == 0) return {};
  const int a = g.ranks[0], b = g.ranks[static_cast<std::size_t>(far - host_of.begin())];
  Engine& e = *c.engine;
  if (c.rank == a || c.rank == b) {
    try {
      const bool first = c.rank == a;
      const int peer = first ? b : a;
      std::vector<char> buf(kBulkBytes);
      char word[8] = {};
      std::vector<double> rtts;
      for (int i = 0; i < kWarm + kPings; ++i) {
        const auto t0 = Clock::now();
        exchange(e, g, first, peer, word, sizeof word, c.timeout);
        exchange(e, g, !first, peer, word, sizeof word, c.timeout);
        if (i >= kWarm) rtts.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      }
      // The gap: kBurst small messages back to back one way, then one
      // answer. A burst takes a round trip and kBurst - 1 gaps, each the
      // longer of the sender's and the receiver's time per message. Between
      // namespaces of one machine the sender's CPU carries a message all the
      // way into the receiver's socket, and the gap is most of the one-way
      // latency; across a wire the wire's share is not the sender's.
      std::vector<double> bursts;
      for (int i = 0; i < kBursts; ++i) {
        const auto t0 = Clock::now();
        for (int k = 0; k < kBurst; ++k) exchange(e, g, first, peer, word, sizeof word, c.timeout);
        exchange(e, g, !first, peer, word, sizeof word, c.timeout);
        bursts.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      }
      // Rank a sends `bytes`, b answers with 8; transfer: the best of
      // kBulks tries.
      auto transfer_once = [&](std::size_t bytes) {
        const auto t0 = Clock::now();
        exchange(e, g, first, peer, buf.data(), bytes, c.timeout);
        exchange(e, g, !first, peer, word, sizeof word, c.timeout);
        return std::chrono::duration<double>(Clock::now() - t0).count();
      };
      auto transfer = [&](std::size_t bytes) {
        double best = 1e30;
        for (int i = 0; i < kBulks; ++i) best = std::min(best, transfer_once(bytes));
        return best;
      };
      // The rate is the slope between two sizes: what both pay alike (the
      // round trip) cancels out. A shaper's burst would not: its bucket is
      // full for the first small transfer only, whose best time then reads
      // the wire's speed, and the slope a rate a quarter too low (tbf at 4
      // Gbit/s, 1 MB burst: 3.1 Gbit/s, iperf3 3.8). So one transfer of the
      // large size first, untimed, empties any bucket; back to back, the
      // timed ones find it empty.
      (void)transfer_once(kBulkBytes);
      const double small = transfer(kBulkBytes / 4), large = transfer(kBulkBytes);
      if (first) {
        const double rtt = median(rtts);
        LinkSettings m;
        m.latency_s = rtt / 2;
        const double slope = (large - small) / static_cast<double>(kBulkBytes - kBulkBytes / 4);
        m.s_per_byte = slope > 0 ? slope : std::max(large - rtt, rtt / 2) / static_cast<double>(kBulkBytes);
        m.gap_s = std::max(0.0, (median(bursts) - rtt) / (kBurst - 1));
        c.store->set(kKey, store::to_bytes(fmt::format("{:.9e} {:.9e} {:.9e}", m.latency_s, m.s_per_byte, m.gap_s)));
      }
    } catch (const Error& x) {
      record_failure(c, x, c.rank == a ? b : a);
      throw;
    }
  }
  std::string figures;
  try {
    figures = store::to_string(c.store->get(kKey, c.timeout));
  } catch (const Error& x) {
    // No figures by the timeout: rank a hosts the store unless a braid-store
    // does; where the store still answers, a is not stopped, and the probe
    // waits on b.
    if (x.code() != ErrorCode::Timeout || c.rank == b) throw;
    bool store_answers = false;
    try {
      store::CallCap cap(Deadline::after(Millis(500)));
      (void)c.store->try_get(kKey);
      store_answers = true;
    } catch (const Error&) {
    }
    if (!store_answers) throw;
    fail_peer(ErrorCode::Timeout, b,
              "init's link probe between rank {} and rank {} (the first rank on another host) did not finish within "
              "{} ms; the store answers, so rank {} is the one that is stuck, stopped or cut off",
              a, b, c.timeout.count(), b);
  }
  if (figures.rfind(kFailed, 0) == 0) {
    const auto r = parse_error_record(std::string_view(figures).substr(kFailed.size()), c.world_size,
                                      {ErrorCode::Timeout, ErrorCode::PeerFailure, ErrorCode::Transport});
    if (!r) fail(ErrorCode::Store, "the link probe's record of its failure in the store ('{}') does not parse", kKey);
    fail_peer(r->code, r->named, "init's link probe between rank {} and rank {} failed on rank {}: {}", a, b, r->by,
              r->what);
  }
  std::istringstream in(figures);
  LinkSettings m;
  if (!(in >> m.latency_s >> m.s_per_byte >> m.gap_s) || !(m.latency_s > 0) || !(m.s_per_byte > 0) || m.gap_s < 0)
    fail(ErrorCode::Store,
         "the link probe's figures in the store ('{}') do not parse as a latency, an inverse rate and a gap "
         "(two positive numbers and one not negative)", kKey);
  BRAID_INFO("link between hosts (rank {} to rank {}): {:.1f} us one way, {:.2f} Gbit/s, a gap of {:.1f} us between "
             "small messages", a, b, m.latency_s * 1e6, 8e-9 / m.s_per_byte, m.gap_s * 1e6);
  return m;
}

}  // namespace braid
