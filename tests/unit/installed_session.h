// A capture session (core/capture.h) installed as the process's host boundary for one test
// and uninstalled when it ends, so that no other test reads through it.
#pragma once

#include <memory>
#include <utility>

#include "core/capture.h"

namespace rdmascope::testing {

class InstalledSession {
 public:
  explicit InstalledSession(std::unique_ptr<capture::Session> session)
      : session_(std::move(session)) {
    capture::Install(session_.get());
  }
  ~InstalledSession() { capture::Install(nullptr); }
  InstalledSession(const InstalledSession&) = delete;
  InstalledSession& operator=(const InstalledSession&) = delete;
  capture::Session& operator*() { return *session_; }
  capture::Session* operator->() { return session_.get(); }

 private:
  std::unique_ptr<capture::Session> session_;
};

}  // namespace rdmascope::testing
