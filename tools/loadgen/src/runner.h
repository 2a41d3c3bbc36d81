// The load-generating engine: connects, runs the epoll loops, prints the report.
#ifndef TS_LOADGEN_RUNNER_H
#define TS_LOADGEN_RUNNER_H

#include "config.h"

namespace loadgen {

// Runs the benchmark described by cfg (already validated) and prints the report on stdout.
// Returns the process exit code: 0 clean, 1 errors or mismatches were seen, 2 could not run.
int run(const Config &cfg);

}  // namespace loadgen
#endif
