// What the psync daemons' mains (psync-coordinator, psync-agent) share: the bound port written to
// a file for scripts and tests, stopping on SIGINT / SIGTERM, and production mutex settings.
//
// Thread-safety: BlockStopSignals() must run in main before any thread starts (threads inherit
// the mask); WaitForStopSignal() from one thread.
#ifndef PSYNC_SERVE_DAEMON_H_
#define PSYNC_SERVE_DAEMON_H_

#include <csignal>
#include <string>

namespace psync::serve {

// Writes `port` to `path` atomically (rename), so a reader never sees a partial file. Nothing
// when `path` is empty.
void WritePortFile(const std::string& path, int port);

// Blocks SIGINT and SIGTERM in the calling thread and, through inheritance, in every thread it
// starts afterwards; returns the set for WaitForStopSignal().
sigset_t BlockStopSignals();

// Waits until one of `signals` arrives; returns its number.
int WaitForStopSignal(const sigset_t& signals);

// Turns off absl::Mutex's lock-order (deadlock) detection, which Debian's Abseil build keeps on:
// it costs a graph lookup on every lock (4 to 5% of the coordinator's cycles under load). Tests
// keep it on; the daemons and the benchmark call this first thing in main.
void UseReleaseMutexSettings();

}  // namespace psync::serve

#endif  // PSYNC_SERVE_DAEMON_H_
