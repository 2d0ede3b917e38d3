// Promises the README makes that no other test held Braid to: the list form
// of all_to_all, a bounded wait and exception() on a failed async op,
// collective timeouts, a barrier that holds ranks back, calls from several
// threads at once, and float16/bfloat16 sums of inexact values.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "src/runtime/context.hpp"
#include "tests/collectives/reference.hpp"
#include "tests/mp/harness.hpp"

using namespace braid_test;
using braid::DType;
using braid::ErrorCode;
using braid::ReduceOp;
using Clock = std::chrono::steady_clock;

TEST_CASE("all_to_all's list form: every pair its own size", "[promises]") {
  for (int n : {2, 3}) {
    auto res = run_ranks(n, [](int rank, int world) {
      init_env();
      // Rank r sends (r + 1) * (j + 1) elements to rank j, valued 1000 r + j.
      std::vector<std::vector<std::int64_t>> in(static_cast<std::size_t>(world)), out(in.size());
      std::vector<braid::Tensor> ins, outs;
      for (int j = 0; j < world; ++j) {
        in[static_cast<std::size_t>(j)].assign(static_cast<std::size_t>((rank + 1) * (j + 1)), 1000 * rank + j);
        out[static_cast<std::size_t>(j)].assign(static_cast<std::size_t>((j + 1) * (rank + 1)), -1);
        ins.push_back(braid::tensor(in[static_cast<std::size_t>(j)]));
        outs.push_back(braid::tensor(out[static_cast<std::size_t>(j)]));
      }
      braid::all_to_all(outs, ins);
      for (int j = 0; j < world; ++j)
        for (auto v : out[static_cast<std::size_t>(j)])
          RANK_CHECK_MSG(v == 1000 * j + rank, "from rank " << j << ": " << v);
    });
    INFO(n << " ranks: " << describe(res));
    REQUIRE(all_ok(res));
  }
}

// (One job per form: on one host, a collective that timed out leaves its
// group's one-sided window out of step, so nothing more runs on the group.)
TEST_CASE("a collective times out naming the rank that never came; its Work says so", "[promises]") {
  for (bool async : {false, true}) {
    auto res = run_ranks(2, [async](int rank, int) {
      init_env();
      auto& st = *braid::context().store;
      if (rank == 1) {  // never calls the all_reduce: waits until rank 0 is done with it
        st.wait({"test/done"}, std::chrono::seconds(60));
        return;
      }
      std::vector<float> v(1000, 1.0f);
      auto names_rank_1 = [](const braid::Error& e) {
        const std::string w = e.what();
        RANK_CHECK_MSG(e.peer() == 1 && (w.find("rank(s) 1") != std::string::npos || w.find("rank 1 ") != std::string::npos), w);
      };
      const auto t0 = Clock::now();
      if (!async) {
        names_rank_1(expect_error([&] { braid::all_reduce(braid::tensor(v), ReduceOp::Sum, {.timeout = std::chrono::milliseconds(300)}); },
                                  ErrorCode::Timeout, ""));
      } else {
        // A bounded wait returns false while it runs; once it is over,
        // is_success() is false, exception() holds the Timeout and wait()
        // throws it.
        auto w = braid::all_reduce(braid::tensor(v), ReduceOp::Sum,
                                   {.async_op = true, .timeout = std::chrono::milliseconds(300)});
        RANK_CHECK(!w.wait_for(std::chrono::milliseconds(10)));
        while (!w.is_completed()) {
          RANK_CHECK(Clock::now() - t0 < std::chrono::seconds(10));
          std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling is_completed(), not a sync
        }
        RANK_CHECK(!w.is_success());
        const std::exception_ptr e = w.exception();
        RANK_CHECK(e != nullptr);
        try {
          std::rethrow_exception(e);
        } catch (const braid::Error& x) {
          RANK_CHECK_MSG(x.code() == ErrorCode::Timeout, x.what());
          names_rank_1(x);
        }
        names_rank_1(expect_error([&] { w.wait(); }, ErrorCode::Timeout, ""));
      }
      RANK_CHECK(Clock::now() - t0 < std::chrono::seconds(5));
      st.set("test/done", braid::store::to_bytes(std::string("1")));
    });
    INFO((async ? "async: " : "blocking: ") << describe(res));
    REQUIRE(all_ok(res));
  }
}

