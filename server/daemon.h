// What the psync daemons' mains (psync-coordinator, psync-agent) share: the bound port written to
// a file for scripts and tests, and stopping on SIGINT / SIGTERM.
//
// Thread-safety: BlockStopSignals() must run in main before any thread starts (threads inherit
// the mask); WaitForStopSignal() from one thread.
#ifndef PSYNC_SERVER_DAEMON_H_
#define PSYNC_SERVER_DAEMON_H_

#include <csignal>
#include <string>

namespace psync::server {

// Writes `port` to `path` atomically (rename), so a reader never sees a partial file. Nothing
// when `path` is empty.
void WritePortFile(const std::string& path, int port);

// Blocks SIGINT and SIGTERM in the calling thread and, through inheritance, in every thread it
// starts afterwards; returns the set for WaitForStopSignal().
sigset_t BlockStopSignals();

// Waits until one of `signals` arrives; returns its number.
int WaitForStopSignal(const sigset_t& signals);

}  // namespace psync::server

#endif  // PSYNC_SERVER_DAEMON_H_
