// The one include a user of Braid needs.
#pragma once

#include "braid/bucketer.hpp"
#include "braid/communicator.hpp"
#include "braid/error.hpp"
#include "braid/group.hpp"
#include "braid/memory.hpp"
#include "braid/ops.hpp"
#include "braid/options.hpp"
#include "braid/process_group.hpp"
#include "braid/recovery.hpp"
#include "braid/sampler.hpp"
#include "braid/store.hpp"
#include "braid/tensor.hpp"
#include "braid/version.hpp"
#include "braid/work.hpp"
