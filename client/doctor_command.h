// `kiln doctor`: is the server there and healthy, and do this client and it
// agree? One line per check (ok, warn or FAIL) from GetServerInfo and
// GetCacheStats; the exit status is 1 when any check fails, warnings are 0.
#ifndef KILN_CLIENT_DOCTOR_COMMAND_H_
#define KILN_CLIENT_DOCTOR_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

#include "client/kiln_client.h"

namespace kiln::client {

struct DoctorCheck {
  enum class Verdict { kOk, kWarn, kFail };
  std::string name;  // "reachable", "version", "cache.writable"...
  Verdict verdict = Verdict::kOk;
  std::string detail;
};

// Asks the server at `target` and prints the checks as text or, with `json`,
// as one document. Returns the exit status.
int DoctorCommand(KilnClient& client, const std::string& target, bool json, std::ostream& out);

}  // namespace kiln::client

#endif  // KILN_CLIENT_DOCTOR_COMMAND_H_
