// barrier: dissemination over the group's collective context.
// (Replaced by the plan executor once collectives run through plans.)
#include "braid/ops.hpp"
#include "core/context.hpp"

namespace braid {

Work barrier(const OpOptions& o) {
  const auto& g = op_group(o, "barrier");
  Engine& e = *context().engine;
  const int n = static_cast<int>(g.ranks.size()), me = g.my_rank;
  const auto seq = const_cast<detail::GroupImpl&>(g).collective_seq.fetch_add(1);
  const Millis to = op_timeout(o);
  const Deadline d = Deadline::after(to);
  // Round k: tell rank me+2^k, hear from me-2^k. After ceil(log2 n) rounds
  // everyone has transitively heard from everyone.
  int round = 0;
  for (int dist = 1; dist < n; dist *= 2, ++round) {
    Request s, r;
    s.peer = g.ranks[static_cast<std::size_t>((me + dist) % n)];
    r.peer = g.ranks[static_cast<std::size_t>((me - dist + n) % n)];
    s.env = r.env = Envelope{coll_ctx(g), static_cast<std::int64_t>(seq << 6 | static_cast<unsigned>(round))};
    s.timeout = r.timeout = to;
    e.post_recv(r);
    e.post_send(s, d);
    e.wait(s, d);
    e.wait(r, d);
  }
  return Work();
}

}  // namespace braid
