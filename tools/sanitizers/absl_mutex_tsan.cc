// ThreadSanitizer cannot see Debian's absl::Mutex: libabsl_synchronization is
// an uninstrumented g++ build whose Mutex is its own futex code, not
// pthreads, so every field a Kiln absl::Mutex guards read as a data race
// (264 reports in one `--config=tsan` run, all of that kind). Under
// -fsanitize=thread this file interposes the Mutex and CondVar entry points
// Kiln and gRPC call: each forwards to Abseil's own (found with
// dlsym(RTLD_NEXT)) and tells TSan what it did -- acquire after a lock,
// release before an unlock, both around a wait -- which is what an
// instrumented Abseil's annotations would say. Built only with KILN_TSAN
// (.bazelrc's tsan config); elsewhere it is empty.
#if defined(KILN_TSAN)

#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"

namespace {

// Abseil's own definition of the symbol `mangled`.
template <typename Fn>
Fn Real(const char* mangled) {
  void* f = dlsym(RTLD_NEXT, mangled);
  if (f == nullptr) {
    std::fprintf(stderr, "absl_mutex_tsan: no %s in the loaded Abseil\n", mangled);
    std::abort();
  }
  return reinterpret_cast<Fn>(f);
}

void Acquired(const void* mu) { __tsan_acquire(const_cast<void*>(mu)); }
void Releasing(const void* mu) { __tsan_release(const_cast<void*>(mu)); }

// A waiter's condition is evaluated with the mutex held, but inside Abseil:
// by the waiter, or by whichever thread is unlocking. Evaluated through
// this, it acquires and releases the mutex in TSan's eyes, as the thread
// holding it does.
struct AnnotatedCondition {
  const absl::Mutex* mu;
  const absl::Condition* cond;

  static bool Eval(AnnotatedCondition* c) {
    Acquired(c->mu);
    const bool holds = c->cond->Eval();
    Releasing(c->mu);
    return holds;
  }
  absl::Condition Wrapped() { return absl::Condition(&AnnotatedCondition::Eval, this); }
};

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

#define KILN_REAL(type, mangled) static const auto real = Real<type>(mangled)

void Mutex::Lock() {
  KILN_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex4LockEv");
  real(this);
  Acquired(this);
}

void Mutex::Unlock() {
  KILN_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex6UnlockEv");
  Releasing(this);
  real(this);
}

bool Mutex::TryLock() {
  KILN_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked) Acquired(this);
  return locked;
}

void Mutex::ReaderLock() {
  KILN_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex10ReaderLockEv");
  real(this);
  Acquired(this);
}

void Mutex::ReaderUnlock() {
  KILN_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex12ReaderUnlockEv");
  Releasing(this);
  real(this);
}

bool Mutex::ReaderTryLock() {
  KILN_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex13ReaderTryLockEv");
  const bool locked = real(this);
  if (locked) Acquired(this);
  return locked;
}

void Mutex::LockWhen(const Condition& cond) {
  KILN_REAL(void (*)(Mutex*, const Condition&), "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  AnnotatedCondition annotated{this, &cond};
  real(this, annotated.Wrapped());
  Acquired(this);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  KILN_REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
            "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  AnnotatedCondition annotated{this, &cond};
  const bool met = real(this, annotated.Wrapped(), timeout);
  Acquired(this);  // held either way
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  KILN_REAL(bool (*)(Mutex*, const Condition&, absl::Time),
            "_ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  AnnotatedCondition annotated{this, &cond};
  const bool met = real(this, annotated.Wrapped(), deadline);
  Acquired(this);
  return met;
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  KILN_REAL(void (*)(Mutex*, const Condition&),
            "_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE");
  AnnotatedCondition annotated{this, &cond};
  real(this, annotated.Wrapped());
  Acquired(this);
}

// Await and the waits release the mutex and take it again inside Abseil.
void Mutex::Await(const Condition& cond) {
  KILN_REAL(void (*)(Mutex*, const Condition&), "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  AnnotatedCondition annotated{this, &cond};
  Releasing(this);
  real(this, annotated.Wrapped());
  Acquired(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  KILN_REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
            "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  AnnotatedCondition annotated{this, &cond};
  Releasing(this);
  const bool met = real(this, annotated.Wrapped(), timeout);
  Acquired(this);
  return met;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, absl::Time deadline) {
  KILN_REAL(bool (*)(Mutex*, const Condition&, absl::Time),
            "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  AnnotatedCondition annotated{this, &cond};
  Releasing(this);
  const bool met = real(this, annotated.Wrapped(), deadline);
  Acquired(this);
  return met;
}

void CondVar::Wait(Mutex* mu) {
  KILN_REAL(void (*)(CondVar*, Mutex*), "_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE");
  Releasing(mu);
  real(this, mu);
  Acquired(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  KILN_REAL(bool (*)(CondVar*, Mutex*, absl::Duration),
            "_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  Releasing(mu);
  const bool timed_out = real(this, mu, timeout);
  Acquired(mu);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  KILN_REAL(bool (*)(CondVar*, Mutex*, absl::Time),
            "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  Releasing(mu);
  const bool timed_out = real(this, mu, deadline);
  Acquired(mu);
  return timed_out;
}

#undef KILN_REAL

ABSL_NAMESPACE_END
}  // namespace absl

#endif  // defined(KILN_TSAN)
