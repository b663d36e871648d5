// ThreadSanitizer annotations for what Debian's uninstrumented Abseil and gRPC synchronize.
//
// Debian builds Abseil and gRPC without -fsanitize=thread, so absl::Mutex (a futex-based lock,
// not a pthread one) carries none of its ABSL_TSAN_MUTEX_* annotations: TSan sees no
// happens-before edge through it and reports every access guarded by an absl::Mutex as a race.
// This library, linked into every executable by --config=tsan (--custom_malloc), defines the
// public entry points of absl::Mutex, absl::CondVar and absl::Notification itself: each tells
// TSan what the call does (__tsan_mutex_pre_lock/post_lock, pre_unlock/post_unlock, or a
// release/acquire pair) and calls the real function (dlsym RTLD_NEXT). An executable's
// definitions come first in the symbol search order, so they also take the calls made from
// shared libraries: psync's own, gRPC's mutexes, and Abseil's Notification, BlockingCounter and
// Barrier (which call Mutex::Lock and friends through the PLT).
//
// Waits (Await*, CondVar::Wait*) are an unlock followed by a lock that lasts until they return:
// the Conditions Abseil evaluates meanwhile read state guarded by the mutex. Whether the caller
// holds a reader or a writer lock is read from the Mutex's state word (kMuWriter).
//
// The same way, a few hand-offs that gRPC and Abseil make through atomics and lock-free queues
// in their uninstrumented code are declared: a heap absl::Status's last reference; a gRPC batch
// started with a tag before the callback that completes it; a server call's last callback before
// its OnDone and teardown. Each was seen reported as a race without its annotation, in every test
// that runs a gRPC server. Accesses inside those libraries are not checked (see
// __tsan_default_suppressions at the end).
//
// Checked on a small program: an absl::Mutex-guarded counter and an absl::Notification hand-off
// between two threads are not reported; an unguarded write is.
//
// --config=tsan defines PSYNC_TSAN for this file (it undefines __SANITIZE_THREAD__, see
// .bazelrc); other configs build an empty library.
#ifdef PSYNC_TSAN

#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace {

#define PSYNC_STRINGIFY_INNER(x) #x
#define PSYNC_STRINGIFY(x) PSYNC_STRINGIFY_INNER(x)

// The real function in the next object after this one: `rest` is the mangled name after
// "_ZN4absl" and the inline namespace (absl::debian3 on Debian 12); const members pass `konst`.
template <typename F>
F Real(const char* rest, bool konst = false) {
  const std::string ns = PSYNC_STRINGIFY(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name =
      std::string(konst ? "_ZNK4absl" : "_ZN4absl") + std::to_string(ns.size()) + ns + rest;
  void* f = dlsym(RTLD_NEXT, name.c_str());
  if (f == nullptr) {
    std::fprintf(stderr, "tsan annotations: %s not found: %s\n", name.c_str(), dlerror());
    std::abort();
  }
  return reinterpret_cast<F>(f);
}

constexpr intptr_t kMuWriter = 0x0008;  // absl/synchronization/mutex.cc

// How the calling thread holds `mu`: exclusively (0) or shared.
unsigned HeldFlags(const absl::Mutex* mu) {
  const auto* word = reinterpret_cast<const std::atomic<intptr_t>*>(mu);
  return (word->load(std::memory_order_relaxed) & kMuWriter) != 0 ? 0 : __tsan_mutex_read_lock;
}

// The real functions call each other through the PLT too (CondVar::WaitWithTimeout calls
// WaitWithDeadline, for one), which lands here again: only the outermost call of a thread is
// annotated.
thread_local int tls_depth = 0;

class Scope {
 public:
  Scope() : outer_(tls_depth++ == 0) {}
  ~Scope() { --tls_depth; }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  bool outer() const { return outer_; }

 private:
  const bool outer_;
};

// Around a call that releases `mu` while it waits and holds it again on return.
template <typename F>
auto Released(absl::Mutex* mu, F wait) {
  Scope scope;
  if (!scope.outer()) return wait();
  const unsigned flags = HeldFlags(mu);
  __tsan_mutex_pre_unlock(mu, flags);
  __tsan_mutex_post_unlock(mu, flags);
  // The wait ends holding `mu`, and the Conditions it evaluates on the way read state guarded by
  // `mu`: from here on it is a lock operation (whose accesses TSan ignores until post_lock).
  __tsan_mutex_pre_lock(mu, flags);
  auto result = wait();
  __tsan_mutex_post_lock(mu, flags, 0);
  return result;
}

// Around a call that returns holding `mu` (Lock, LockWhen*).
template <typename F>
auto Locking(absl::Mutex* mu, unsigned flags, F lock) {
  Scope scope;
  if (!scope.outer()) return lock();
  __tsan_mutex_pre_lock(mu, flags);
  auto result = lock();
  __tsan_mutex_post_lock(mu, flags, 0);
  return result;
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

static_assert(sizeof(Mutex) == sizeof(intptr_t), "absl::Mutex layout changed");
static_assert(sizeof(Notification) == sizeof(Mutex) + sizeof(intptr_t),
              "absl::Notification layout changed");

using Cond = const Condition&;

// ---- Mutex ----

// ~Mutex is left alone: gRPC destroys objects whose last reference another thread dropped through
// an uninstrumented atomic, and a destroy annotation would be reported as racing with that
// thread's last unlock. Freeing the memory resets TSan's state for the mutex anyway.

void Mutex::Lock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex4LockEv");
  Locking(this, 0, [&] { return real(this), 0; });
}

void Mutex::ReaderLock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex10ReaderLockEv");
  Locking(this, __tsan_mutex_read_lock, [&] { return real(this), 0; });
}