// On one host the first one-sided call of a group gathers its members'
// records through the group's first rank: one that is not first must still
// name the member that never came, not the first rank it heard from.
TEST_CASE("every rank that came times out naming the one that never did", "[promises]") {
  auto res = run_ranks(3, [](int rank, int) {
    init_env();
    auto& st = *braid::context().store;
    if (rank == 2) {  // never calls the all_reduce: waits until the others are done with it
      st.wait({"test/done/0", "test/done/1"}, std::chrono::seconds(60));
      st.set("test/done/2", braid::store::to_bytes(std::string("1")));
      return;
    }
    std::vector<float> v(1000, 1.0f);
    const braid::Error e = expect_error(
        [&] { braid::all_reduce(braid::tensor(v), ReduceOp::Sum, {.timeout = std::chrono::milliseconds(500)}); },
        ErrorCode::Timeout, "");
    RANK_CHECK_MSG(e.peer() == 2, e.what());
    st.set("test/done/" + std::to_string(rank), braid::store::to_bytes(std::string("1")));
    if (rank == 0) st.wait({"test/done/1", "test/done/2"}, std::chrono::seconds(60));  // it hosts the store
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("a barrier holds every rank until the last one arrives", "[promises]") {
  auto res = run_ranks(3, [](int rank, int) {
    init_env();
    auto& st = *braid::context().store;
    braid::barrier();
    if (rank == 2) {
      // Late on purpose: a barrier that let the others through early would
      // let them read the key before it is written.
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      st.set("test/late", braid::store::to_bytes(std::string("1")));
    }
    braid::barrier();
    RANK_CHECK(st.try_get("test/late").has_value());
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("calls from several threads at once, each on its own group", "[promises][threads]") {
  auto res = run_ranks(3, [](int rank, int world) {
    init_env();
    constexpr int kThreads = 4;
    std::vector<braid::Group> groups;
    for (int t = 0; t < kThreads; ++t) groups.push_back(braid::new_group({0, 1, 2}));
    std::vector<std::thread> threads;
    std::vector<std::string> errors(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        try {
          const braid::Group& g = groups[static_cast<std::size_t>(t)];
          for (int i = 0; i < 30; ++i) {
            std::vector<std::int32_t> v(static_cast<std::size_t>(1 + 97 * i), rank + t + i);
            braid::all_reduce(braid::tensor(v), ReduceOp::Sum, {.group = &g});
            const std::int32_t want = (0 + 1 + 2) + world * (t + i);
            if (v.front() != want || v.back() != want) throw std::runtime_error("all_reduce: " + std::to_string(v.front()));
            // Point to point on the world, a tag per thread: a ring shift.
            std::int32_t mine = 100 * rank + t, got = -1;
            braid::sendrecv(braid::tensor(&mine, 1), (rank + 1) % world, braid::tensor(&got, 1),
                            (rank + world - 1) % world, {.tag = t});
            if (got != 100 * ((rank + world - 1) % world) + t) throw std::runtime_error("sendrecv: " + std::to_string(got));
          }
        } catch (const std::exception& e) {
          errors[static_cast<std::size_t>(t)] = e.what();
        }
      });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) RANK_CHECK_MSG(errors[static_cast<std::size_t>(t)].empty(), "thread " << t << ": " << errors[static_cast<std::size_t>(t)]);
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

// float16 and bfloat16 are reduced by widening to float32 for each step and
// rounding back (README). With inexact inputs the sum depends on the order
// of steps, so: at 2 ranks it is exactly round(a + b); at 4, within the
// rounding of 3 steps of the exact sum, and the same bits on every rank.
TEST_CASE("float16 and bfloat16 sums of inexact values round after every step", "[promises]") {
  for (int n : {2, 4}) {
    auto res = run_ranks(n, [](int rank, int world) {
      init_env();
      for (DType dt : {DType::Float16, DType::BFloat16}) {
        // Unit roundoff of each format (half an ulp, relative).
        const double u = dt == DType::Float16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
        for (std::int64_t count : {7, 4099, 1 << 18}) {
          auto value = [](int r, std::int64_t i) { return std::sin(0.37 * r + 0.0131 * static_cast<double>(i)) * 3.3; };
          std::vector<std::uint16_t> buf(static_cast<std::size_t>(count));
          for (std::int64_t i = 0; i < count; ++i) put(dt, buf.data(), i, value(rank, i));
          braid::all_reduce(braid::tensor(buf.data(), count, dt), ReduceOp::Sum);
          for (std::int64_t i = 0; i < count; ++i) {
            double exact = 0, magnitude = 0;
            std::vector<double> xs;
            for (int r = 0; r < world; ++r) {
              std::uint16_t h;
              put(dt, &h, 0, value(r, i));  // the input as the dtype holds it
              xs.push_back(get(dt, &h, 0));
              exact += xs.back();
              magnitude += std::fabs(xs.back());
            }
            const double got = get(dt, buf.data(), i);
            if (world == 2) {
              std::uint16_t want;
              put(dt, &want, 0, static_cast<double>(static_cast<float>(xs[0]) + static_cast<float>(xs[1])));
              RANK_CHECK_MSG(get(dt, &want, 0) == got, braid::dtype_name(dt) << "[" << i << "] = " << got << ", expected "
                                                                             << get(dt, &want, 0));
            } else {
              RANK_CHECK_MSG(std::fabs(got - exact) <= (world - 1) * u * magnitude + 1e-6,
                             braid::dtype_name(dt) << "[" << i << "] = " << got << ", exact " << exact);
            }
          }
          // Every rank holds the same bits (the buffer as bytes).
          std::vector<std::uint8_t> all(buf.size() * 2 * static_cast<std::size_t>(world));
          braid::all_gather_into_tensor(braid::tensor(all.data(), static_cast<std::int64_t>(all.size()), DType::UInt8),
                                        braid::tensor(reinterpret_cast<std::uint8_t*>(buf.data()), count * 2, DType::UInt8));
          for (int r = 0; r < world; ++r)
            RANK_CHECK_MSG(std::memcmp(all.data() + static_cast<std::size_t>(r) * buf.size() * 2, buf.data(), buf.size() * 2) == 0,
                           braid::dtype_name(dt) << " count " << count << ": rank " << r << " holds other bits");
        }
      }
    });
    INFO(n << " ranks: " << describe(res));
    REQUIRE(all_ok(res));
  }
}
