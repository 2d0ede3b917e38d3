#include "transports/one_sided.hpp"

namespace braid::onesided {

Window::Window(std::vector<int> world, int me)
    : world_(std::move(world)), me_(me), ledger_(static_cast<int>(world_.size()), me) {}

}  // namespace braid::onesided