bool Mutex::TryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("5Mutex7TryLockEv");
  Scope scope;
  if (!scope.outer()) return real(this);
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool locked = real(this);
  __tsan_mutex_post_lock(this, locked ? __tsan_mutex_try_lock : __tsan_mutex_try_lock_failed, 0);
  return locked;
}

bool Mutex::ReaderTryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("5Mutex13ReaderTryLockEv");
  Scope scope;
  if (!scope.outer()) return real(this);
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_read_lock);
  const bool locked = real(this);
  __tsan_mutex_post_lock(
      this, locked ? __tsan_mutex_try_read_lock : __tsan_mutex_try_read_lock_failed, 0);
  return locked;
}

void Mutex::Unlock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex6UnlockEv");
  Scope scope;
  if (!scope.outer()) return real(this);
  __tsan_mutex_pre_unlock(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, 0);
}

void Mutex::ReaderUnlock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex12ReaderUnlockEv");
  Scope scope;
  if (!scope.outer()) return real(this);
  __tsan_mutex_pre_unlock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_unlock(this, __tsan_mutex_read_lock);
}

// LockWhen* hold the mutex on return, whatever they answer.
void Mutex::LockWhen(Cond cond) {
  static const auto real = Real<void (*)(Mutex*, Cond)>("5Mutex8LockWhenERKNS0_9ConditionE");
  Locking(this, 0, [&] { return real(this, cond), 0; });
}

void Mutex::ReaderLockWhen(Cond cond) {
  static const auto real = Real<void (*)(Mutex*, Cond)>("5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  Locking(this, __tsan_mutex_read_lock, [&] { return real(this, cond), 0; });
}

bool Mutex::LockWhenWithTimeout(Cond cond, Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, Cond, Duration)>(
      "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return Locking(this, 0, [&] { return real(this, cond, timeout); });
}

bool Mutex::LockWhenWithDeadline(Cond cond, Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, Cond, Time)>(
      "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Locking(this, 0, [&] { return real(this, cond, deadline); });
}

bool Mutex::ReaderLockWhenWithTimeout(Cond cond, Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, Cond, Duration)>(
      "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return Locking(this, __tsan_mutex_read_lock, [&] { return real(this, cond, timeout); });
}

bool Mutex::ReaderLockWhenWithDeadline(Cond cond, Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, Cond, Time)>(
      "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Locking(this, __tsan_mutex_read_lock, [&] { return real(this, cond, deadline); });
}

// Await* release the mutex while they wait.
void Mutex::Await(Cond cond) {
  static const auto real = Real<void (*)(Mutex*, Cond)>("5Mutex5AwaitERKNS0_9ConditionE");
  Released(this, [&] { return real(this, cond), 0; });
}

bool Mutex::AwaitWithTimeout(Cond cond, Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, Cond, Duration)>(
      "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return Released(this, [&] { return real(this, cond, timeout); });
}

bool Mutex::AwaitWithDeadline(Cond cond, Time deadline) {
  static const auto real =
      Real<bool (*)(Mutex*, Cond, Time)>("5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Released(this, [&] { return real(this, cond, deadline); });
}

// ---- CondVar: a wait releases the mutex and holds it again on return ----

void CondVar::Wait(Mutex* mu) {
  static const auto real = Real<void (*)(CondVar*, Mutex*)>("7CondVar4WaitEPNS0_5MutexE");
  Released(mu, [&] { return real(this, mu), 0; });
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  static const auto real = Real<bool (*)(CondVar*, Mutex*, Duration)>(
      "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  return Released(mu, [&] { return real(this, mu, timeout); });
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static const auto real =
      Real<bool (*)(CondVar*, Mutex*, Time)>("7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  return Released(mu, [&] { return real(this, mu, deadline); });
}

// ---- Notification: HasBeenNotified() is an inline acquire load of notified_yet_, which Notify()
// stores in uninstrumented code; a release on that address gives the edge. ----

void Notification::Notify() {
  static const auto real = Real<void (*)(Notification*)>("12Notification6NotifyEv");
  __tsan_release(reinterpret_cast<char*>(this) + sizeof(Mutex));
  real(this);
}

// The waits return at once, without the mutex, when notified_yet_ is already set.
void Notification::WaitForNotification() const {
  static const auto real =
      Real<void (*)(const Notification*)>("12Notification19WaitForNotificationEv", true);
  real(this);
  __tsan_acquire(const_cast<char*>(reinterpret_cast<const char*>(this)) + sizeof(Mutex));
}

bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  static const auto real = Real<bool (*)(const Notification*, Duration)>(
      "12Notification30WaitForNotificationWithTimeoutENS0_8DurationE", true);
  const bool notified = real(this, timeout);
  if (notified) {
    __tsan_acquire(const_cast<char*>(reinterpret_cast<const char*>(this)) + sizeof(Mutex));
  }
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  static const auto real = Real<bool (*)(const Notification*, Time)>(
      "12Notification31WaitForNotificationWithDeadlineENS0_4TimeE", true);
  const bool notified = real(this, deadline);
  if (notified) {
    __tsan_acquire(const_cast<char*>(reinterpret_cast<const char*>(this)) + sizeof(Mutex));
  }
  return notified;
}

// ---- Status: a heap-allocated status (one with a message) is reference counted; the last
// Unref, in uninstrumented libabsl_status, deletes it. Every Unref releases, and acquires what
// the others released, so the deleting thread is ordered after every other holder. ----

void Status::UnrefNonInlined(uintptr_t rep) {
  static const auto real = Real<void (*)(uintptr_t)>("6Status15UnrefNonInlinedEm");
  if (!IsInlined(rep)) {
    __tsan_release(RepToPointer(rep));
    __tsan_acquire(RepToPointer(rep));
  }
  real(rep);
}

ABSL_NAMESPACE_END
}  // namespace absl

// ---- gRPC's completion queue: a batch of operations started with a tag happens before the
// callback that completes it, which may run on another gRPC thread. gRPC orders the two through
// its uninstrumented, lock-free completion queue; these two definitions tell TSan. Without them,
// every reactor would be reported as racing with its own callbacks (a reactor built on one
// thread, OnReadDone run on another). ----

extern "C" int grpc_call_start_batch(void* call, const void* ops, size_t nops, void* tag,
                                     void* reserved) {
  static const auto real = [] {
    void* f = dlsym(RTLD_NEXT, "grpc_call_start_batch");
    if (f == nullptr) std::abort();
    return reinterpret_cast<int (*)(void*, const void*, size_t, void*, void*)>(f);
  }();
  // Some callers use small integers as tags (the async API allows any value): not memory.
  if (reinterpret_cast<uintptr_t>(tag) > 0x10000) __tsan_release(tag);
  return real(call, ops, nops, tag, reserved);
}

// grpc::internal::CallbackWithSuccessTag::StaticRun(grpc_completion_queue_functor*, int): inline
// in grpcpp/support/callback_common.h, so every library holds a copy; the executable's wins (the
// tag stores its address as the functor to run).
void PsyncCallbackRun(void* functor, int ok) __asm__(
    "_ZN4grpc8internal22CallbackWithSuccessTag9StaticRunEP29grpc_completion_queue_functori");
void PsyncCallbackRun(void* functor, int ok) {
  static const auto real = [] {
    void* f = dlsym(RTLD_NEXT,
                    "_ZN4grpc8internal22CallbackWithSuccessTag9StaticRunEP29grpc_completion_queue_"
                    "functori");
    if (f == nullptr) std::abort();
    return reinterpret_cast<void (*)(void*, int)>(f);
  }();
  __tsan_acquire(functor);
  real(functor, ok);
}

// grpc::internal::CallbackWithStatusTag::StaticRun: the same for the callback client API's
// completion (a unary call's callback; the node agent forwards calls with it).
void PsyncStatusCallbackRun(void* functor, int ok) __asm__(
    "_ZN4grpc8internal21CallbackWithStatusTag9StaticRunEP29grpc_completion_queue_functori");
void PsyncStatusCallbackRun(void* functor, int ok) {
  static const auto real = [] {
    void* f = dlsym(RTLD_NEXT,
                    "_ZN4grpc8internal21CallbackWithStatusTag9StaticRunEP29grpc_completion_queue_"
                    "functori");
    if (f == nullptr) std::abort();
    return reinterpret_cast<void (*)(void*, int)>(f);
  }();
  __tsan_acquire(functor);
  real(functor, ok);
}

// grpc::internal::ServerCallbackCall::ScheduleOnDone(bool): called by the thread that dropped a
// server call's last reference (callbacks_outstanding_, an acq_rel counter), it runs OnDone and
// destroys the call, usually on another thread. Some of those decrements run in libgrpc++'s
// uninstrumented copy of the inline Unref(): acquiring the counter here orders the teardown after
// every callback that released it from instrumented code.
void PsyncScheduleOnDone(void* call, bool inline_ondone) __asm__(
    "_ZN4grpc8internal18ServerCallbackCall14ScheduleOnDoneEb");
void PsyncScheduleOnDone(void* call, bool inline_ondone) {
  static const auto real = [] {
    void* f = dlsym(RTLD_NEXT, "_ZN4grpc8internal18ServerCallbackCall14ScheduleOnDoneEb");
    if (f == nullptr) std::abort();
    return reinterpret_cast<void (*)(void*, bool)>(f);
  }();
  // callbacks_outstanding_ follows the vtable pointer and on_cancel_conditions_remaining_
  // (grpcpp/support/server_callback.h, gRPC 1.51).
  __tsan_acquire(static_cast<char*>(call) + sizeof(void*) + sizeof(std::atomic_int));
  real(call, inline_ondone);
}

// What TSan does not check (read by the TSan runtime at start-up; this library is linked into
// the executable, whose definition wins over the runtime's weak default): called_from_lib, the
// accesses that intercepted functions (memcpy, sendmsg, operator new and delete, ...) make on
// behalf of gRPC and Abseil, the uninstrumented libraries of Debian's gRPC stack. Their threads
// hand objects to each other through lock-free queues, SpinLocks and atomics TSan cannot see, so
// every buffer gRPC fills on one thread and sends or frees on another would be reported (seen
// from libgrpc, libupb, libabsl_status, libabsl_cord, libabsl_graphcycles_internal; the rest of
// the stack is listed alike). Accesses made by psync's own instrumented code are all
// still checked, including those to memory these libraries also touch, as are those made
// through libstdc++ and Protobuf.
#define PSYNC_UNCHECKED(lib) "called_from_lib:" lib "\n"
extern "C" const char* __tsan_default_suppressions() {
  return PSYNC_UNCHECKED("libgrpc++.so") PSYNC_UNCHECKED("libgrpc++_reflection.so") PSYNC_UNCHECKED(
      "libgrpc.so") PSYNC_UNCHECKED("libgpr.so") PSYNC_UNCHECKED("libaddress_sorting.so")
      PSYNC_UNCHECKED("libre2.so") PSYNC_UNCHECKED("libupb.so") PSYNC_UNCHECKED(
          "libcares.so") PSYNC_UNCHECKED("libssl.so") PSYNC_UNCHECKED("libcrypto.so")
          PSYNC_UNCHECKED("libz.so") PSYNC_UNCHECKED("libabsl_bad_any_cast_impl.so") PSYNC_UNCHECKED(
              "libabsl_bad_optional_access.so") PSYNC_UNCHECKED("libabsl_bad_variant_access.so")
              PSYNC_UNCHECKED("libabsl_base.so") PSYNC_UNCHECKED("libabsl_city.so") PSYNC_UNCHECKED(
                  "libabsl_civil_time.so") PSYNC_UNCHECKED("libabsl_cord.so")
                  PSYNC_UNCHECKED("libabsl_cord_internal.so") PSYNC_UNCHECKED(
                      "libabsl_cordz_functions.so") PSYNC_UNCHECKED("libabsl_cordz_handle.so")
                      PSYNC_UNCHECKED("libabsl_cordz_info.so") PSYNC_UNCHECKED(
                          "libabsl_cordz_sample_token.so")
                          PSYNC_UNCHECKED("libabsl_debugging_internal.so") PSYNC_UNCHECKED(
                              "libabsl_demangle_internal.so")
                              PSYNC_UNCHECKED("libabsl_examine_stack.so") PSYNC_UNCHECKED(
                                  "libabsl_exponential_biased.so")
                                  PSYNC_UNCHECKED("libabsl_flags_commandlineflag.so") PSYNC_UNCHECKED(
                                      "libabsl_flags_commandlineflag_internal.so")
                                      PSYNC_UNCHECKED("libabsl_flags_config.so") PSYNC_UNCHECKED(
                                          "libabsl_flags_internal.so")
                                          PSYNC_UNCHECKED("libabsl_flags_marshalling.so")
                                              PSYNC_UNCHECKED("libabsl_flags_parse.so") PSYNC_UNCHECKED(
                                                  "libabsl_flags_private_handle_accessor.so")
                                                  PSYNC_UNCHECKED("libabsl_flags_program_name.so")
                                                      PSYNC_UNCHECKED("libabsl_flags_reflection.so")
                                                          PSYNC_UNCHECKED("libabsl_flags_usage.so")
                                                              PSYNC_UNCHECKED(
                                                                  "libabsl_flags_usage_internal.so")
                                                                  PSYNC_UNCHECKED(
                                                                      "libabsl_graphcycles_"
                                                                      "internal.so")
                                                                      PSYNC_UNCHECKED(
                                                                          "libabsl_hash.so")
                                                                          PSYNC_UNCHECKED(
                                                                              "libabsl_hashtablez_"
                                                                              "sampler.so")
                                                                              PSYNC_UNCHECKED(
                                                                                  "libabsl_int128."
                                                                                  "so")
                                                                                  PSYNC_UNCHECKED(
                                                                                      "libabsl_"
                                                                                      "leak_check."
                                                                                      "so")
                                                                                      PSYNC_UNCHECKED(
                                                                                          "libabsl_"
                                                                                          "log_"
                                                                                          "severity"
                                                                                          ".so")
                                                                                          PSYNC_UNCHECKED(
                                                                                              "liba"
                                                                                              "bsl_"
                                                                                              "low_"
                                                                                              "leve"
                                                                                              "l_"
                                                                                              "hash"
                                                                                              ".so")
                                                                                              PSYNC_UNCHECKED(
                                                                                                  "libabsl_malloc_internal.so")
                                                                                                  PSYNC_UNCHECKED(
                                                                                                      "libabsl_periodic_sampler.so")
                                                                                                      PSYNC_UNCHECKED(
                                                                                                          "libabsl_random_distributions.so")
                                                                                                          PSYNC_UNCHECKED(
                                                                                                              "libabsl_random_internal_platform.so")
                                                                                                              PSYNC_UNCHECKED(
                                                                                                                  "libabsl_random_internal_pool_urbg.so")
                                                                                                                  PSYNC_UNCHECKED(
                                                                                                                      "libabsl_random_internal_randen.so")
                                                                                                                      PSYNC_UNCHECKED(
                                                                                                                          "libabsl_random_internal_randen_hwaes.so")
                                                                                                                          PSYNC_UNCHECKED(
                                                                                                                              "libabsl_random_internal_randen_hwaes_impl.so")
                                                                                                                              PSYNC_UNCHECKED(
                                                                                                                                  "libabsl_random_internal_randen_slow.so")
                                                                                                                                  PSYNC_UNCHECKED(
                                                                                                                                      "libabsl_random_internal_seed_material.so")
                                                                                                                                      PSYNC_UNCHECKED(
                                                                                                                                          "libabsl_random_seed_gen_exception.so")
                                                                                                                                          PSYNC_UNCHECKED(
                                                                                                                                              "libabsl_random_seed_sequences.so")
                                                                                                                                              PSYNC_UNCHECKED(
                                                                                                                                                  "libabsl_raw_hash_set.so")
                                                                                                                                                  PSYNC_UNCHECKED(
                                                                                                                                                      "libabsl_raw_logging_internal.so")
                                                                                                                                                      PSYNC_UNCHECKED(
                                                                                                                                                          "libabsl_scoped_set_env.so")
                                                                                                                                                          PSYNC_UNCHECKED(
                                                                                                                                                              "libabsl_spinlock_wait.so")
                                                                                                                                                              PSYNC_UNCHECKED(
                                                                                                                                                                  "libabsl_stacktrace.so")
                                                                                                                                                                  PSYNC_UNCHECKED(
                                                                                                                                                                      "libabsl_status.so")
                                                                                                                                                                      PSYNC_UNCHECKED(
                                                                                                                                                                          "libabsl_statusor.so")
                                                                                                                                                                          PSYNC_UNCHECKED(
                                                                                                                                                                              "libabsl_str_format_internal.so")
                                                                                                                                                                              PSYNC_UNCHECKED(
                                                                                                                                                                                  "libabsl_strerror.so")
                                                                                                                                                                                  PSYNC_UNCHECKED(
                                                                                                                                                                                      "libabsl_strings.so")
                                                                                                                                                                                      PSYNC_UNCHECKED(
                                                                                                                                                                                          "libabsl_strings_internal.so")
                                                                                                                                                                                          PSYNC_UNCHECKED(
                                                                                                                                                                                              "libabsl_symbolize.so")
                                                                                                                                                                                              PSYNC_UNCHECKED(
                                                                                                                                                                                                  "libabsl_synchronization.so")
                                                                                                                                                                                                  PSYNC_UNCHECKED(
                                                                                                                                                                                                      "libabsl_throw_delegate.so")
                                                                                                                                                                                                      PSYNC_UNCHECKED(
                                                                                                                                                                                                          "libabsl_time.so")
                                                                                                                                                                                                          PSYNC_UNCHECKED(
                                                                                                                                                                                                              "libabsl_time_zone.so")
      // The callback client API: a finished call's status message is copied (in the inline
      // CallOpClientRecvStatus::FinishOp, on a callback thread) out of a slice that libgrpc
      // allocated and filled unseen, in heap memory TSan last saw as another thread's block.
      "race:grpc::internal::CallOpClientRecvStatus::FinishOp\n";
}

#endif  // PSYNC_TSAN
